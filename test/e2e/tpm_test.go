package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// tpmProbed is the guest kernel's line for a TPM 2.0 its tpm_tis driver
// found, e.g. "tpm_tis tpm_tis: 2.0 TPM (device-id 0x1, rev-id 1)".
var tpmProbed = regexp.MustCompile(`tpm_tis \S+: 2\.0 TPM \(device-id`)

// TestTPM: a VM with tpm: {} runs in the stock launcher image (swtpm from
// Debian), its guest's kernel finds a TPM 2.0, and libvirt's swtpm runs as
// the launcher's non-root user and ends with the VM.
func TestTPM(t *testing.T) {
	c := need(t)
	vm := tinyVM(t, "vm-tpm", v1.RunStrategyAlways)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.TPM = &v1.TPMDevice{}
	// Not quiet (the driver's line is informational); tpm_tis.force=1: the
	// tiny guest's vmlinux boots through QEMU's PVH entry, where a machine
	// with a TPM gets garbled ACPI tables, so the driver probes the TIS
	// address itself.
	spec.Domain.Firmware.KernelBoot.KernelArgs = strings.Replace(spec.Domain.Firmware.KernelBoot.KernelArgs, " quiet", "", 1) + " tpm_tis.force=1"
	began := time.Now()
	createVM(t, c, vm)
	vmi := waitVMI(t, c, vm.Name, "Running", running)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	lines, err := c.Console(ctx, "default", vm.Name, guestMarker)
	if err != nil {
		t.Fatalf("%v (console so far: %q)\n%s", err, lines, componentLogs(c))
	}
	found := ""
	for _, l := range lines {
		if tpmProbed.MatchString(l) {
			found = strings.TrimSpace(l)
		}
	}
	if found == "" {
		t.Fatalf("the guest's kernel found no TPM 2.0 (no line matching %s); console:\n%s", tpmProbed, strings.Join(lines, "\n"))
	}
	t.Logf("VM create → %s on the console %v; guest: %s", guestMarker, time.Since(began).Round(time.Millisecond), found)

	pids := swtpmPIDs(t, "default_"+vm.Name)
	if len(pids) != 1 {
		t.Fatalf("%d swtpm processes for default_%s, want 1", len(pids), vm.Name)
	}
	pod := launcherPod(t, c, vmi)
	want := int64(107) // KubeVirt's non-root launcher user
	if sc := pod.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		want = *sc.RunAsUser
	}
	if u := procUser(t, pids[0]); int64(u) != want {
		t.Errorf("swtpm runs as uid %d, want the launcher's %d", u, want)
	}

	setRunStrategy(t, c, vm.Name, v1.RunStrategyHalted)
	waitNoVMI(t, c, vm.Name)
	waitFor(t, "swtpm of "+vm.Name+" gone", time.Minute, func() (bool, string) {
		left := swtpmPIDs(t, "default_"+vm.Name)
		return len(left) == 0, "swtpm PIDs " + pidsString(left)
	})
}

// swtpmPIDs are the swtpm processes of domain (namespace_name): libvirt
// names the domain in the paths it gives swtpm.
func swtpmPIDs(t testing.TB, domain string) []int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if filepath.Base(args[0]) != "swtpm" || !strings.Contains(string(data), domain+"-swtpm") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		pids = append(pids, pid)
	}
	return pids
}

func pidsString(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}
