// Package node is KubeVirt's node controller: it notices nodes whose node
// agent (virt-handler) stopped reporting and fails the VirtualMachineInstances
// stranded on them, so their VirtualMachines start them again elsewhere.
//
// The node agent writes, on its Node, the annotation kubevirt.io/heartbeat
// (an RFC 3339 time) and the label kubevirt.io/schedulable=true about once a
// minute. A node is unresponsive (see Unresponsive) when its heartbeat is
// older than Config.HeartbeatTimeout (5 minutes, as KubeVirt) or when the
// Node was deleted; a node without a heartbeat yet is not (as KubeVirt). The
// VMI controller keeps new launcher pods off unresponsive nodes (by a node
// affinity on the pod, vmi.Config.Nodes: other workloads and running
// launcher pods are not concerned), and this controller
//   - removes the NoSchedule taint earlier versions put on such a node
//     (UnresponsiveTaint);
//   - sets Failed, with reason NodeUnresponsive and an event naming the node,
//     on each of the node's VMIs (status.nodeName) that is neither final nor
//     being deleted and has no launcher pod (label
//     kubevirt.io/created-by=<VMI UID>) in phase Running. A VMI whose
//     launcher pod still runs is left alone: its guest may still be running,
//     and starting it again elsewhere would run two guests on the same
//     disks.
//
// Nodes without a heartbeat are left alone. Each responsive node is looked at again when its heartbeat
// would expire (heartbeat + timeout), so a node whose agent dies is noticed
// on time without any event; changes of the node's VMIs and launcher pods
// bring it back too.
//
// Differences from KubeVirt's node controller:
//   - KubeVirt looks at every node once a minute; this controller schedules
//     each node's next look at the moment its heartbeat expires;
//   - a launcher pod keeps its VMI alive only while its phase is Running
//     (KubeVirt also accepts Pending pods, and rejects Running pods whose
//     containers all terminated, which the Manager's slim pod cache does not
//     record), but it keeps it alive on any node, not only on the VMI's
//     (a migration's target may run the guest elsewhere);
//   - KubeVirt labels the node kubevirt.io/schedulable=false. A kubelet
//     re-admits its pods against their node selectors when it restarts, so
//     with the label a kubelet restart on that node killed every VM still
//     running there (KubeVirt's bug #11843). Here the label stays as the
//     agent wrote it, and only launcher pods created while the node is
//     unresponsive are kept off it (their own node affinity, which a
//     running pod's node always matched);
//   - a Node missing from the cache is confirmed missing with a GET before
//     its VMIs are failed;
//   - VMIs being deleted are not failed: they are going away, and a Failed
//     instance would count as a failed start against its VirtualMachine
//     (vmcontrol/vm's start back-off).
package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	kvclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/vmapi/v1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// DefaultWorkers is the number of concurrent syncs, as KubeVirt's
// virt-controller (its node controller's threads).
const DefaultWorkers = 3

// DefaultHeartbeatTimeout is how old a node agent's heartbeat may get before
// its node is unresponsive, as KubeVirt.
const DefaultHeartbeatTimeout = 5 * time.Minute

// Config is what the controller needs.
type Config struct {
	// Client writes VMIs (a clientset's KubevirtV1()).
	Client kvclient.KubevirtV1Interface
	// Kube reads and patches Nodes: a *kubeclient.Client's Nodes(), or a
	// client-go clientset's CoreV1().Nodes().
	Kube kubeclient.NodeInterface
	// Nodes, VMIs and Pods are shared informers the caller starts, of
	// Nodes, VirtualMachineInstances and Pods. Pods may be filtered to
	// launcher pods (label kubevirt.io=virt-launcher). New adds indexes to
	// VMIs and Pods, so it must run before they start.
	Nodes cache.SharedIndexInformer
	VMIs  cache.SharedIndexInformer
	Pods  cache.SharedIndexInformer
	// HeartbeatTimeout is how old a heartbeat may get (default
	// DefaultHeartbeatTimeout).
	HeartbeatTimeout time.Duration
	// Recorder records events on VMIs; events are dropped when nil.
	Recorder record.EventRecorder
	// Workers is the number of concurrent syncs (default DefaultWorkers).
	Workers int
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
	// OnPhaseChange, if set, is called when the controller moves a VMI to
	// a phase (Failed), as vmi.Config.OnPhaseChange.
	OnPhaseChange func(vmi *v1.VirtualMachineInstance, phase v1.VirtualMachineInstancePhase)
}

