package vmcontrol_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol"
	"github.com/vmkit/vmkit/vmcontrol/disruptionbudget"
)

// TestDisruptionBudget runs the Manager's disruption-budget controller
// against a real API server, with kube-controller-manager's disruption
// controller computing the budgets' status and the API server's eviction
// subresource enforcing them:
//   - a VMI with evictionStrategy LiveMigrate gets KubeVirt's budget
//     (kubevirt-disruption-budget-<random>, controlled by the VMI, selecting
//     kubevirt.io/created-by=<UID>, minAvailable 1), which matches its one
//     launcher pod and allows no disruption: evicting the pod is refused
//     with 429 and the pod stays; a VMI without a strategy gets none and its
//     launcher can be evicted;
//   - while a migration of it runs the budget is 2 with the migration's
//     label, so with source and target pods both healthy neither can be
//     evicted; after it succeeded and the source pod exited it is back to 1
//     without the label;
//   - a VMI that finished loses its budget, and so does a deleted one.
func TestDisruptionBudget(t *testing.T) {
	c := startCluster(t)
	c.migrationKubelet(t)
	c.startManager(t, vmcontrol.LeaderElection{})
	ctx := context.Background()
	// Pods bound to nodes that do not exist are deleted by the pod garbage
	// collector.
	for _, name := range []string{"node01", "node02"} {
		if _, err := c.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	masquerade := func(strategy *v1.EvictionStrategy) func(*v1.VirtualMachineInstance) {
		return func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.EvictionStrategy = strategy
			vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}
			vmi.Spec.Networks = []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
		}
	}
	guarded := c.runningVMI(t, "guarded", masquerade(ptr(v1.EvictionStrategyLiveMigrate)))
	free := c.runningVMI(t, "free", masquerade(nil))

	pdb := c.waitBudget(t, guarded, 1, "")
	ref := metav1.GetControllerOf(pdb)
	if !strings.HasPrefix(pdb.Name, disruptionbudget.GenerateName) || ref == nil || ref.UID != guarded.UID || ref.Kind != "VirtualMachineInstance" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion || fmt.Sprint(pdb.Spec.Selector.MatchLabels) != fmt.Sprintf("map[%s:%s]", v1.CreatedByLabel, guarded.UID) {
		t.Fatalf("budget %s: owner %+v, selector %v; want KubeVirt's", pdb.Name, ref, pdb.Spec.Selector)
	}
	c.waitEvent(t, "guarded", disruptionbudget.ReasonSuccessfulCreate)
	c.waitBudgetStatus(t, pdb.Name, 1)
	source := c.launcherPods(t, guarded)[0]
	c.refusedEviction(t, source.Name)

	// No strategy: no budget, and its launcher goes when evicted.
	if got := c.budgetsOf(t, free); len(got) != 0 {
		t.Fatalf("VMI without an eviction strategy has budgets %v", got)
	}
	freePod := c.launcherPods(t, free)[0]
	if err := c.kube.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: freePod.Name, Namespace: ns}}); err != nil {
		t.Fatalf("evicting the unprotected launcher %s: %v", freePod.Name, err)
	}

	// A migration raises it to 2: neither pod may go while it runs.
	m := c.createMigration(t, "guarded")
	c.waitMigrationPhase(t, m.Name, v1.MigrationPreparingTarget)
	c.agentWrites(t, "guarded", map[string]any{"migrationState": map[string]any{"targetNodeAddress": "10.0.0.2", "targetDirectMigrationNodePorts": map[string]int{"49152": 0}}})
	c.agentWrites(t, "guarded", map[string]any{"migrationState": map[string]any{"startTimestamp": metav1.Now(), "mode": "PreCopy"}})
	c.waitMigrationPhase(t, m.Name, v1.MigrationRunning)
	c.waitBudget(t, guarded, 2, m.Name)
	c.waitBudgetStatus(t, pdb.Name, 2)
	var target corev1.Pod
	for _, p := range c.launcherPods(t, guarded) {
		if p.Labels[v1.MigrationJobLabel] == string(m.UID) {
			target = p
		}
	}
	c.refusedEviction(t, target.Name)
	c.refusedEviction(t, source.Name)

	// Succeeded: back to 1 once the source launcher has exited.
	c.agentWrites(t, "guarded", map[string]any{"nodeName": "node02", "migrationState": map[string]any{"targetNodeDomainDetected": true, "targetNodeDomainReadyTimestamp": metav1.Now()}})
	c.agentWrites(t, "guarded", map[string]any{"migrationState": map[string]any{"completed": true, "endTimestamp": metav1.Now()}})
	c.waitMigrationPhase(t, m.Name, v1.MigrationSucceeded)
	consistently(t, time.Second, "while the source launcher still runs", func(context.Context) error {
		if got := c.budgetsOf(t, guarded); len(got) != 1 || got[0].Spec.MinAvailable.IntValue() != 2 {
			return fmt.Errorf("budget lowered: %+v", got)
		}
		return nil
	})
	src, err := c.kube.CoreV1().Pods(ns).Get(ctx, source.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src.Status.Phase = corev1.PodSucceeded
	src.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted"}}
	if _, err := c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitBudget(t, guarded, 1, "")
	c.waitBudgetStatus(t, pdb.Name, 1)
	c.refusedEviction(t, target.Name)

	// Final: the budget goes (garbage collection would leave it while the
	// VMI object exists).
	c.agentWrites(t, "guarded", map[string]any{"phase": v1.Succeeded})
	c.waitNoBudget(t, guarded)

	// Deleted: the budget goes with it.
	doomed := c.runningVMI(t, "doomed", masquerade(ptr(v1.EvictionStrategyLiveMigrate)))
	c.waitBudget(t, doomed, 1, "")
	if err := c.client.KubevirtV1().VirtualMachineInstances(ns).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitNoBudget(t, doomed)
}

