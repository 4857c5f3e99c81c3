package libvirt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// TestAttachDiskAndDumpMemory hot-plugs a SCSI disk into the running agent guest
// (which loads virtio_scsi and sd_mod): it is among the domain's live
// disks under its alias and the guest sees /dev/sda; detached by alias, it
// leaves both. A shut-off domain refuses. Then the guest's memory is
// dumped to a file.
func TestAttachDiskAndDumpMemory(t *testing.T) {
	uri := requireQEMU(t)
	guest, initrd := requireAgentGuest(t)
	h := newTestHypervisor(t, uri)
	dir := t.TempDir()
	xml, name := tinyGuestXML(t, tinyGuestVMI("hotplug-"+randomSuffix(t), types.UID(randomUUID(t))), guest.Kernel, initrd, dir)
	ctx := context.Background()
	defineTinyGuest(t, h, xml, name)
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o666); err != nil {
		t.Fatal(err)
	}
	disk := libvirtxml.DomainDisk{Device: "disk", Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
		Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: img}},
		Target: &libvirtxml.DomainDiskTarget{Dev: "sda", Bus: "scsi"}, Alias: &libvirtxml.DomainAlias{Name: "ua-data"}}
	dx, err := disk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AttachDisk(ctx, name, dx); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("AttachDisk to a shut-off domain: %v, want ErrInvalidState", err)
	}
	if err := h.Start(ctx, name, hypervisor.StartOptions{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitAgent(t, h, name)
	if err := h.AttachDisk(ctx, name, dx); err != nil {
		t.Fatalf("AttachDisk: %v", err)
	}
	has := func() bool {
		disks, err := h.Disks(ctx, name)
		if err != nil {
			t.Fatalf("Disks: %v", err)
		}
		for _, d := range disks {
			if d.Alias != nil && d.Alias.Name == "ua-data" && d.Target.Dev == "sda" {
				return true
			}
		}
		return false
	}
	if !has() {
		t.Fatal("the attached disk is not among the domain's live disks")
	}
	inGuest := func(want bool) {
		t.Helper()
		for deadline := time.Now().Add(bootTimeout); ; {
			out := agentExec(t, h, name, "if [ -b /dev/sda ]; then echo present; else echo absent; fi")
			if strings.TrimSpace(out) == map[bool]string{true: "present", false: "absent"}[want] {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/dev/sda in the guest: %s after %v", strings.TrimSpace(out), bootTimeout)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	inGuest(true)
	// ExpandDisks: the disk grows, file and guest.
	if c, err := h.DiskCapacity(ctx, name, "sda"); err != nil || c != 1<<20 {
		t.Errorf("DiskCapacity: %d, %v; want 1 MiB", c, err)
	}
	if err := h.ResizeDisk(ctx, name, "sda", 3<<20); err != nil {
		t.Fatalf("ResizeDisk: %v", err)
	}
	if fi, err := os.Stat(img); err != nil || fi.Size() != 3<<20 {
		t.Errorf("the image after ResizeDisk: %v, %v; want 3 MiB", fi.Size(), err)
	}
	for deadline := time.Now().Add(bootTimeout); ; {
		out := strings.TrimSpace(agentExec(t, h, name, "cat /sys/block/sda/size"))
		if out == "6144" { // 512-byte sectors
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guest sees /dev/sda at %s sectors after ResizeDisk to 3 MiB, want 6144", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := h.DetachDisk(ctx, name, "ua-data"); err != nil {
		t.Fatalf("DetachDisk: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); has(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the detached disk is still among the domain's live disks")
		}
	}
	inGuest(false)
	if err := h.DetachDisk(ctx, name, "ua-data"); err == nil {
		t.Error("DetachDisk of a disk that is gone succeeded")
	}

	// The guest's memory, dumped (KubeVirt's memory dump).
	dump := filepath.Join(dir, "guest.memory.dump")
	began := time.Now()
	if err := h.MemoryDump(ctx, name, dump); err != nil {
		t.Fatalf("MemoryDump: %v", err)
	}
	fi, err := os.Stat(dump)
	if err != nil || fi.Size() < 128<<20 {
		t.Fatalf("the dump: %v, %v; want at least the guest's 128Mi", fi, err)
	}
	t.Logf("memory dump of the 128Mi guest: %d bytes in %v", fi.Size(), time.Since(began).Round(time.Millisecond))
}

// waitAgent waits until the guest agent of the running domain answers.
func waitAgent(t *testing.T, h *Hypervisor, name string) {
	t.Helper()
	for deadline := time.Now().Add(bootTimeout); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := h.GuestAgentCommand(ctx, name, `{"execute":"guest-ping"}`)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer from the guest agent %v after start: %v", bootTimeout, err)
		}
	}
}

// TestHotplugVirtioDiskOnQ35: a q35 guest (KubeVirt's and vmkit's default
// machine) gets spare PCIe root ports from domainxml, so a virtio disk
// plugs in while it runs and the guest sees it.
func TestHotplugVirtioDiskOnQ35(t *testing.T) {
	uri := requireQEMU(t)
	guest, initrd := requireAgentGuest(t)
	h := newTestHypervisor(t, uri)
	dir := t.TempDir()
	vmi := tinyGuestVMI("q35-hotplug-"+randomSuffix(t), types.UID(randomUUID(t)))
	vmi.Spec.Domain.Machine.Type = "q35"
	xml, name := tinyGuestXML(t, vmi, guest.Kernel, initrd, dir)
	ctx := context.Background()
	defineTinyGuest(t, h, xml, name)
	if err := h.Start(ctx, name, hypervisor.StartOptions{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitAgent(t, h, name)
	if out := strings.TrimSpace(agentExec(t, h, name, "ls /sys/block")); strings.Contains(out, "vd") {
		t.Fatalf("the guest has a virtio disk before the hotplug: %q", out)
	}
	// Three disks: KubeVirt keeps at least three ports free.
	for i, dev := range []string{"vdb", "vdc", "vdd"} {
		img := filepath.Join(dir, dev+".img")
		if err := os.WriteFile(img, make([]byte, 1<<20), 0o666); err != nil {
			t.Fatal(err)
		}
		disk := libvirtxml.DomainDisk{Device: "disk", Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: img}},
			Target: &libvirtxml.DomainDiskTarget{Dev: dev, Bus: "virtio"}, Alias: &libvirtxml.DomainAlias{Name: "ua-" + dev}}
		dx, err := disk.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AttachDisk(ctx, name, dx); err != nil {
			t.Fatalf("AttachDisk of virtio disk %d (%s) to a running q35 guest: %v", i+1, dev, err)
		}
	}
	for deadline := time.Now().Add(bootTimeout); ; {
		out := strings.TrimSpace(agentExec(t, h, name, "ls /sys/block"))
		if strings.Count(out, "vd") == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the q35 guest does not see the three virtio disks after the hotplug: /sys/block holds %q", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
