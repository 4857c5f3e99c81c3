package libvirt

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	golibvirt "libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/internal/testenv/libvirtenv"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

func u64(v uint64) *uint64 { return &v }

// convertStats turns libvirt's record into KubeVirt's units (balloon KiB
// to bytes), leaves what libvirt did not set nil, names devices by the
// VMI's names from their aliases.
func TestConvertStats(t *testing.T) {
	in := golibvirt.DomainStats{
		Cpu: &golibvirt.DomainStatsCPU{TimeSet: true, Time: 3e9, UserSet: true, User: 2e9},
		Balloon: &golibvirt.DomainStatsBalloon{MaximumSet: true, Maximum: 131072, CurrentSet: true, Current: 131072, RssSet: true, Rss: 50000,
			MajorFaultSet: true, MajorFault: 7, DiskCachesSet: true, DiskCaches: 10},
		Vcpu: []golibvirt.DomainStatsVcpu{
			{StateSet: true, State: golibvirt.VCPU_RUNNING, TimeSet: true, Time: 1e9, WaitSet: true, Wait: 5, DelaySet: true, Delay: 6},
			{StateSet: true, State: golibvirt.VCPU_OFFLINE},
		},
		Net: []golibvirt.DomainStatsNet{{NameSet: true, Name: "tap0", RxBytesSet: true, RxBytes: 100, TxPktsSet: true, TxPkts: 2}},
		Block: []golibvirt.DomainStatsBlock{
			{NameSet: true, Name: "vda", BackingIndexSet: true, BackingIndex: 1, RdReqsSet: true, RdReqs: 4, WrTimesSet: true, WrTimes: 9, FlReqsSet: true, FlReqs: 1},
			{NameSet: true, Name: "sda"},
		},
	}
	got := convertStats(&in, map[string]string{"disk/vda": "containerdisk", "net/tap0": "default"})
	want := hypervisor.DomainStats{
		CPU: hypervisor.CPUStats{TimeNs: u64(3e9), UserNs: u64(2e9)},
		Memory: hypervisor.MemoryStats{DomainBytes: u64(128 << 20), ActualBalloonBytes: u64(128 << 20), ResidentBytes: u64(50000 * 1024),
			MajorFaults: u64(7), CachedBytes: u64(10 * 1024)},
		VCPUs: []hypervisor.VCPUStats{
			{ID: 0, State: hypervisor.VCPURunning, TimeNs: u64(1e9), WaitNs: u64(5), DelayNs: u64(6)},
			{ID: 1, State: hypervisor.VCPUOffline},
		},
		Interfaces: []hypervisor.InterfaceStats{{Name: "tap0", Alias: "default", RxBytes: u64(100), TxPackets: u64(2)}},
		Disks: []hypervisor.DiskStats{
			{Name: "vda", Alias: "containerdisk", ReadRequests: u64(4), WriteTimeNs: u64(9), FlushRequests: u64(1)},
			{Name: "sda"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("convertStats (-want +got):\n%s", diff)
	}
}

// deviceAliases names domainxml's devices by the VMI's names for them.
func TestDeviceAliases(t *testing.T) {
	got := deviceAliases(goldenDomains(t)["minimal-containerdisk"])
	want := map[string]string{"disk/vda": "containerdisk", "net/tap0": "default"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deviceAliases (-want +got):\n%s", diff)
	}
}

// TestStatsTestDriver: statistics exist for an active domain only (the
// test driver reports no values).
func TestStatsTestDriver(t *testing.T) {
	h := newTestHypervisor(t, testURI)
	ctx := context.Background()
	const name = "vmkit-stats"
	xml, _ := rename(t, goldenDomains(t)["minimal-containerdisk"], name, "test")
	if _, err := h.Define(ctx, xml); err != nil {
		t.Fatalf("Define: %v", err)
	}
	t.Cleanup(func() {
		_ = h.Destroy(context.Background(), name)
		_ = h.Undefine(context.Background(), name)
	})
	if _, err := h.Stats(ctx, name); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("Stats of a shut-off domain: %v, want ErrInvalidState", err)
	}
	if _, err := h.Stats(ctx, "vmkit-no-such-domain"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("Stats of an undefined domain: %v, want ErrNotFound", err)
	}
	if err := h.Start(ctx, name, hypervisor.StartOptions{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := h.Stats(ctx, name); err != nil {
		t.Errorf("Stats of a running domain: %v", err)
	}
	if err := h.Pause(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Stats(ctx, name); err != nil {
		t.Errorf("Stats of a paused domain: %v", err)
	}
}

// TestStatsQEMU boots the test guest under TCG with a disk and a network
// interface (a tap device libvirt creates) and reads its statistics as
// the launcher does for the node agent's metrics: CPU time that grows,
// the vCPU's time, the domain's memory and the QEMU process's resident
// set, and the disk and interface named by the VMI's names for them.
func TestStatsQEMU(t *testing.T) {
	uri := requireQEMU(t)
	guest := libvirtenv.RequireGuest(t)
	h := newTestHypervisor(t, uri)
	ctx := context.Background()

	dir := t.TempDir()
	vmi := tinyGuestVMI("stats-"+randomSuffix(t), types.UID(randomUUID(t)))
	dom, err := domainxml.Convert(vmi, domainxml.Options{
		Emulation: true, KernelPath: guest.Kernel, InitrdPath: guest.IdleInitramfs,
		SerialSocket: filepath.Join(dir, "serial.sock"), SerialLog: filepath.Join(dir, "serial.log"), VNCSocket: filepath.Join(dir, "vnc.sock"),
	})
	if err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(dir, "scratch.img")
	if err := os.WriteFile(scratch, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	tap := "vmkst" + randomSuffix(t)[:6]
	dom.Devices.Disks = append(dom.Devices.Disks, libvirtxml.DomainDisk{
		Device: "disk",
		Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
		Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: scratch}},
		Target: &libvirtxml.DomainDiskTarget{Dev: "vdb", Bus: "virtio"},
		Alias:  &libvirtxml.DomainAlias{Name: "ua-scratch"},
	})
	dom.Devices.Interfaces = append(dom.Devices.Interfaces, libvirtxml.DomainInterface{
		Source: &libvirtxml.DomainInterfaceSource{Ethernet: &libvirtxml.DomainInterfaceSourceEthernet{}},
		Target: &libvirtxml.DomainInterfaceTarget{Dev: tap},
		Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
		ROM:    &libvirtxml.DomainROM{Enabled: "no"},
		Alias:  &libvirtxml.DomainAlias{Name: "ua-default"},
	})
	xml, err := dom.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Define(ctx, xml); err != nil {
		t.Fatalf("Define: %v\n%s", err, xml)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := h.Destroy(ctx, dom.Name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
		if err := h.Undefine(ctx, dom.Name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := h.Start(ctx, dom.Name, hypervisor.StartOptions{Paused: true}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	console, err := h.Console(ctx, dom.Name)
	if err != nil {
		t.Fatalf("Console: %v", err)
	}
	defer console.Close()
	if err := h.Resume(ctx, dom.Name); err != nil {
		t.Fatal(err)
	}
	if _, out, err := readUntil(console, guestMarker, bootTimeout); err != nil {
		t.Fatalf("serial console: %v; output so far:\n%s", err, out)
	}

	first, err := h.Stats(ctx, dom.Name)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	second, err := h.Stats(ctx, dom.Name)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	t.Logf("statistics: %s", deref(second))

	if first.CPU.TimeNs == nil || *first.CPU.TimeNs == 0 || second.CPU.TimeNs == nil || *second.CPU.TimeNs < *first.CPU.TimeNs {
		t.Errorf("CPU time %v then %v: want a positive, non-decreasing counter", deref(first.CPU), deref(second.CPU))
	}
	if len(second.VCPUs) != 1 || second.VCPUs[0].TimeNs == nil || *second.VCPUs[0].TimeNs == 0 ||
		(second.VCPUs[0].State != hypervisor.VCPURunning && second.VCPUs[0].State != hypervisor.VCPUBlocked) {
		t.Errorf("vCPUs %s: want one running with CPU time", deref(second.VCPUs))
	}
	if m := second.Memory; m.DomainBytes == nil || *m.DomainBytes != 128<<20 || m.ResidentBytes == nil || *m.ResidentBytes == 0 {
		t.Errorf("memory %s: want the domain's 128 MiB and QEMU's resident set", deref(m))
	}
	var disk *hypervisor.DiskStats
	for i := range second.Disks {
		if second.Disks[i].Alias == "scratch" {
			disk = &second.Disks[i]
		}
	}
	if disk == nil || disk.Name != "vdb" || disk.ReadRequests == nil || disk.WriteBytes == nil || disk.FlushTimeNs == nil {
		t.Errorf("disks %s: want vdb named scratch with its I/O counters", deref(second.Disks))
	}
	if len(second.Interfaces) != 1 || second.Interfaces[0].Name != tap || second.Interfaces[0].Alias != "default" ||
		second.Interfaces[0].RxBytes == nil || second.Interfaces[0].TxPackets == nil {
		t.Errorf("interfaces %s: want %s named default with its traffic counters", deref(second.Interfaces), tap)
	}

	if err := h.Pause(ctx, dom.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Stats(ctx, dom.Name); err != nil {
		t.Errorf("Stats of the paused domain: %v", err)
	}
	if err := h.Destroy(ctx, dom.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Stats(ctx, dom.Name); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("Stats of the destroyed domain: %v, want ErrInvalidState", err)
	}
}

// deref prints a struct of pointers with its values, as JSON.
func deref(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
