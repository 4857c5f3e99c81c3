package vmcontrol_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol"
	"github.com/vmkit/vmkit/vmcontrol/evacuation"
	"github.com/vmkit/vmkit/vmcontrol/migration"
)

// TestMigration runs the Manager's migration controller against a real API
// server and plays the node agents' part of KubeVirt's contract (writing
// the agent-owned fields of status.migrationState) and the kubelets' (a
// target pod runs on node02, every other launcher on node01):
//   - a migration goes Pending → Scheduling → Scheduled (its target pod
//     created with the migration's label, kept off node01), is handed off
//     (migrationUid, nodes, pods, the KubeVirt CR's configuration, the
//     target node label), then PreparingTarget → TargetReady → Running →
//     Succeeded as the agents write targetNodeAddress, startTimestamp and
//     completed; the VMI stays Running on node02, the migration keeps a
//     copy of the final state and loses its finalizer;
//   - a migration deleted before the handoff is canceled: its target pod
//     is deleted, and the object goes;
//   - a migration deleted after the handoff gets abortRequested on the VMI;
//     once the source agent reports failed, the migration fails, its
//     target pod is deleted and the object goes;
//   - a VMI whose pod network interface uses the bridge binding is not
//     LiveMigratable, and its migration fails with the reason.
func TestMigration(t *testing.T) {
	c := startCluster(t)
	holdTargets := c.migrationKubelet(t)
	c.startManager(t, vmcontrol.LeaderElection{})
	ctx := context.Background()
	kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns},
		Spec: v1.KubeVirtSpec{Configuration: v1.KubeVirtConfiguration{MigrationConfiguration: &v1.MigrationConfiguration{CompletionTimeoutPerGiB: ptr(int64(30))}}}}
	if _, err := c.client.KubevirtV1().KubeVirts(ns).Create(ctx, kv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vmi := c.runningVMI(t, "mover", func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}
		vmi.Spec.Networks = []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
	})
	waitFor(t, 30*time.Second, "mover LiveMigratable", func(ctx context.Context) (bool, error) {
		v, err := c.vmi(ctx, "mover")
		return err == nil && conditionStatus(v, v1.VirtualMachineInstanceIsMigratable) == corev1.ConditionTrue && v.Status.MigrationMethod == v1.BlockMigration, nil
	})

	// The whole phase sequence.
	m := c.createMigration(t, "mover")
	var handed *v1.VirtualMachineInstance
	waitFor(t, 30*time.Second, "handoff", func(ctx context.Context) (bool, error) {
		v, err := c.vmi(ctx, "mover")
		handed = v
		return err == nil && v.Status.MigrationState != nil && v.Status.MigrationState.MigrationUID == m.UID, nil
	})
	ms := handed.Status.MigrationState
	pods := c.launcherPods(t, vmi)
	var targetPod corev1.Pod
	for _, p := range pods {
		if p.Labels[v1.MigrationJobLabel] == string(m.UID) {
			targetPod = p
		}
	}
	if ms.SourceNode != "node01" || ms.TargetNode != "node02" || ms.TargetPod != targetPod.Name || ms.SourcePod == "" || ms.SourcePod == ms.TargetPod ||
		handed.Labels[v1.MigrationTargetNodeNameLabel] != "node02" || ms.MigrationConfiguration == nil || *ms.MigrationConfiguration.CompletionTimeoutPerGiB != 30 {
		t.Fatalf("handed off: state %+v, labels %v, target pod %q", ms, handed.Labels, targetPod.Name)
	}
	terms := targetPod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if terms[0].MatchExpressions[0].Values[0] != "node01" {
		t.Errorf("target pod not kept off the source node: %+v", terms)
	}
	c.waitMigrationPhase(t, m.Name, v1.MigrationPreparingTarget)
	c.agentWrites(t, "mover", map[string]any{"migrationState": map[string]any{"targetNodeAddress": "10.0.0.2", "targetDirectMigrationNodePorts": map[string]int{"49152": 0}}})
	c.waitMigrationPhase(t, m.Name, v1.MigrationTargetReady)
	c.agentWrites(t, "mover", map[string]any{"migrationState": map[string]any{"startTimestamp": metav1.Now(), "mode": "PreCopy"}})
	c.waitMigrationPhase(t, m.Name, v1.MigrationRunning)
	// The target agent takes the guest over, the source agent reports completion.
	c.agentWrites(t, "mover", map[string]any{"nodeName": "node02", "migrationState": map[string]any{"targetNodeDomainDetected": true, "targetNodeDomainReadyTimestamp": metav1.Now()}})
	c.agentWrites(t, "mover", map[string]any{"migrationState": map[string]any{"completed": true, "endTimestamp": metav1.Now()}})
	done := c.waitMigrationPhase(t, m.Name, v1.MigrationSucceeded)
	waitFor(t, 30*time.Second, "final migration state copied, finalizer removed", func(ctx context.Context) (bool, error) {
		got, err := c.client.KubevirtV1().VirtualMachineInstanceMigrations(ns).Get(ctx, m.Name, metav1.GetOptions{})
		done = got
		return err == nil && len(got.Finalizers) == 0 && got.Status.MigrationState != nil && got.Status.MigrationState.Completed, nil
	})
	phases := []v1.VirtualMachineInstanceMigrationPhase{}
	for _, ts := range done.Status.PhaseTransitionTimestamps {
		phases = append(phases, ts.Phase)
	}
	want := []v1.VirtualMachineInstanceMigrationPhase{v1.MigrationPending, v1.MigrationScheduling, v1.MigrationScheduled, v1.MigrationPreparingTarget,
		v1.MigrationTargetReady, v1.MigrationRunning, v1.MigrationSucceeded}
	if fmt.Sprint(phases) != fmt.Sprint(want) {
		t.Errorf("phase transitions %v, want %v", phases, want)
	}
	if v, err := c.vmi(ctx, "mover"); err != nil || v.Status.Phase != v1.Running || v.UID != vmi.UID || v.Status.NodeName != "node02" {
		t.Errorf("after the migration: %v; want the same VMI Running on node02", err)
	}
	c.waitEvent(t, m.Name, migration.ReasonSuccessfulMigration)
	// The source launcher exits once its guest has left.
	src, err := c.kube.CoreV1().Pods(ns).Get(ctx, ms.SourcePod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src.Status.Phase = corev1.PodSucceeded
	if _, err := c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "one active pod, on node02", func(ctx context.Context) (bool, error) {
		v, err := c.vmi(ctx, "mover")
		return err == nil && len(v.Status.ActivePods) == 1 && v.Status.ActivePods[targetPod.UID] == "node02", nil
	})

	// Canceled before the handoff: a target pod that never gets scheduled.
	holdTargets.Store(true)
	m2 := c.createMigration(t, "mover")
	c.waitMigrationPhase(t, m2.Name, v1.MigrationScheduling)
	if err := c.client.KubevirtV1().VirtualMachineInstanceMigrations(ns).Delete(ctx, m2.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitMigrationGone(t, m2.Name)
	c.waitNoTargetPod(t, vmi, m2.UID)
	holdTargets.Store(false)

	// Canceled after the handoff: the source agent aborts.
	m3 := c.createMigration(t, "mover")
	c.waitMigrationPhase(t, m3.Name, v1.MigrationPreparingTarget)
	if err := c.client.KubevirtV1().VirtualMachineInstanceMigrations(ns).Delete(ctx, m3.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "abortRequested on the VMI", func(ctx context.Context) (bool, error) {
		v, err := c.vmi(ctx, "mover")
		return err == nil && v.Status.MigrationState != nil && v.Status.MigrationState.MigrationUID == m3.UID && v.Status.MigrationState.AbortRequested, nil
	})
	c.agentWrites(t, "mover", map[string]any{"migrationState": map[string]any{"failed": true, "completed": true, "endTimestamp": metav1.Now()}})
	c.waitMigrationGone(t, m3.Name)
	c.waitNoTargetPod(t, vmi, m3.UID)
	if v, err := c.vmi(ctx, "mover"); err != nil || v.Status.Phase != v1.Running || v.Status.NodeName != "node02" {
		t.Errorf("after the canceled migration: %v; want the VMI Running on node02", err)
	}

	// Not migratable.
	c.runningVMI(t, "bridged", func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}}
		vmi.Spec.Networks = []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
	})
	waitFor(t, 30*time.Second, "bridged not LiveMigratable", func(ctx context.Context) (bool, error) {
		v, err := c.vmi(ctx, "bridged")
		return err == nil && conditionStatus(v, v1.VirtualMachineInstanceIsMigratable) == corev1.ConditionFalse, nil
	})
	m4 := c.createMigration(t, "bridged")
	c.waitMigrationPhase(t, m4.Name, v1.MigrationFailed)
	c.waitEvent(t, m4.Name, migration.ReasonFailedMigration)
	events, _ := c.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + m4.Name})
	found := false
	for _, e := range events.Items {
		found = found || e.Message == "Cannot migrate VMI, Reason: InterfaceNotLiveMigratable, Message: cannot migrate VMI which does not use masquerade or a migratable plugin to connect to the pod network"
	}
	if !found {
		t.Errorf("no event with the reason: %+v", events.Items)
	}
}