// Controller is the node controller.
type Controller struct {
	client        kvclient.KubevirtV1Interface
	kube          kubeclient.NodeInterface
	nodeLister    corelisters.NodeLister
	vmiIndexer    cache.Indexer
	podIndexer    cache.Indexer
	synced        []cache.InformerSynced
	timeout       time.Duration
	recorder      record.EventRecorder
	stale         *reconcile.Superseded // VMIs written over, by namespace/name
	loop          *reconcile.Loop
	now           func() time.Time
	onPhaseChange func(*v1.VirtualMachineInstance, v1.VirtualMachineInstancePhase)
}

// vmisByNodeIndex indexes VMIs by status.nodeName.
const vmisByNodeIndex = "vmkit.io/node-controller-status.nodeName"

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Kube == nil || cfg.Nodes == nil || cfg.VMIs == nil || cfg.Pods == nil {
		return nil, errors.New("node controller: Client, Kube, Nodes, VMIs and Pods are required")
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	timeout := cfg.HeartbeatTimeout
	if timeout <= 0 {
		timeout = DefaultHeartbeatTimeout
	}
	c := &Controller{
		client:        cfg.Client,
		kube:          cfg.Kube,
		nodeLister:    corelisters.NewNodeLister(cfg.Nodes.GetIndexer()),
		vmiIndexer:    cfg.VMIs.GetIndexer(),
		podIndexer:    cfg.Pods.GetIndexer(),
		synced:        []cache.InformerSynced{cfg.Nodes.HasSynced, cfg.VMIs.HasSynced, cfg.Pods.HasSynced},
		timeout:       timeout,
		recorder:      cfg.Recorder,
		stale:         reconcile.NewSuperseded(),
		now:           time.Now,
		onPhaseChange: cfg.OnPhaseChange,
	}
	if err := cfg.VMIs.AddIndexers(cache.Indexers{vmisByNodeIndex: indexByNode}); err != nil {
		return nil, fmt.Errorf("node controller: indexing VMIs: %w", err)
	}
	// The VMI controller's index on the same informer, when both run.
	if err := podindex.Add(cfg.Pods); err != nil {
		return nil, fmt.Errorf("node controller: %w", err)
	}
	c.loop = &reconcile.Loop{
		Name:    "node",
		Queue:   reconcile.NewQueue("node"),
		Workers: workers,
		Sync:    c.sync,
		Observe: cfg.Observe,
	}
	if _, err := cfg.Nodes.AddEventHandler(c.loop.Handler()); err != nil {
		return nil, fmt.Errorf("node controller: %w", err)
	}
	// A VMI that lands on (or is still on) a node brings the node back:
	// the node may have died already.
	if _, err := cfg.VMIs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.vmiChanged,
		UpdateFunc: func(_, obj any) { c.vmiChanged(obj) },
		DeleteFunc: func(obj any) {
			if key, ok := reconcile.KeyOf(obj); ok {
				c.stale.Forget(key)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("node controller: %w", err)
	}
	// A launcher pod that stops running or goes away may leave its VMI
	// stranded on an unresponsive node.
	if _, err := cfg.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Status.Phase != corev1.PodRunning {
				c.podChanged(pod)
			}
		},
		DeleteFunc: func(obj any) {
			if pod, ok := reconcile.Unwrap(obj).(*corev1.Pod); ok {
				c.podChanged(pod)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("node controller: %w", err)
	}
	return c, nil
}

// Start runs the controller until ctx is done. The informers must be started
// by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	return c.loop.Start(ctx, c.synced...)
}

// vmiChanged enqueues the node of a VMI that is not final.
func (c *Controller) vmiChanged(obj any) {
	if vmi, ok := obj.(*v1.VirtualMachineInstance); ok && vmi.Status.NodeName != "" && !vmi.IsFinal() {
		c.loop.Queue.Add(vmi.Status.NodeName)
	}
}

// podChanged enqueues the node a launcher pod was bound to.
func (c *Controller) podChanged(pod *corev1.Pod) {
	if pod.Spec.NodeName != "" && pod.Labels[v1.CreatedByLabel] != "" {
		c.loop.Queue.Add(pod.Spec.NodeName)
	}
}

// indexByNode indexes VMIs that are not final by status.nodeName.
func indexByNode(obj any) ([]string, error) {
	vmi, ok := obj.(*v1.VirtualMachineInstance)
	if !ok || vmi.Status.NodeName == "" || vmi.IsFinal() {
		return nil, nil
	}
	return []string{vmi.Status.NodeName}, nil
}
