package libvirt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	golibvirt "libvirt.org/go/libvirt"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/internal/testenv/libvirtenv"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const (
	guestMarker  = "GUEST-BOOTED"
	bootTimeout  = 60 * time.Second
	shutdownWait = 5 * time.Second
)

// tinyGuestVMI is a kernel-boot VMI of the test guest, the way a user would
// write it; the launcher's extracted kernel and initrd come in through
// Options.
func tinyGuestVMI(name string, uid types.UID) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vmkit-test", Name: name, UID: uid},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Machine: &v1.Machine{Type: "pc"},
				Firmware: &v1.Firmware{KernelBoot: &v1.KernelBoot{
					KernelArgs: "console=ttyS0 panic=-1 quiet mitigations=off cryptomgr.notests tsc=reliable no_timer_check",
					Container: &v1.KernelBootContainer{
						Image:      "registry.example/tiny-guest:1",
						KernelPath: "/boot/vmlinux",
						InitrdPath: "/boot/initramfs-idle.cpio.gz",
					},
				}},
				Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
				Devices: v1.Devices{AutoattachMemBalloon: v1.BoolPtr(false)},
			},
		},
	}
}

// defineTinyGuest defines the domain xml (named name) and removes it when
// the test ends; called after t.TempDir, so the removal runs before the
// guest's directory goes.
func defineTinyGuest(t *testing.T, h *Hypervisor, xml, name string) hypervisor.Domain {
	t.Helper()
	defined, err := h.Define(context.Background(), xml)
	if err != nil {
		t.Fatalf("Define: %v\n%s", err, xml)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := h.Destroy(ctx, name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
		if err := h.Undefine(ctx, name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
	})
	return defined
}

// requireQEMU returns the libvirt URI of the tests, failing when it is
// missing or libvirt's mock driver, which runs no guest.
func requireQEMU(t *testing.T) string {
	t.Helper()
	uri := libvirtenv.RequireLibvirt(t)
	if strings.HasPrefix(uri, "test:") {
		t.Fatalf("%s=%s is libvirt's mock driver, which runs no guest; this test needs QEMU (unset %s)",
			libvirtenv.LibvirtURIEnv, uri, libvirtenv.LibvirtURIEnv)
	}
	return uri
}

// requireAgentGuest returns the test guest and its initramfs with Debian's
// QEMU guest agent (initramfs-agent.cpio.gz).
func requireAgentGuest(t *testing.T) (libvirtenv.Guest, string) {
	t.Helper()
	guest := libvirtenv.RequireGuest(t)
	initrd := filepath.Join(filepath.Dir(guest.IdleInitramfs), "initramfs-agent.cpio.gz")
	if _, err := os.Stat(initrd); err != nil {
		t.Fatalf("the guest agent test guest is missing (%v); build it with: hack/make-guest.sh (as root)", err)
	}
	return guest, initrd
}

// tinyGuestXML is the domain XML (and the domain's name) of vmi booting
// kernel and initrd under emulation, its serial console and VNC sockets in dir.
func tinyGuestXML(t *testing.T, vmi *v1.VirtualMachineInstance, kernel, initrd, dir string) (xml, name string) {
	t.Helper()
	dom, err := domainxml.Convert(vmi, domainxml.Options{
		Emulation:    true,
		KernelPath:   kernel,
		InitrdPath:   initrd,
		SerialSocket: filepath.Join(dir, "serial.sock"),
		SerialLog:    filepath.Join(dir, "serial.log"),
		VNCSocket:    filepath.Join(dir, "vnc.sock"),
	})
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	xml, err = domainxml.Marshal(dom)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return xml, dom.Name
}

// TestBootTinyGuest is the real boot: domainxml converts a kernel-boot VMI
// of the test guest for emulation, and this package defines it on
// qemu:///system, starts it paused, attaches the serial console, resumes it,
// reads the console until the guest's marker, pauses and resumes it, shuts
// it down (destroying it if the idle guest ignores ACPI) and undefines it,
// checking the state after every step.
func TestBootTinyGuest(t *testing.T) {
	uri := requireQEMU(t)
	guest := libvirtenv.RequireGuest(t)
	h := newTestHypervisor(t, uri)

	dir := t.TempDir()
	uid := types.UID(randomUUID(t))
	xml, name := tinyGuestXML(t, tinyGuestVMI("boot-"+randomSuffix(t), uid), guest.Kernel, guest.IdleInitramfs, dir)

	ctx := context.Background()
	defined := defineTinyGuest(t, h, xml, name)
	if defined.Name != name || defined.VMI.UID != string(uid) {
		t.Fatalf("Define returned %+v, want %s of VMI %s", defined, name, uid)
	}
	wantState := func(step string, st hypervisor.State, reasons ...hypervisor.Reason) {
		t.Helper()
		got, err := h.State(ctx, name)
		if err != nil {
			t.Fatalf("after %s: State: %v", step, err)
		}
		for _, r := range reasons {
			if got.State == st && got.Reason == r {
				t.Logf("after %s: %v", step, got)
				return
			}
		}
		t.Fatalf("after %s: state %v, want %s with reason %v", step, got, st, reasons)
	}
	wantState("Define", hypervisor.StateShutoff, hypervisor.ReasonUnknown)

	// Start paused so the console is attached before the guest prints.
	started := time.Now()
	if err := h.Start(ctx, name, hypervisor.StartOptions{Paused: true}); err != nil {
		t.Fatalf("Start: %v\n%s", err, xml)
	}
	wantState("Start paused", hypervisor.StatePaused, hypervisor.ReasonStartingUp, hypervisor.ReasonUser)
	console, err := h.Console(ctx, name)
	if err != nil {
		t.Fatalf("Console: %v", err)
	}
	defer console.Close()
	if err := h.Resume(ctx, name); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	line, output, err := readUntil(console, guestMarker, bootTimeout)
	if err != nil {
		t.Fatalf("serial console: %v; output so far:\n%s", err, output)
	}
	bootTime := time.Since(started)
	t.Logf("start to %q on the console: %v (%s)", guestMarker, bootTime.Round(time.Millisecond), line)
	wantState("boot", hypervisor.StateRunning, hypervisor.ReasonUnpaused)

	if err := h.Pause(ctx, name); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	wantState("Pause", hypervisor.StatePaused, hypervisor.ReasonUser)
	if err := h.Resume(ctx, name); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	wantState("Resume", hypervisor.StateRunning, hypervisor.ReasonUnpaused)

	if got, err := h.List(ctx, string(uid)); err != nil || len(got) != 1 || got[0].Name != name || got[0].State.State != hypervisor.StateRunning {
		t.Errorf("List(%s) = %+v, %v; want the running %s", uid, got, err, name)
	}

	destroyed, err := hypervisor.StopGracefully(ctx, h, name, shutdownWait, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("StopGracefully: %v", err)
	}
	if destroyed {
		t.Logf("the guest ignored the ACPI power button for %v and was destroyed", shutdownWait)
		wantState("StopGracefully", hypervisor.StateShutoff, hypervisor.ReasonDestroyed)
	} else {
		wantState("StopGracefully", hypervisor.StateShutoff, hypervisor.ReasonShutdown)
	}
	// The console ends with the guest.
	if _, _, err := readUntil(console, "\x00never", 10*time.Second); err == nil || strings.Contains(err.Error(), "timed out") {
		t.Errorf("console after the domain stopped: %v, want it closed", err)
	}

	if err := h.Undefine(ctx, name); err != nil {
		t.Fatalf("Undefine: %v", err)
	}
	if _, err := h.State(ctx, name); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("State after Undefine: %v, want ErrNotFound", err)
	}
	if got, err := h.List(ctx, string(uid)); err != nil || len(got) != 0 {
		t.Errorf("List(%s) after Undefine = %+v, %v; want nothing", uid, got, err)
	}
}