// budgetsOf lists the budgets controlled by the VMI.
func (c *cluster) budgetsOf(t *testing.T, vmi *v1.VirtualMachineInstance) []policyv1.PodDisruptionBudget {
	t.Helper()
	list, err := c.kube.PolicyV1().PodDisruptionBudgets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []policyv1.PodDisruptionBudget
	for _, pdb := range list.Items {
		if ref := metav1.GetControllerOf(&pdb); ref != nil && ref.UID == vmi.UID {
			out = append(out, pdb)
		}
	}
	return out
}

// waitBudget waits until the VMI has exactly one budget, with minAvailable
// min and the migration label migration ("" for none).
func (c *cluster) waitBudget(t *testing.T, vmi *v1.VirtualMachineInstance, min int, migration string) *policyv1.PodDisruptionBudget {
	t.Helper()
	var got []policyv1.PodDisruptionBudget
	waitFor(t, 30*time.Second, fmt.Sprintf("one budget of %s at %d (migration %q)", vmi.Name, min, migration), func(context.Context) (bool, error) {
		got = c.budgetsOf(t, vmi)
		return len(got) == 1 && got[0].Spec.MinAvailable.IntValue() == min && got[0].Labels[disruptionbudget.MigrationNameLabel] == migration, nil
	})
	return &got[0]
}

func (c *cluster) waitNoBudget(t *testing.T, vmi *v1.VirtualMachineInstance) {
	t.Helper()
	waitFor(t, 30*time.Second, "no budget of "+vmi.Name, func(context.Context) (bool, error) {
		return len(c.budgetsOf(t, vmi)) == 0, nil
	})
}

// waitBudgetStatus waits for kube-controller-manager's disruption
// controller to have seen the budget's spec and count pods healthy pods
// (Ready launchers of the VMI), all of which the budget wants, so none may
// be disrupted.
func (c *cluster) waitBudgetStatus(t *testing.T, name string, pods int32) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("budget %s status: %d healthy pods, no disruption allowed", name, pods), func(ctx context.Context) (bool, error) {
		pdb, err := c.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s := pdb.Status
		return s.ObservedGeneration == pdb.Generation && s.DesiredHealthy == pods && s.CurrentHealthy == pods && s.DisruptionsAllowed == 0, nil
	})
}

// refusedEviction evicts the pod through the API server's eviction
// subresource (what kubectl drain does) and wants 429, with the pod left.
func (c *cluster) refusedEviction(t *testing.T, pod string) {
	t.Helper()
	ctx := context.Background()
	err := c.kube.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}})
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting launcher %s: %v, want 429 Too Many Requests", pod, err)
	}
	if !strings.Contains(err.Error(), "disruption budget") {
		t.Errorf("evicting launcher %s refused with %q, want the disruption budget named", pod, err)
	}
	got, err := c.kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp != nil {
		t.Fatalf("launcher %s after the refused eviction: %v, deletion %v", pod, err, got.DeletionTimestamp)
	}
}
