package framework

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestGuestKind(t *testing.T) {
	kernel := &v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Firmware: &v1.Firmware{KernelBoot: &v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "vmkit/tiny-guest:latest"}}}}}
	disk := &v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "vmkit/tiny-guest:latest"}}}}}
	cloud := &v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "vmkit/cloud-guest:latest"}}}}}
	claim := &v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}}}
	for spec, want := range map[*v1.VirtualMachineInstanceSpec]string{kernel: GuestKernel, disk: GuestDisk, cloud: GuestCloud, claim: GuestDisk} {
		if got := GuestKind(spec); got != want {
			t.Errorf("GuestKind = %q, want %q", got, want)
		}
	}
}

func TestOverBudget(t *testing.T) {
	start := func(name, kind string, total time.Duration) Start {
		return Start{VMI: "default/" + name, Kind: kind, Total: total, Timeline: v1.StartTimeline{{Phase: v1.StartPhaseCreated}, {Phase: v1.StartPhaseReady}}}
	}
	budget := StartBudgetFactor * StartP95[GuestKernel]
	got := OverBudget([]Start{
		start("cold", GuestKernel, budget+time.Second), // the first of its kind: unpacks the image
		start("warm", GuestKernel, budget-time.Millisecond),
		start("slow", GuestKernel, budget+time.Millisecond),
		start("cloud", GuestCloud, StartBudgetFactor*StartP95[GuestCloud]+time.Second), // the first cloud start
	})
	if len(got) != 1 || !strings.Contains(got[0], "default/slow") || !strings.Contains(got[0], "kernel guest") {
		t.Errorf("OverBudget = %q, want the one warm kernel start over %v", got, budget)
	}
}
