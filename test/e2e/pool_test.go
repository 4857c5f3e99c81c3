package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/testenv"
	poolv1beta1 "github.com/vmkit/vmkit/vmapi/pool/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestPool: examples/vmpool-tiny.yaml's VirtualMachinePool on the real
// cluster gets VMs vmpool-tiny-0 and vmpool-tiny-1 whose guests run; scaled
// to one through the scale subresource (what `kubectl scale` sends), the
// highest index goes and vmpool-tiny-0 keeps running, the same VMI;
// deleting the pool deletes its VMs, their VMIs and launcher pods.
func TestPool(t *testing.T) {
	c := suite.Need(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "vmpool-tiny.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pool := &poolv1beta1.VirtualMachinePool{}
	if err := yaml.UnmarshalStrict(data, pool); err != nil {
		t.Fatal(err)
	}
	pool.Namespace = "default"
	selector := "kubevirt.io/vmpool=" + pool.Name
	pools := c.Client.PoolV1beta1().VirtualMachinePools("default")
	if _, err := pools.Create(t.Context(), pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := pools.Delete(ctx, pool.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", pool.Name, err)
		}
		suite.WaitFor(t, "VMs, VMIs and launcher pods of "+pool.Name+" gone", 2*time.Minute, func() (bool, string) {
			vms, err := c.Client.KubevirtV1().VirtualMachines("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, err.Error()
			}
			vmis, err := c.Client.KubevirtV1().VirtualMachineInstances("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, err.Error()
			}
			pods, err := c.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, err.Error()
			}
			n := len(vms.Items) + len(vmis.Items) + len(pods.Items)
			return n == 0, fmt.Sprintf("%d VMs, %d VMIs, %d pods", len(vms.Items), len(vmis.Items), len(pods.Items))
		})
	})
	// runningVMIs waits until exactly the named VMIs exist and run.
	runningVMIs := func(names ...string) map[string]v1.VirtualMachineInstance {
		t.Helper()
		got := map[string]v1.VirtualMachineInstance{}
		suite.WaitFor(t, fmt.Sprintf("Running VMIs %v of %s", names, pool.Name), 3*time.Minute, func() (bool, string) {
			list, err := c.Client.KubevirtV1().VirtualMachineInstances("default").List(t.Context(), metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, err.Error()
			}
			clear(got)
			phases := ""
			for _, v := range list.Items {
				phases += " " + v.Name + "=" + string(v.Status.Phase)
				if v.DeletionTimestamp == nil && v.Status.Phase == v1.Running {
					got[v.Name] = v
				}
			}
			have := make([]string, 0, len(got))
			for n := range got {
				have = append(have, n)
			}
			slices.Sort(have)
			if p, err := pools.Get(t.Context(), pool.Name, metav1.GetOptions{}); err == nil {
				phases += fmt.Sprintf("; pool status %+v", p.Status)
			}
			return len(list.Items) == len(names) && strings.Join(have, ",") == strings.Join(names, ","), phases
		})
		return got
	}
	status := func(replicas, ready int32) {
		t.Helper()
		suite.WaitFor(t, fmt.Sprintf("%s status: %d replicas, %d ready", pool.Name, replicas, ready), time.Minute, func() (bool, string) {
			got, err := pools.Get(t.Context(), pool.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return got.Status.Replicas == replicas && got.Status.ReadyReplicas == ready && got.Status.LabelSelector == selector, fmt.Sprintf("%+v", got.Status)
		})
	}

	began := time.Now()
	first := runningVMIs(pool.Name+"-0", pool.Name+"-1")
	t.Logf("2 VMIs Running %v after the pool was created", time.Since(began).Round(time.Millisecond))
	status(2, 2)

	s, err := pools.GetScale(t.Context(), pool.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status.Replicas != 2 || s.Status.Selector != selector {
		t.Errorf("scale subresource: %+v", s.Status)
	}
	s.Spec.Replicas = 1
	if _, err := pools.UpdateScale(t.Context(), pool.Name, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	left := runningVMIs(pool.Name + "-0")
	if got, want := left[pool.Name+"-0"].UID, first[pool.Name+"-0"].UID; got != want {
		t.Errorf("scaled 2 → 1: %s-0 runs VMI %s, want the same VMI %s as before", pool.Name, got, want)
	}
	suite.WaitFor(t, "VM "+pool.Name+"-1 deleted", 2*time.Minute, func() (bool, string) {
		_, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), pool.Name+"-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	status(1, 1)
}