func ptr[T any](v T) *T { return &v }

func conditionStatus(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) corev1.ConditionStatus {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// runningVMI creates a VMI and plays its node agent until it runs on node01.
func (c *cluster) runningVMI(t *testing.T, name string, edit func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	t.Helper()
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: newVM(name, v1.RunStrategyAlways).Spec.Template.Spec}
	if edit != nil {
		edit(vmi)
	}
	if _, err := c.client.KubevirtV1().VirtualMachineInstances(ns).Create(context.Background(), vmi, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := c.waitVMIPhase(t, name, v1.Scheduled); got.Status.NodeName != "node01" {
		t.Fatalf("VMI %s scheduled to %q, want node01", name, got.Status.NodeName)
	}
	c.setVMIPhase(t, name, v1.Running)
	got, err := c.vmi(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (c *cluster) createMigration(t *testing.T, vmiName string) *v1.VirtualMachineInstanceMigration {
	t.Helper()
	m, err := c.client.KubevirtV1().VirtualMachineInstanceMigrations(ns).Create(context.Background(), &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kubevirt-migrate-vm-"},
		Spec:       v1.VirtualMachineInstanceMigrationSpec{VMIName: vmiName},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (c *cluster) waitMigrationPhase(t *testing.T, name string, phase v1.VirtualMachineInstanceMigrationPhase) *v1.VirtualMachineInstanceMigration {
	t.Helper()
	var got *v1.VirtualMachineInstanceMigration
	waitFor(t, 30*time.Second, fmt.Sprintf("migration %s in phase %s", name, phase), func(ctx context.Context) (bool, error) {
		m, err := c.client.KubevirtV1().VirtualMachineInstanceMigrations(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = m
		return m.Status.Phase == phase, nil
	})
	return got
}

func (c *cluster) waitMigrationGone(t *testing.T, name string) {
	t.Helper()
	waitFor(t, 30*time.Second, "migration "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := c.client.KubevirtV1().VirtualMachineInstanceMigrations(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func (c *cluster) waitNoTargetPod(t *testing.T, vmi *v1.VirtualMachineInstance, uid types.UID) {
	t.Helper()
	waitFor(t, 30*time.Second, "target pod of migration "+string(uid)+" gone", func(ctx context.Context) (bool, error) {
		pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.MigrationJobLabel + "=" + string(uid)})
		return err == nil && len(pods.Items) == 0, nil
	})
}

func (c *cluster) waitEvent(t *testing.T, name, reason string) {
	t.Helper()
	waitFor(t, 30*time.Second, "event "+reason+" on "+name, func(ctx context.Context) (bool, error) {
		events, err := c.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
}

// agentWrites merges status fields into the VMI, as a node agent writes
// its part of status.migrationState.
func (c *cluster) agentWrites(t *testing.T, name string, status map[string]any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.KubevirtV1().VirtualMachineInstances(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// migrationKubelet stands in for two nodes: a migration's target pod runs
// on the node its affinity does not exclude (unless the returned flag holds
// it unscheduled), every other launcher pod on node01.
func (c *cluster) migrationKubelet(t *testing.T) *atomic.Bool {
	var hold atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtLauncherValue})
			if err == nil {
				for i := range pods.Items {
					pod := &pods.Items[i]
					node := "node01"
					if pod.Labels[v1.MigrationJobLabel] != "" {
						node = otherNode(pod)
						if hold.Load() && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
							continue
						}
					}
					c.kubeletStepOn(ctx, pod, node)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return &hold
}

// kubeletStepOn is kubeletStep for a pod bound to node.
func (c *cluster) kubeletStepOn(ctx context.Context, pod *corev1.Pod, node string) {
	if pod.DeletionTimestamp == nil && pod.Spec.NodeName == "" {
		_ = c.kube.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		return
	}
	c.kubeletStep(ctx, pod)
}

// otherNode is node01 or node02, whichever the pod's required node
// affinity does not exclude.
func otherNode(pod *corev1.Pod) string {
	excluded := map[string]bool{}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range term.MatchExpressions {
				if r.Key == corev1.LabelHostname && r.Operator == corev1.NodeSelectorOpNotIn {
					for _, v := range r.Values {
						excluded[v] = true
					}
				}
			}
		}
	}
	if excluded["node01"] {
		return "node02"
	}
	return "node01"
}

// TestEvacuation: tainting a node kubevirt.io/drain:NoSchedule makes the
// Manager's evacuation controller create a migration (annotated with the
// node) for its VMI with evictionStrategy LiveMigrate, none for a VMI
// without one; a VMI whose status.evacuationNodeName names its node (a
// refused eviction) gets one on an untainted node.
func TestEvacuation(t *testing.T) {
	c := startCluster(t)
	holdTargets := c.migrationKubelet(t)
	holdTargets.Store(true) // the migrations need not proceed
	c.startManager(t, vmcontrol.LeaderElection{})
	ctx := context.Background()
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
	c.runningVMI(t, "leaver", masquerade(ptr(v1.EvictionStrategyLiveMigrate)))
	c.runningVMI(t, "stayer", masquerade(nil))
	for _, name := range []string{"leaver", "stayer"} {
		waitFor(t, 30*time.Second, name+" LiveMigratable", func(ctx context.Context) (bool, error) {
			v, err := c.vmi(ctx, name)
			return err == nil && conditionStatus(v, v1.VirtualMachineInstanceIsMigratable) == corev1.ConditionTrue, nil
		})
	}
	evacuations := func(ctx context.Context) map[string]int {
		list, err := c.client.KubevirtV1().VirtualMachineInstanceMigrations(ns).List(ctx, metav1.ListOptions{})
		out := map[string]int{}
		if err != nil {
			return out
		}
		for _, m := range list.Items {
			if m.Annotations[evacuation.MigrationAnnotation] == "node01" {
				out[m.Spec.VMIName]++
			}
		}
		return out
	}
	consistently(t, 2*time.Second, "before the node was drained", func(ctx context.Context) error {
		if got := evacuations(ctx); len(got) != 0 {
			return fmt.Errorf("evacuation migrations %v, want none", got)
		}
		return nil
	})
	node, err := c.kube.CoreV1().Nodes().Get(ctx, "node01", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = []corev1.Taint{{Key: evacuation.DrainTaintKey, Effect: corev1.TaintEffectNoSchedule}}
	if _, err := c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "an evacuation migration for leaver", func(ctx context.Context) (bool, error) {
		return evacuations(ctx)["leaver"] == 1, nil
	})
	consistently(t, 2*time.Second, "after the node was drained", func(ctx context.Context) error {
		if got := evacuations(ctx); got["leaver"] != 1 || got["stayer"] != 0 {
			return fmt.Errorf("evacuation migrations %v, want one for leaver only", got)
		}
		return nil
	})

	// A refused eviction on an untainted node: evacuationNodeName.
	node, _ = c.kube.CoreV1().Nodes().Get(ctx, "node01", metav1.GetOptions{})
	node.Spec.Taints = nil
	if _, err := c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.runningVMI(t, "evicted", masquerade(ptr(v1.EvictionStrategyLiveMigrate)))
	waitFor(t, 30*time.Second, "evicted LiveMigratable", func(ctx context.Context) (bool, error) {
		v, err := c.vmi(ctx, "evicted")
		return err == nil && conditionStatus(v, v1.VirtualMachineInstanceIsMigratable) == corev1.ConditionTrue, nil
	})
	c.agentWrites(t, "evicted", map[string]any{"evacuationNodeName": "node01"})
	waitFor(t, 30*time.Second, "an evacuation migration for evicted", func(ctx context.Context) (bool, error) {
		return evacuations(ctx)["evicted"] == 1, nil
	})
}
