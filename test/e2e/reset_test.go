package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmctl"
)

// TestReset: KubeVirt's reset (PUT .../virtualmachineinstances/{name}/reset
// through kube-apiserver's aggregation layer, as vmctl and virtctl send it)
// hard-resets the tiny guest: it boots again (its marker on the console,
// read through virt-api, a second time), the VMI keeps its UID and QEMU its
// PID, and the VMI gets KubeVirt's Normal event Reset. A viewer may not
// reset; once the VM is stopped there is no VMI to reset.
func TestReset(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	sub, err := vmctl.NewSubresources(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	vm := tinyVM(t, "vm-reset", v1.RunStrategyAlways)
	framework.CreateVM(t, c, vm)
	before := framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)
	pid := qemuPID(t, "default", vm.Name)

	// The console stream without history: only what the guest prints
	// after the reset.
	conn, err := sub.Stream(ctx, "default", vm.Name, "console")
	if err != nil {
		t.Fatalf("console: %v", err)
	}
	defer conn.Close()
	began := time.Now()
	if err := sub.Reset(ctx, "default", vm.Name); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if out, err := readStream(conn, guestMarker, 90*time.Second); err != nil {
		t.Fatalf("console after the reset: %v (read %q)", err, out)
	}
	t.Logf("reset → %s on the console again in %v", guestMarker, time.Since(began).Round(time.Millisecond))

	after, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(ctx, vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID || !running(after) {
		t.Errorf("after the reset: VMI %s %s, want %s still Running", after.UID, after.Status.Phase, before.UID)
	}
	if got := qemuPID(t, "default", vm.Name); got != pid {
		t.Errorf("after the reset: QEMU pid %d, want %d: a reset keeps the QEMU process", got, pid)
	}
	suite.WaitFor(t, "Normal event Reset of VMI default/"+vm.Name, 30*time.Second, func() (bool, string) {
		events, err := c.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=VirtualMachineInstance,involvedObject.name=" + vm.Name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.UID == before.UID && e.Type == corev1.EventTypeNormal && e.Reason == "Reset" {
				return true, ""
			}
			seen = append(seen, e.Type+" "+e.Reason)
		}
		return false, "events: " + strings.Join(seen, ", ")
	})

	// RBAC: kubevirt.io:view, aggregated into view, has no reset.
	bind(t, c, "e2e-reset-viewer", "view")
	viewer, err := vmctl.NewSubresources(impersonate(c, "e2e-reset-viewer"))
	if err != nil {
		t.Fatal(err)
	}
	if err := viewer.Reset(ctx, "default", vm.Name); !apierrors.IsForbidden(err) {
		t.Errorf("reset by a viewer: %v, want 403", err)
	}

	setRunStrategy(t, c, vm.Name, v1.RunStrategyHalted)
	waitNoVMI(t, c, vm.Name)
	if err := sub.Reset(ctx, "default", vm.Name); !apierrors.IsNotFound(err) {
		t.Errorf("reset of the stopped VM's instance: %v, want 404", err)
	}
	t.Logf("VMI %s was reset in place (QEMU pid %d)", before.UID, pid)
}
