package node

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/fakewrites"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

var now = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// newNode is node01 with a heartbeat age old (none if noHeartbeat) and the
// schedulable label set to schedulable (absent if empty).
func newNode(age time.Duration, schedulable string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node01", UID: "node-uid", ResourceVersion: "42",
		Labels: map[string]string{"kubernetes.io/hostname": "node01"}, Annotations: map[string]string{}}}
	if age != noHeartbeat {
		n.Annotations[v1.VirtHandlerHeartbeat] = now.Add(-age).Format(time.RFC3339)
	}
	if schedulable != "" {
		n.Labels[v1.NodeSchedulable] = schedulable
	}
	return n
}

const noHeartbeat time.Duration = -1

// newVMI is a VMI on node in phase.
func newVMI(name, node string, phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), ResourceVersion: "1"},
		Status: v1.VirtualMachineInstanceStatus{NodeName: node, Phase: phase,
			PhaseTransitionTimestamps: []v1.VirtualMachineInstancePhaseTransitionTimestamp{
				{Phase: phase, PhaseTransitionTimestamp: metav1.NewTime(now.Add(-time.Hour))}}},
	}
}

// launcher is the launcher pod of vmi on node in phase.
func launcher(vmi *v1.VirtualMachineInstance, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-" + vmi.Name, Namespace: vmi.Namespace, UID: types.UID("pod-" + vmi.Name),
			Labels: map[string]string{v1.AppLabel: v1.VirtLauncherValue, v1.CreatedByLabel: string(vmi.UID)}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase},
	}
}

type harness struct {
	c        *Controller
	client   *fake.Clientset
	kube     *kubefake.Clientset
	vmis     cache.Indexer
	nodes    cache.Indexer
	recorder *record.FakeRecorder
	changes  []string // OnPhaseChange calls: "name phase"
}

// newHarness caches node (unless nil), the VMIs and the pods; the API
// server (the fake clientsets) holds them and the extra nodes.
func newHarness(t *testing.T, node *corev1.Node, vmis []*v1.VirtualMachineInstance, pods []*corev1.Pod, apiNodes ...*corev1.Node) *harness {
	t.Helper()
	var objs, kobjs []runtime.Object
	for _, v := range vmis {
		objs = append(objs, v)
	}
	for _, p := range pods {
		kobjs = append(kobjs, p)
	}
	if node != nil {
		kobjs = append(kobjs, node)
	}
	for _, n := range apiNodes {
		kobjs = append(kobjs, n)
	}
	client := fake.NewSimpleClientset(objs...)
	kube := kubefake.NewClientset(kobjs...)
	f := externalversions.NewSharedInformerFactory(client, 0)
	kf := kubeinformers.NewSharedInformerFactory(kube, 0)
	h := &harness{client: client, kube: kube, recorder: record.NewFakeRecorder(10)}
	c, err := New(Config{Client: client.KubevirtV1(), Kube: kube.CoreV1().Nodes(),
		Nodes: kf.Core().V1().Nodes().Informer(), VMIs: f.Kubevirt().V1().VirtualMachineInstances().Informer(),
		Pods: kf.Core().V1().Pods().Informer(), Recorder: h.recorder,
		OnPhaseChange: func(vmi *v1.VirtualMachineInstance, p v1.VirtualMachineInstancePhase) {
			h.changes = append(h.changes, vmi.Name+" "+string(p))
		}})
	if err != nil {
		t.Fatal(err)
	}
	h.c, h.vmis, h.nodes = c, f.Kubevirt().V1().VirtualMachineInstances().Informer().GetIndexer(), kf.Core().V1().Nodes().Informer().GetIndexer()
	for _, v := range vmis {
		_ = h.vmis.Add(v)
	}
	for _, p := range pods {
		_ = kf.Core().V1().Pods().Informer().GetIndexer().Add(p)
	}
	if node != nil {
		_ = h.nodes.Add(node)
	}
	c.now = func() time.Time { return now }
	client.ClearActions()
	kube.ClearActions()
	return h
}

// writes lists node writes, then VMI writes (the order a sync makes them).
func (h *harness) writes() []string { return fakewrites.List(h.kube.Actions(), h.client.Actions()) }

// failed maps the names of the VMIs the sync updated to their phase and reason.
func (h *harness) failed(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range h.client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			vmi := u.GetObject().(*v1.VirtualMachineInstance)
			out[vmi.Name] = string(vmi.Status.Phase) + " " + vmi.Status.Reason
		}
	}
	return out
}

