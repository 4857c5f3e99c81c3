// Package replicaset is the VirtualMachineInstanceReplicaSet controller: it
// keeps spec.replicas VirtualMachineInstances made from the replica set's
// template that match its selector, adopting matching orphans and
// releasing owned instances that stop matching, and reports replicas,
// ready replicas, the selector (for the scale subresource, so `kubectl
// scale` and a HorizontalPodAutoscaler work) and its conditions.
//
// Two things differ from KubeVirt's, as Kubernetes' own ReplicaSet
// controller does them:
//   - creations go out in slow-start batches (1, 2, 4, … up to the number
//     missing) and stop at the first error, so a template the API server
//     rejects costs one failed request per sync, not one per replica;
//   - when scaling down, the least progressed instances go first: not yet
//     scheduled, then scheduling, then not ready, then the youngest.
//
// Instances that finished (Succeeded or Failed) are deleted and replaced.
// A paused replica set creates and deletes nothing (condition
// ReplicaPaused).
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	kvclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/vmapi/v1"
	listers "github.com/vmkit/vmkit/vmapi/generated/listers/vmapi/v1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/internal/expectations"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// DefaultWorkers is the number of concurrent syncs, as KubeVirt's
// virt-controller (--replicaset-controller-threads).
const DefaultWorkers = 3

// Config is what the controller needs.
type Config struct {
	// Client writes replica sets and VMIs (a clientset's KubevirtV1()).
	Client kvclient.KubevirtV1Interface
	// ReplicaSets and VMIs are shared informers of
	// VirtualMachineInstanceReplicaSets and VirtualMachineInstances; the
	// caller starts them.
	ReplicaSets cache.SharedIndexInformer
	VMIs        cache.SharedIndexInformer
	// KubeVirts, if set, is a shared informer of the KubeVirt CR, started
	// by the caller: its configuration decides some defaults of the VMIs
	// the controller creates (see NewVMI), read at each creation. Without
	// it, KubeVirt's defaults.
	KubeVirts cache.SharedIndexInformer
	// Recorder records events on replica sets; events are dropped when nil.
	Recorder record.EventRecorder
	// Workers is the number of concurrent syncs (default DefaultWorkers).
	Workers int
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
}

// Controller is the VirtualMachineInstanceReplicaSet controller.
type Controller struct {
	client    kvclient.KubevirtV1Interface
	rsLister  listers.VirtualMachineInstanceReplicaSetLister
	vmiLister listers.VirtualMachineInstanceLister
	synced    []cache.InformerSynced
	kubevirts cache.Store // the KubeVirt CR; nil without it
	recorder  record.EventRecorder
	exp       *expectations.Expectations
	stale     *reconcile.Superseded
	loop      *reconcile.Loop
	now       func() time.Time
}

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.ReplicaSets == nil || cfg.VMIs == nil {
		return nil, errors.New("replicaset controller: Client, ReplicaSets and VMIs are required")
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	c := &Controller{
		client:    cfg.Client,
		rsLister:  listers.NewVirtualMachineInstanceReplicaSetLister(cfg.ReplicaSets.GetIndexer()),
		vmiLister: listers.NewVirtualMachineInstanceLister(cfg.VMIs.GetIndexer()),
		synced:    []cache.InformerSynced{cfg.ReplicaSets.HasSynced, cfg.VMIs.HasSynced},
		recorder:  cfg.Recorder,
		exp:       expectations.New(0),
		stale:     reconcile.NewSuperseded(),
		now:       time.Now,
	}
	if cfg.KubeVirts != nil {
		c.kubevirts = cfg.KubeVirts.GetStore()
		c.synced = append(c.synced, cfg.KubeVirts.HasSynced)
	}
	c.loop = &reconcile.Loop{
		Name:    "virtualmachineinstancereplicaset",
		Queue:   reconcile.NewQueue("virtualmachineinstancereplicaset"),
		Workers: workers,
		Sync:    c.sync,
		Observe: cfg.Observe,
	}
	if _, err := cfg.ReplicaSets.AddEventHandler(c.loop.Handler()); err != nil {
		return nil, fmt.Errorf("replicaset controller: %w", err)
	}
	if _, err := cfg.VMIs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.vmiChanged(obj, true, false) },
		UpdateFunc: func(old, obj any) {
			c.vmiChanged(obj, false, false)
			// A VMI whose labels changed may have left one replica set
			// for another; its old controller must look too.
			if o, ok := old.(*v1.VirtualMachineInstance); ok {
				if n, ok := obj.(*v1.VirtualMachineInstance); ok && !labels.Equals(o.Labels, n.Labels) {
					c.vmiChanged(old, false, false)
				}
			}
		},
		DeleteFunc: func(obj any) { c.vmiChanged(obj, false, true) },
	}); err != nil {
		return nil, fmt.Errorf("replicaset controller: %w", err)
	}
	return c, nil
}

// Start runs the controller until ctx is done. The informers must be started
// by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	return c.loop.Start(ctx, c.synced...)
}

// vmiChanged enqueues the replica set that controls a VMI (observing its
// creation or deletion), or, for an orphan, every replica set of its
// namespace whose selector matches it, which may adopt it.
func (c *Controller) vmiChanged(obj any, added, deleted bool) {
	vmi, ok := reconcile.Unwrap(obj).(*v1.VirtualMachineInstance)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(vmi); ref != nil {
		if ref.Kind != v1.VirtualMachineInstanceReplicaSetGroupVersionKind.Kind {
			return
		}
		key := vmi.Namespace + "/" + ref.Name
		switch {
		case added:
			c.exp.CreationObserved(key)
		case deleted:
			c.exp.DeletionObserved(key, vmi.UID)
		}
		c.loop.Queue.Add(key)
		return
	}
	if deleted {
		return
	}
	sets, err := c.rsLister.VirtualMachineInstanceReplicaSets(vmi.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, rs := range sets {
		if sel, err := controllerref.Selector(rs.Spec.Selector); err == nil && sel.Matches(labels.Set(vmi.Labels)) {
			c.loop.Queue.Add(rs.Namespace + "/" + rs.Name)
		}
	}
}
