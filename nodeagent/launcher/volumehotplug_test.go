package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestLauncherHotplugsVolumes: a hotpluggable claim volume that joins the
// spec of the running VMI waits for its mount, is attached once the node
// agent mounted it (a Filesystem claim's disk.img) and detached when it
// leaves the spec; Status.HotplugVolumes and HotplugPending say how each
// stands.
func TestLauncherHotplugsVolumes(t *testing.T) {
	f := start(t)
	hp := f.cfg.HotplugDiskDir
	ctx := context.Background()
	vmi := testVMI()
	st, err := f.c.Sync(ctx, vmi)
	if err != nil || !st.Started {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	if client.HotplugPending(vmi, &st) {
		t.Errorf("HotplugPending of a VMI without hotpluggable volumes")
	}
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSCSI}}})
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		Hotpluggable: true, PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}})
	if !client.HotplugPending(vmi, &st) {
		t.Fatal("HotplugPending: false with a new hotpluggable volume")
	}
	st, err = f.c.Sync(ctx, vmi)
	if err != nil {
		t.Fatalf("Sync before the mount: %v", err)
	}
	if len(st.HotplugVolumes) != 1 || st.HotplugVolumes[0].Attached || !strings.Contains(st.HotplugVolumes[0].Message, "waiting for the node agent to mount") {
		t.Fatalf("before the mount: %+v", st.HotplugVolumes)
	}
	// What the node agent's mount gives: the claim's directory with its image.
	if err := os.MkdirAll(filepath.Join(hp, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hp, "data", "disk.img"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err = f.c.Sync(ctx, vmi)
	if err != nil {
		t.Fatalf("Sync after the mount: %v", err)
	}
	if want := (client.HotplugVolume{Name: "data", Target: "sda", Attached: true}); len(st.HotplugVolumes) != 1 || st.HotplugVolumes[0] != want {
		t.Fatalf("after the mount: %+v, want %+v", st.HotplugVolumes, want)
	}
	disks, err := f.h.Disks(ctx, st.Domain)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, d := range disks {
		if d.Alias != nil && d.Alias.Name == "ua-data" {
			found = d.Source.File != nil && d.Source.File.File == filepath.Join(hp, "data", "disk.img") && d.Target.Bus == "scsi"
		}
	}
	if !found {
		t.Errorf("the domain's disks have no SCSI disk ua-data on %s: %+v", filepath.Join(hp, "data", "disk.img"), disks)
	}
	if client.HotplugPending(vmi, &st) {
		t.Error("HotplugPending after the attach")
	}

	vmi.Spec.Domain.Devices.Disks = vmi.Spec.Domain.Devices.Disks[:3]
	vmi.Spec.Volumes = vmi.Spec.Volumes[:3]
	if !client.HotplugPending(vmi, &st) {
		t.Fatal("HotplugPending: false with a volume to unplug")
	}
	if st, err = f.c.Sync(ctx, vmi); err != nil {
		t.Fatalf("Sync after the removal: %v", err)
	}
	if len(st.HotplugVolumes) != 1 || !st.HotplugVolumes[0].Detaching {
		t.Errorf("after the removal: %+v, want data detaching", st.HotplugVolumes)
	}
	if st, err = f.c.Sync(ctx, vmi); err != nil || len(st.HotplugVolumes) != 0 || client.HotplugPending(vmi, &st) {
		t.Errorf("once the guest released it: %+v, %v", st.HotplugVolumes, err)
	}
}

// TestLauncherDumpsMemory: a memoryDump volume whose claim the node agent
// mounted gets the guest's memory in a file named as KubeVirt names it;
// the status reports the dump from start to end, and forgets it once the
// volume left the spec.
func TestLauncherDumpsMemory(t *testing.T) {
	f := start(t)
	hp := f.cfg.HotplugDiskDir
	ctx := context.Background()
	vmi := testVMI()
	if _, err := f.c.Sync(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "dump", VolumeSource: v1.VolumeSource{MemoryDump: &v1.MemoryDumpVolumeSource{ClaimName: "dump-claim", Hotpluggable: true}}})
	st, err := f.c.Sync(ctx, vmi)
	if err != nil || len(st.MemoryDumps) != 0 || !client.HotplugPending(vmi, &st) {
		t.Fatalf("before the mount: dumps %+v, %v; want none, pending", st.MemoryDumps, err)
	}
	if err := os.MkdirAll(filepath.Join(hp, "dump"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Sync(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	var d client.MemoryDump
	waitFor(t, func() bool {
		st, err := f.c.State(ctx)
		if err != nil || len(st.MemoryDumps) != 1 {
			return false
		}
		d = st.MemoryDumps[0]
		return !d.End.IsZero()
	})
	if d.Error != "" || !strings.HasPrefix(d.TargetFileName, "vm1-dump-claim-") || !strings.HasSuffix(d.TargetFileName, ".memory.dump") {
		t.Fatalf("dump %+v", d)
	}
	if b, err := os.ReadFile(filepath.Join(hp, "dump", d.TargetFileName)); err != nil || !strings.Contains(string(b), "fake memory dump of ns_vm1") {
		t.Errorf("the dump file: %q, %v", b, err)
	}
	vmi.Spec.Volumes = vmi.Spec.Volumes[:len(vmi.Spec.Volumes)-1]
	if st, err = f.c.Sync(ctx, vmi); err != nil || len(st.MemoryDumps) != 0 || client.HotplugPending(vmi, &st) {
		t.Errorf("after the volume left: dumps %+v, %v", st.MemoryDumps, err)
	}
}