// taintPatches lists the taints each node patch leaves on the node
// ("node01 a=b:NoSchedule,...", "node01 none"). A patch must carry the cached
// resourceVersion as its precondition and must not touch the labels: the
// kubelet re-admits its pods against their node selectors when it restarts.
func (h *harness) taintPatches(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, a := range h.kube.Actions() {
		p, ok := a.(k8stesting.PatchAction)
		if !ok {
			continue
		}
		if p.GetPatchType() != types.MergePatchType {
			t.Errorf("patch type %s, want a merge patch", p.GetPatchType())
		}
		var body struct {
			Metadata map[string]any `json:"metadata"`
			Spec     struct {
				Taints []corev1.Taint `json:"taints"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		if body.Metadata["resourceVersion"] != "42" || len(body.Metadata) != 1 {
			t.Errorf("patch %s: want the cached resourceVersion 42 as a precondition and no other metadata", p.GetPatch())
		}
		var taints []string
		for _, taint := range body.Spec.Taints {
			taints = append(taints, taint.ToString())
		}
		if len(taints) == 0 {
			taints = []string{"none"}
		}
		out = append(out, p.GetName()+" "+strings.Join(taints, ","))
	}
	return out
}

// tainted is node with extra taints.
func tainted(node *corev1.Node, taints ...corev1.Taint) *corev1.Node {
	node.Spec.Taints = append(node.Spec.Taints, taints...)
	return node
}

var otherTaint = corev1.Taint{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}

func TestSync(t *testing.T) {
	running := newVMI("running-pod", "node01", v1.Running)
	gone := newVMI("pod-gone", "node01", v1.Running)
	succeededPod := newVMI("pod-succeeded", "node01", v1.Running)
	scheduled := newVMI("scheduled-pod-gone", "node01", v1.Scheduled)
	migrated := newVMI("pod-runs-elsewhere", "node01", v1.Running)
	done := newVMI("succeeded", "node01", v1.Succeeded)
	failed := newVMI("failed", "node01", v1.Failed)
	elsewhere := newVMI("elsewhere", "node02", v1.Running)
	stale := newNode(10*time.Minute, "true")

	cases := []struct {
		name       string
		node       *corev1.Node   // cached and in the API server; nil: deleted
		apiNodes   []*corev1.Node // in the API server only
		vmis       []*v1.VirtualMachineInstance
		pods       []*corev1.Pod
		wantErr    error
		wantWrites []string
		wantTaints []string          // taints left by each node patch
		wantFailed map[string]string // VMI → "phase reason" written
	}{{
		name:    "fresh heartbeat: nothing, look again when it expires",
		node:    newNode(time.Minute, "true"),
		vmis:    []*v1.VirtualMachineInstance{gone},
		wantErr: reconcile.After(4 * time.Minute),
	}, {
		name: "stale heartbeat: the node is not tainted, its label untouched",
		node: stale,
	}, {
		name: "stale heartbeat: the node's other taints are kept",
		node: tainted(newNode(10*time.Minute, "true"), otherTaint),
	}, {
		name:       "stale heartbeat, tainted by an earlier version: the taint goes",
		node:       tainted(newNode(10*time.Minute, "true"), otherTaint, UnresponsiveTaint()),
		wantWrites: []string{"patch nodes"},
		wantTaints: []string{"node01 example.com/gpu=true:NoSchedule"},
	}, {
		name: "stale heartbeat, labeled unschedulable: no patch",
		node: newNode(10*time.Minute, "false"),
	}, {
		name:       "heartbeat back: the taint goes, the other taints stay",
		node:       tainted(newNode(time.Minute, "true"), otherTaint, UnresponsiveTaint()),
		wantErr:    reconcile.After(4 * time.Minute),
		wantWrites: []string{"patch nodes"},
		wantTaints: []string{"node01 example.com/gpu=true:NoSchedule"},
	}, {
		name:       "heartbeat back: the only taint goes",
		node:       tainted(newNode(time.Minute, "true"), UnresponsiveTaint()),
		wantErr:    reconcile.After(4 * time.Minute),
		wantWrites: []string{"patch nodes"},
		wantTaints: []string{"node01 none"},
	}, {
		name:       "heartbeat exactly timeout old is stale",
		node:       newNode(DefaultHeartbeatTimeout, "true"),
		vmis:       []*v1.VirtualMachineInstance{gone},
		wantWrites: []string{"update virtualmachineinstances"},
		wantFailed: map[string]string{"pod-gone": "Failed NodeUnresponsive"},
	}, {
		name: "schedulable without a heartbeat (the agent not started yet): responsive, as KubeVirt",
		node: newNode(noHeartbeat, "true"),
		vmis: []*v1.VirtualMachineInstance{gone},
	}, {
		name: "node without an agent: untouched, no requeue",
		node: newNode(noHeartbeat, ""),
		vmis: []*v1.VirtualMachineInstance{gone},
	}, {
		name: "agent starting (schedulable=false, no heartbeat yet): untouched",
		node: newNode(noHeartbeat, "false"),
		vmis: []*v1.VirtualMachineInstance{gone},
	}, {
		name: "stale node: a VMI whose launcher runs is left alone, the others fail",
		node: stale,
		vmis: []*v1.VirtualMachineInstance{running, gone, succeededPod, scheduled},
		pods: []*corev1.Pod{
			launcher(running, "node01", corev1.PodRunning),
			launcher(succeededPod, "node01", corev1.PodSucceeded),
		},
		wantWrites: []string{"update virtualmachineinstances", "update virtualmachineinstances", "update virtualmachineinstances"},
		wantFailed: map[string]string{
			"pod-gone":           "Failed NodeUnresponsive",
			"pod-succeeded":      "Failed NodeUnresponsive",
			"scheduled-pod-gone": "Failed NodeUnresponsive",
		},
	}, {
		name: "a launcher running on another node keeps its VMI",
		node: newNode(10*time.Minute, "false"),
		vmis: []*v1.VirtualMachineInstance{migrated},
		pods: []*corev1.Pod{launcher(migrated, "node02", corev1.PodRunning)},
	}, {
		name: "a running pod of another namespace does not count",
		node: newNode(10*time.Minute, "false"),
		vmis: []*v1.VirtualMachineInstance{gone},
		pods: []*corev1.Pod{func() *corev1.Pod {
			p := launcher(gone, "node01", corev1.PodRunning)
			p.Namespace = "other"
			return p
		}()},
		wantWrites: []string{"update virtualmachineinstances"},
		wantFailed: map[string]string{"pod-gone": "Failed NodeUnresponsive"},
	}, {
		name: "a VMI being deleted is left alone",
		node: newNode(10*time.Minute, "false"),
		vmis: []*v1.VirtualMachineInstance{func() *v1.VirtualMachineInstance {
			v := gone.DeepCopy()
			v.DeletionTimestamp = &metav1.Time{Time: now}
			v.Finalizers = []string{v1.VirtualMachineControllerFinalizer}
			return v
		}()},
	}, {
		name: "final VMIs and other nodes' VMIs are untouched",
		node: newNode(10*time.Minute, "false"),
		vmis: []*v1.VirtualMachineInstance{done, failed, elsewhere},
	}, {
		name:       "deleted node: its VMIs without running launchers fail",
		vmis:       []*v1.VirtualMachineInstance{running, gone, done},
		pods:       []*corev1.Pod{launcher(running, "node01", corev1.PodRunning)},
		wantWrites: []string{"update virtualmachineinstances"},
		wantFailed: map[string]string{"pod-gone": "Failed NodeUnresponsive"},
	}, {
		name:     "node missing from the cache but not from the API server: nothing",
		apiNodes: []*corev1.Node{newNode(time.Minute, "true")},
		vmis:     []*v1.VirtualMachineInstance{gone},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.node, tc.vmis, tc.pods, tc.apiNodes...)
			err := h.c.sync(context.Background(), "node01")
			if (err == nil) != (tc.wantErr == nil) || (err != nil && err.Error() != tc.wantErr.Error()) {
				t.Fatalf("sync = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantWrites, h.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTaints, h.taintPatches(t)); diff != "" {
				t.Errorf("node patches (-want +got):\n%s", diff)
			}
			got := h.failed(t)
			if tc.wantFailed == nil {
				tc.wantFailed = map[string]string{}
			}
			if diff := cmp.Diff(tc.wantFailed, got); diff != "" {
				t.Errorf("VMI updates (-want +got):\n%s", diff)
			}
			if len(h.changes) != len(tc.wantFailed) {
				t.Errorf("OnPhaseChange calls %v, want one per failed VMI", h.changes)
			}
		})
	}
}

// TestFailedVMIStatus checks the whole status written, the event naming
// the node, and that a sync before the cache has caught up with the write
// does not write again.
func TestFailedVMIStatus(t *testing.T) {
	for _, tc := range []struct {
		name      string
		node      *corev1.Node
		wantEvent string
	}{
		{"unresponsive", newNode(10*time.Minute, "false"), "Normal NodeUnresponsive virt-handler on node node01 is not responsive, marked as failed"},
		{"deleted", nil, "Normal NodeUnresponsive node node01 was deleted, marked as failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := newVMI("vm", "node01", v1.Running)
			h := newHarness(t, tc.node, []*v1.VirtualMachineInstance{vmi}, nil)
			if err := h.c.sync(context.Background(), "node01"); err != nil {
				t.Fatal(err)
			}
			got, err := h.client.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := vmi.Status.DeepCopy()
			want.Phase, want.Reason = v1.Failed, ReasonNodeUnresponsive
			want.PhaseTransitionTimestamps = append(want.PhaseTransitionTimestamps,
				v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: v1.Failed, PhaseTransitionTimestamp: metav1.NewTime(now)})
			if diff := cmp.Diff(*want, got.Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			select {
			case e := <-h.recorder.Events:
				if e != tc.wantEvent {
					t.Errorf("event %q, want %q", e, tc.wantEvent)
				}
			default:
				t.Errorf("no event, want %q", tc.wantEvent)
			}

			h.client.ClearActions()
			if err := h.c.sync(context.Background(), "node01"); err != nil {
				t.Fatal(err)
			}
			if w := h.writes(); len(w) != 0 {
				t.Errorf("a sync on the stale cache wrote %v, want nothing", w)
			}
		})
	}
}

// TestConflictRequeues: a VMI that changed since the cache saw it is not
// overwritten; the sync fails, so the loop tries the node again with
// back-off.
func TestConflictRequeues(t *testing.T) {
	h := newHarness(t, newNode(10*time.Minute, "false"), []*v1.VirtualMachineInstance{newVMI("vm", "node01", v1.Running)}, nil)
	h.client.PrependReactor("update", "virtualmachineinstances", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(v1.Resource("virtualmachineinstances"), "vm", errors.New("changed"))
	})
	err := h.c.sync(context.Background(), "node01")
	if !apierrors.IsConflict(err) || reconcile.IsRequeue(err) {
		t.Fatalf("sync = %v, want the conflict (retried with back-off)", err)
	}
	if len(h.changes) != 0 || len(h.recorder.Events) != 0 {
		t.Errorf("a failed write reported %v and %d events", h.changes, len(h.recorder.Events))
	}
}

func TestUnresponsive(t *testing.T) {
	garbled := newNode(noHeartbeat, "true")
	garbled.Annotations[v1.VirtHandlerHeartbeat] = "yesterday"
	garbledNoAgent := newNode(noHeartbeat, "")
	garbledNoAgent.Annotations[v1.VirtHandlerHeartbeat] = "yesterday"
	for _, tc := range []struct {
		name        string
		node        *corev1.Node
		timeout     time.Duration
		want        bool
		wantRecheck time.Duration
	}{
		{"deleted", nil, 5 * time.Minute, true, 0},
		{"fresh", newNode(time.Minute, "true"), 5 * time.Minute, false, 4 * time.Minute},
		{"fresh, short timeout", newNode(10*time.Second, "true"), 30 * time.Second, false, 20 * time.Second},
		{"fresh, label false", newNode(time.Minute, "false"), 5 * time.Minute, false, 4 * time.Minute},
		{"heartbeat from the future", newNode(-time.Minute, "true"), 5 * time.Minute, false, 6 * time.Minute},
		{"one second before expiry", newNode(5*time.Minute-time.Second, "true"), 5 * time.Minute, false, time.Second},
		{"expired", newNode(5*time.Minute, "true"), 5 * time.Minute, true, 0},
		{"stale", newNode(10*time.Minute, "false"), 5 * time.Minute, true, 0},
		{"stale under a longer timeout is fresh", newNode(10*time.Minute, "true"), 15 * time.Minute, false, 5 * time.Minute},
		{"no heartbeat, schedulable", newNode(noHeartbeat, "true"), 5 * time.Minute, false, 0},
		{"no heartbeat, not schedulable", newNode(noHeartbeat, "false"), 5 * time.Minute, false, 0},
		{"no agent", newNode(noHeartbeat, ""), 5 * time.Minute, false, 0},
		{"unreadable heartbeat, schedulable", garbled, 5 * time.Minute, false, 0},
		{"unreadable heartbeat, no label", garbledNoAgent, 5 * time.Minute, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, recheck := Unresponsive(tc.node, tc.timeout, now)
			if got != tc.want || recheck != tc.wantRecheck {
				t.Errorf("Unresponsive = %v, %v; want %v, %v", got, recheck, tc.want, tc.wantRecheck)
			}
		})
	}
}