// TestRebootACPI soft-reboots the test guest that powers itself off right
// after it booted (initramfs.cpio.gz) with the ACPI power button: libvirt
// turns the power-off that follows into a restart, so the guest boots a
// second time before its second power-off ends the domain. Without the
// reboot the domain would end after one boot.
func TestRebootACPI(t *testing.T) {
	uri := requireQEMU(t)
	guest := libvirtenv.RequireGuest(t)
	h := newTestHypervisor(t, uri)

	dir := t.TempDir()
	xml, name := tinyGuestXML(t, tinyGuestVMI("reboot-"+randomSuffix(t), types.UID(randomUUID(t))), guest.Kernel, guest.Initramfs, dir)
	ctx := context.Background()
	defineTinyGuest(t, h, xml, name)
	if err := h.Reboot(ctx, name, hypervisor.RebootACPI); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("Reboot of a shut-off domain: %v, want ErrInvalidState", err)
	}
	if err := h.Start(ctx, name, hypervisor.StartOptions{Paused: true}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := h.Reboot(ctx, name, hypervisor.RebootACPI); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("Reboot of a paused domain: %v, want ErrInvalidState", err)
	}
	console, err := h.Console(ctx, name)
	if err != nil {
		t.Fatalf("Console: %v", err)
	}
	defer console.Close()
	if err := h.Resume(ctx, name); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	// The guest takes seconds to boot under emulation: the request is in
	// before it powers off.
	if err := h.Reboot(ctx, name, hypervisor.RebootACPI); err != nil {
		t.Fatalf("Reboot: %v", err)
	}
	first, out, err := readUntil(console, guestMarker, bootTimeout)
	if err != nil {
		t.Fatalf("first boot: %v; console:\n%s", err, out)
	}
	rest := bytes.SplitN(out, []byte(first), 2)[1]
	second, more, err := readUntil(io.MultiReader(bytes.NewReader(rest), console), guestMarker, bootTimeout)
	if err != nil {
		t.Fatalf("no second boot after the ACPI reboot: %v; console after the first boot:\n%s", err, more)
	}
	t.Logf("%q, then after the ACPI reboot %q", first, second)
	deadline := time.Now().Add(bootTimeout)
	for {
		st, err := h.State(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == hypervisor.StateShutoff {
			if st.Reason != hypervisor.ReasonShutdown {
				t.Errorf("after the second power-off: %v, want shut off by the guest", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guest did not power off after its second boot: %v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReset hard-resets the idle test guest, which stays up once booted:
// after each Reset the guest boots again (its marker on the console a
// second time) in the same QEMU process (the same libvirt domain ID), and
// the domain stays running; a paused domain is reset and stays paused, its
// guest booting again once resumed. A shut-off domain cannot be reset.
func TestReset(t *testing.T) {
	uri := requireQEMU(t)
	guest := libvirtenv.RequireGuest(t)
	h := newTestHypervisor(t, uri)

	dir := t.TempDir()
	xml, name := tinyGuestXML(t, tinyGuestVMI("reset-"+randomSuffix(t), types.UID(randomUUID(t))), guest.Kernel, guest.IdleInitramfs, dir)
	ctx := context.Background()
	defineTinyGuest(t, h, xml, name)
	if err := h.Reset(ctx, name); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("Reset of a shut-off domain: %v, want ErrInvalidState", err)
	}
	if err := h.Reset(ctx, "vmkit-test_no-such-domain"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("Reset of a missing domain: %v, want ErrNotFound", err)
	}
	if err := h.Start(ctx, name, hypervisor.StartOptions{Paused: true}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	console, err := h.Console(ctx, name)
	if err != nil {
		t.Fatalf("Console: %v", err)
	}
	defer console.Close()
	domainID := func() uint {
		t.Helper()
		var id uint
		if err := h.onDomain(ctx, "id", name, func(d *golibvirt.Domain) error {
			var err error
			id, err = d.GetID()
			return err
		}); err != nil {
			t.Fatalf("domain ID: %v", err)
		}
		return id
	}
	id := domainID()
	if err := h.Resume(ctx, name); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	// boot waits for the guest's marker, after whatever the console
	// printed since the last one.
	var pending []byte
	boot := func(what string) {
		t.Helper()
		began := time.Now()
		line, out, err := readUntil(io.MultiReader(bytes.NewReader(pending), console), guestMarker, bootTimeout)
		if err != nil {
			t.Fatalf("%s: %v; console:\n%s", what, err, out)
		}
		pending = bytes.SplitN(out, []byte(line), 2)[1]
		t.Logf("%s: %q after %v", what, line, time.Since(began).Round(time.Millisecond))
	}
	wantState := func(step string, want hypervisor.State) {
		t.Helper()
		st, err := h.State(ctx, name)
		if err != nil || st.State != want {
			t.Fatalf("after %s: %v, %v; want %s", step, st, err, want)
		}
		if got := domainID(); got != id {
			t.Fatalf("after %s: domain ID %d, want %d: a new QEMU process", step, got, id)
		}
	}
	boot("first boot")

	if err := h.Reset(ctx, name); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	boot("boot after the reset")
	wantState("the reset", hypervisor.StateRunning)

	if err := h.Pause(ctx, name); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := h.Reset(ctx, name); err != nil {
		t.Fatalf("Reset of the paused domain: %v", err)
	}
	wantState("the reset of the paused domain", hypervisor.StatePaused)
	if err := h.Resume(ctx, name); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	boot("boot after the paused reset and a resume")
	wantState("the resume", hypervisor.StateRunning)
}

// readUntil reads r until a line containing marker is complete and returns
// that line and everything read; it gives up after timeout, closing r if it
// is an io.Closer so the reading goroutine ends.
func readUntil(r io.Reader, marker string, timeout time.Duration) (line string, output []byte, err error) {
	type result struct {
		line string
		out  []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var out []byte
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			out = append(out, buf[:n]...)
			if i := bytes.Index(out, []byte(marker)); i >= 0 {
				if j := bytes.IndexByte(out[i:], '\n'); j >= 0 {
					done <- result{strings.TrimSpace(string(out[i : i+j])), out, nil}
					return
				}
			}
			if err != nil {
				done <- result{"", out, err}
				return
			}
		}
	}()
	select {
	case res := <-done:
		return res.line, res.out, res.err
	case <-time.After(timeout):
		if c, ok := r.(io.Closer); ok {
			_ = c.Close()
		}
		res := <-done
		return "", res.out, errors.New("timed out waiting for " + marker)
	}
}

// TestGuestAgent boots the test guest with Debian's qemu-ga
// (initramfs-agent.cpio.gz) and talks to the agent through the channel
// domainxml adds: ErrAgentUnavailable until it answers, then guest-ping and
// guest-get-osinfo with the guest's os-release.
func TestGuestAgent(t *testing.T) {
	uri := requireQEMU(t)
	guest, initrd := requireAgentGuest(t)
	h := newTestHypervisor(t, uri)

	dir := t.TempDir()
	xml, name := tinyGuestXML(t, tinyGuestVMI("agent-"+randomSuffix(t), types.UID(randomUUID(t))), guest.Kernel, initrd, dir)
	ctx := context.Background()
	defineTinyGuest(t, h, xml, name)
	const ping = `{"execute":"guest-ping"}`
	if _, err := h.GuestAgentCommand(ctx, name, ping); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("agent command on a shut-off domain: %v, want ErrInvalidState", err)
	}
	started := time.Now()
	if err := h.Start(ctx, name, hypervisor.StartOptions{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	var lastErr error
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		reply, err := h.GuestAgentCommand(cctx, name, ping)
		cancel()
		if err == nil {
			if reply != `{"return":{}}` {
				t.Fatalf("guest-ping = %s, want {\"return\":{}}", reply)
			}
			break
		}
		if !errors.Is(err, hypervisor.ErrAgentUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("guest-ping before the agent started: %v, want ErrAgentUnavailable", err)
		}
		lastErr = err
		if time.Since(started) > bootTimeout {
			t.Fatalf("no answer from the guest agent %v after start: %v", bootTimeout, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("start to the first guest-ping answer: %v (before: %v)", time.Since(started).Round(time.Millisecond), lastErr)
	reply, err := h.GuestAgentCommand(ctx, name, `{"execute":"guest-get-osinfo"}`)
	if err != nil {
		t.Fatalf("guest-get-osinfo: %v", err)
	}
	if !strings.Contains(reply, `"name":"vmkit test guest"`) || !strings.Contains(reply, `"kernel-release":"6.`) {
		t.Errorf("guest-get-osinfo = %s, want the guest's os-release and kernel", reply)
	}
	if _, err := h.GuestAgentCommand(ctx, name, `{"execute":"guest-no-such-command"}`); err == nil || errors.Is(err, hypervisor.ErrAgentUnavailable) {
		t.Errorf("an unknown command: %v, want the agent's error", err)
	}

	// A soft reboot through the agent: qemu-ga runs the guest's
	// /sbin/shutdown -r, which the busybox guest lacks; the test gives it
	// one, as a distribution has, and the guest boots again.
	agentExec(t, h, name, "/bin/busybox mkdir -p /sbin && "+
		`printf '#!/bin/busybox sh\ncase " $* " in *" -r "*) exec /bin/busybox reboot -f ;; esac\nexec /bin/busybox poweroff -f\n' >/sbin/shutdown && `+
		"/bin/busybox chmod 755 /sbin/shutdown")
	console, err := h.Console(ctx, name)
	if err != nil {
		t.Fatalf("Console: %v", err)
	}
	defer console.Close()
	rebooted := time.Now()
	if err := h.Reboot(ctx, name, hypervisor.RebootGuestAgent); err != nil {
		t.Fatalf("Reboot through the guest agent: %v", err)
	}
	line, out, err := readUntil(console, guestMarker, bootTimeout)
	if err != nil {
		t.Fatalf("no boot after the reboot through the guest agent: %v; console:\n%s", err, out)
	}
	t.Logf("Reboot through the guest agent to %q: %v", line, time.Since(rebooted).Round(time.Millisecond))
	if st, err := h.State(ctx, name); err != nil || st.State != hypervisor.StateRunning {
		t.Errorf("after the reboot: %v, %v; want the domain running", st, err)
	}
}

// agentExec runs script with the guest's shell through the guest agent
// (guest-exec), waits for it to succeed and returns its output.
func agentExec(t *testing.T, h *Hypervisor, name, script string) string {
	t.Helper()
	ctx := context.Background()
	cmd, _ := json.Marshal(map[string]any{"execute": "guest-exec", "arguments": map[string]any{
		"path": "/bin/busybox", "arg": []string{"sh", "-c", script}, "capture-output": true}})
	reply, err := h.GuestAgentCommand(ctx, name, string(cmd))
	if err != nil {
		t.Fatalf("guest-exec: %v", err)
	}
	var started struct {
		Return struct {
			PID int `json:"pid"`
		} `json:"return"`
	}
	if err := json.Unmarshal([]byte(reply), &started); err != nil {
		t.Fatalf("guest-exec: %v: %s", err, reply)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		reply, err := h.GuestAgentCommand(ctx, name, fmt.Sprintf(`{"execute":"guest-exec-status","arguments":{"pid":%d}}`, started.Return.PID))
		if err != nil {
			t.Fatalf("guest-exec-status: %v", err)
		}
		var st struct {
			Return struct {
				Exited   bool   `json:"exited"`
				ExitCode int    `json:"exitcode"`
				Stdout   []byte `json:"out-data"`
				Stderr   []byte `json:"err-data"`
			} `json:"return"`
		}
		if err := json.Unmarshal([]byte(reply), &st); err != nil {
			t.Fatalf("guest-exec-status: %v: %s", err, reply)
		}
		if st.Return.Exited {
			if st.Return.ExitCode != 0 {
				t.Fatalf("%s in the guest: exit code %d: %s", script, st.Return.ExitCode, st.Return.Stderr)
			}
			return string(st.Return.Stdout)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in the guest: still running after 10s", script)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSetVCPUs hot-plugs a vCPU into the running tiny guest (one socket,
// maxSockets 2): libvirt reports two live vCPUs, QEMU runs a second vCPU
// thread, and the guest's kernel, booted without quiet, reports the new
// CPU on the console. Counts of 0 or above the maximum are refused, as is a
// shut-off domain.
func TestSetVCPUs(t *testing.T) {
	uri := requireQEMU(t)
	guest := libvirtenv.RequireGuest(t)
	h := newTestHypervisor(t, uri)

	vmi := tinyGuestVMI("vcpus-"+randomSuffix(t), types.UID(randomUUID(t)))
	vmi.Spec.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 1, Threads: 1, MaxSockets: 2}
	vmi.Spec.Domain.Firmware.KernelBoot.KernelArgs = strings.Replace(vmi.Spec.Domain.Firmware.KernelBoot.KernelArgs, "quiet", "loglevel=7", 1)
	xml, name := tinyGuestXML(t, vmi, guest.Kernel, guest.IdleInitramfs, t.TempDir())
	ctx := context.Background()
	defineTinyGuest(t, h, xml, name)
	if err := h.SetVCPUs(ctx, name, 2); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("SetVCPUs of a shut-off domain: %v, want ErrInvalidState", err)
	}
	if err := h.Start(ctx, name, hypervisor.StartOptions{Paused: true}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	console, err := h.Console(ctx, name)
	if err != nil {
		t.Fatalf("Console: %v", err)
	}
	defer console.Close()
	if err := h.Resume(ctx, name); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	_, out, err := readUntil(console, guestMarker, bootTimeout)
	if err != nil {
		t.Fatalf("boot: %v; console:\n%s", err, out)
	}
	for _, bad := range []uint{0, 3} {
		if err := h.SetVCPUs(ctx, name, bad); err == nil || !strings.Contains(err.Error(), "the domain has 1 to 2") {
			t.Errorf("SetVCPUs(%d): %v, want refused naming 1 to 2", bad, err)
		}
	}
	if err := h.SetVCPUs(ctx, name, 2); err != nil {
		t.Fatalf("SetVCPUs(2): %v", err)
	}
	var live int32
	if err := h.onDomain(ctx, "vcpus", name, func(d *golibvirt.Domain) error {
		var err error
		live, err = d.GetVcpusFlags(golibvirt.DOMAIN_VCPU_LIVE)
		return err
	}); err != nil || live != 2 {
		t.Fatalf("live vCPUs after SetVCPUs(2): %d, %v; want 2", live, err)
	}
	// The guest's kernel sees the CPU arrive (ACPI processor hotplug).
	if _, out, err := readUntil(console, "has been hot-added", bootTimeout); err != nil {
		t.Fatalf("the guest did not report the new CPU: %v; console:\n%s", err, out)
	}
}

// TestPluggedMemory hot-plugs memory into the guest (the agent guest loads
// virtio_mem and onlines what it plugs): the device's plugged size, which
// only the guest's driver raises, reaches the requested 256 MiB, and the
// guest's MemTotal grows by it.
func TestPluggedMemory(t *testing.T) {
	uri := requireQEMU(t)
	guest, initrd := requireAgentGuest(t)
	h := newTestHypervisor(t, uri)

	vmi := tinyGuestVMI("mem-"+randomSuffix(t), types.UID(randomUUID(t)))
	vmi.Spec.Domain.Memory = &v1.Memory{Guest: ptr.To(resource.MustParse("1Gi")), MaxGuest: ptr.To(resource.MustParse("2Gi"))}
	xml, name := tinyGuestXML(t, vmi, guest.Kernel, initrd, t.TempDir())
	ctx := context.Background()
	defineTinyGuest(t, h, xml, name)
	if err := h.SetPluggedMemory(ctx, name, 256<<20); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("SetPluggedMemory of a shut-off domain: %v, want ErrInvalidState", err)
	}
	if err := h.Start(ctx, name, hypervisor.StartOptions{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitAgent(t, h, name)
	memTotal := func() string { return agentExec(t, h, name, "grep MemTotal /proc/meminfo") }
	before := memTotal()
	m, err := h.PluggedMemory(ctx, name)
	if err != nil || m.Size != 1<<30 || m.Plugged != 0 {
		t.Fatalf("PluggedMemory at boot = %+v, %v; want size 1Gi, nothing plugged", m, err)
	}
	for _, bad := range []uint64{2 << 30, 1<<20 + 4096} {
		if err := h.SetPluggedMemory(ctx, name, bad); err == nil {
			t.Errorf("SetPluggedMemory(%d) was taken, want refused", bad)
		}
	}
	asked := time.Now()
	if err := h.SetPluggedMemory(ctx, name, 256<<20); err != nil {
		t.Fatalf("SetPluggedMemory(256Mi): %v", err)
	}
	deadline := time.Now().Add(bootTimeout)
	for {
		m, err = h.PluggedMemory(ctx, name)
		if err == nil && m.Plugged == 256<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guest did not plug 256Mi: %+v, %v", m, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the guest plugged 256Mi %v after SetPluggedMemory", time.Since(asked).Round(time.Millisecond))
	after := memTotal()
	kib := func(line string) int64 {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("MemTotal line %q", line)
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("MemTotal line %q: %v", line, err)
		}
		return n
	}
	if grew := kib(after) - kib(before); grew != 256<<10 {
		t.Errorf("the guest's MemTotal grew by %d KiB (%q → %q), want 262144", grew, before, after)
	}
}
