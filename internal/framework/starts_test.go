package framework

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	start := func(name, kind string, at, total time.Duration) Start {
		return Start{VMI: "default/" + name, Kind: kind, Total: total, Timeline: v1.StartTimeline{
			{Phase: v1.StartPhaseCreated, Time: metav1.NewMicroTime(t0.Add(at))},
			{Phase: v1.StartPhaseReady, Time: metav1.NewMicroTime(t0.Add(at + total))}}}
	}
	budget, cloudBudget := StartBudgetFactor*StartP95[GuestKernel], StartBudgetFactor*StartP95[GuestCloud]
	got := OverBudget([]Start{
		start("cold", GuestKernel, 0, budget+time.Second),                    // the first of its kind: unpacks the image
		start("cloud-a", GuestCloud, time.Second, cloudBudget+time.Second),   // the first cloud start
		start("cloud-b", GuestCloud, 2*time.Second, cloudBudget+time.Second), // created with it: unpacks the image too
		start("warm", GuestKernel, time.Minute, budget-time.Millisecond),
		start("slow", GuestKernel, 2*time.Minute, budget+time.Millisecond),
		start("cloud-c", GuestCloud, 3*time.Minute, cloudBudget+time.Second), // warm: over its budget
	})
	if len(got) != 2 || !strings.Contains(got[0], "default/slow") || !strings.Contains(got[0], "kernel guest") ||
		!strings.Contains(got[1], "default/cloud-c") {
		t.Errorf("OverBudget = %q, want the warm kernel start over %v and the warm cloud start over %v", got, budget, cloudBudget)
	}
}
