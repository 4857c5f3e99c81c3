package vmcontrol_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	poolv1beta1 "github.com/vmkit/vmkit/vmapi/pool/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol"
)

// TestPool runs the Manager's pool controller against a real API server: a
// VirtualMachinePool of two running VMs gets web-0 and web-1, whose
// instances the VM controller starts; the pool reports them ready and
// follows the scale subresource (what `kubectl scale` writes) up and down.
// Scaling down removes the least progressed VM first (a stopped one), then
// the highest index; scaling up takes the lowest free index again.
func TestPool(t *testing.T) {
	c := startCluster(t)
	c.fakeKubelet(t)
	c.startManager(t, vmcontrol.LeaderElection{})
	ctx := context.Background()
	pools := c.client.PoolV1beta1().VirtualMachinePools(ns)

	two := int32(2)
	tmpl := newVM("web", v1.RunStrategyAlways)
	labels := map[string]string{"kubevirt.io/vmpool": "web"}
	pool := &poolv1beta1.VirtualMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: poolv1beta1.VirtualMachinePoolSpec{
			Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			VirtualMachineTemplate: &poolv1beta1.VirtualMachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       tmpl.Spec,
			},
		},
	}
	if _, err := pools.Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// vms is the pool's live VMs, by name.
	vms := func(ctx context.Context) (string, error) {
		list, err := c.client.KubevirtV1().VirtualMachines(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/vmpool=web"})
		if err != nil {
			return "", err
		}
		var names []string
		for _, vm := range list.Items {
			if ref := metav1.GetControllerOf(&vm); ref != nil && ref.Kind == "VirtualMachinePool" && ref.Name == "web" && vm.DeletionTimestamp == nil {
				names = append(names, vm.Name)
			}
		}
		slices.Sort(names)
		return strings.Join(names, ","), nil
	}
	waitVMs := func(want string) {
		t.Helper()
		var got string
		waitFor(t, 60*time.Second, "the pool's VMs to be "+want, func(ctx context.Context) (bool, error) {
			var err error
			got, err = vms(ctx)
			return err == nil && got == want, nil
		})
	}
	// gone waits until the VMs are deleted, not just being deleted, so
	// their names are free again.
	gone := func(names ...string) {
		t.Helper()
		for _, n := range names {
			waitFor(t, 60*time.Second, "VM "+n+" to be deleted", func(ctx context.Context) (bool, error) {
				_, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, n, metav1.GetOptions{})
				return err != nil, nil
			})
		}
	}
	running := func(names ...string) {
		t.Helper()
		for _, n := range names {
			c.waitVMIPhase(t, n, v1.Scheduled)
			c.setVMIPhase(t, n, v1.Running)
		}
	}
	status := func(replicas, ready int32) {
		t.Helper()
		waitFor(t, 30*time.Second, "pool status", func(ctx context.Context) (bool, error) {
			got, err := pools.Get(ctx, "web", metav1.GetOptions{})
			return err == nil && got.Status.Replicas == replicas && got.Status.ReadyReplicas == ready &&
				got.Status.LabelSelector == "kubevirt.io/vmpool=web", nil
		})
	}
	scale := func(n int32) {
		t.Helper()
		// What `kubectl scale --replicas=n vmpool/web` sends; like kubectl,
		// read again and retry when the controller's status write got in
		// between (the scale carries the pool's resourceVersion).
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := pools.GetScale(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = n
			_, err = pools.UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: s.ObjectMeta, Spec: s.Spec}, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	waitVMs("web-0,web-1")
	running("web-0", "web-1")
	status(2, 2)
	vm0, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vm0.Spec.Template.ObjectMeta.Labels["app"] != "web" || vm0.Labels["kubevirt.io/vmpool"] != "web" {
		t.Errorf("web-0 labels %v, template labels %v", vm0.Labels, vm0.Spec.Template.ObjectMeta.Labels)
	}

	scale(3)
	waitVMs("web-0,web-1,web-2")
	running("web-2")
	status(3, 3)
	s, err := pools.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil || s.Spec.Replicas != 3 || s.Status.Replicas != 3 || s.Status.Selector != "kubevirt.io/vmpool=web" {
		t.Errorf("scale subresource: %+v, %v", s, err)
	}

	// Of three ready VMs the highest index goes.
	scale(2)
	waitVMs("web-0,web-1")
	gone("web-2")
	status(2, 2)

	// A stopped VM is less progressed than a ready one: it goes first,
	// whatever its index.
	patchStrategy(t, c, "web-0", v1.RunStrategyHalted)
	c.waitVMStatus(t, "web-0", v1.VirtualMachineStatusStopped)
	status(2, 1)
	scale(1)
	waitVMs("web-1")
	gone("web-0")

	// Scaling up again takes the lowest free index.
	scale(2)
	waitVMs("web-0,web-1")
	running("web-0")
	status(2, 2)

	// Deleting the pool deletes its VMs (owner references).
	if err := pools.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone("web-0", "web-1")
}
