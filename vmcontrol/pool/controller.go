// Package pool is the VirtualMachinePool controller (pool.kubevirt.io): it
// keeps spec.replicas VirtualMachines made from the pool's template, each
// named <pool>-<index> with the lowest free index as KubeVirt names them,
// with its own DataVolumes (the template's dataVolumeTemplates and the
// volumes using them get -<index> appended) and, with spec.nameGeneration,
// its own ConfigMaps and Secrets. It adopts orphaned VMs that match the
// selector and are named <pool>-<index>, releases owned VMs that stop
// matching, and reports replicas, ready replicas (the VMs' Ready
// condition), the selector (for the scale subresource, so `kubectl scale`
// and a HorizontalPodAutoscaler work) and its conditions.
//
// As vmcontrol/replicaset, and unlike KubeVirt's pool controller:
//   - creations go out in slow-start batches (1, 2, 4, …) and stop at the
//     first error;
//   - without a scale-in selection policy, scaling down deletes the least
//     progressed VMs first (no instance, then starting, then running but
//     not ready, then ready) and, among equals, the highest index, so the
//     pool shrinks back to <pool>-0 … <pool>-(n-1). KubeVirt picks at
//     random. A spec.scaleInStrategy.proactive.selectionPolicy (sortPolicy
//     and selectors) is honoured as KubeVirt does.
//
// A paused pool creates and deletes nothing (condition ReplicaPaused); an
// Unmanaged or Opportunistic scale-in strategy never deletes a VM. Template
// changes reach new VMs only: the update strategies, autohealing and state
// preservation are not implemented (docs/api-compatibility.md).
package pool

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	poolclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/pool/v1beta1"
	kvclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/vmapi/v1"
	poollisters "github.com/vmkit/vmkit/vmapi/generated/listers/pool/v1beta1"
	listers "github.com/vmkit/vmkit/vmapi/generated/listers/vmapi/v1"
	poolv1beta1 "github.com/vmkit/vmkit/vmapi/pool/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/controllerref"
	"github.com/vmkit/vmkit/vmcontrol/internal/expectations"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// DefaultWorkers is the number of concurrent syncs, as KubeVirt's
// virt-controller (--pool-controller-threads).
const DefaultWorkers = 3

// Config is what the controller needs.
type Config struct {
	// Client writes VirtualMachines (a clientset's KubevirtV1()).
	Client kvclient.KubevirtV1Interface
	// PoolClient writes pools (a clientset's PoolV1beta1()).
	PoolClient poolclient.PoolV1beta1Interface
	// Pools and VMs are shared informers of VirtualMachinePools and
	// VirtualMachines; the caller starts them.
	Pools cache.SharedIndexInformer
	VMs   cache.SharedIndexInformer
	// Recorder records events on pools; events are dropped when nil.
	Recorder record.EventRecorder
	// Workers is the number of concurrent syncs (default DefaultWorkers).
	Workers int
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
}

// Controller is the VirtualMachinePool controller.
type Controller struct {
	client     kvclient.KubevirtV1Interface
	poolClient poolclient.PoolV1beta1Interface
	poolLister poollisters.VirtualMachinePoolLister
	vmLister   listers.VirtualMachineLister
	synced     []cache.InformerSynced
	recorder   record.EventRecorder
	exp        *expectations.Expectations
	stale      *reconcile.Superseded
	loop       *reconcile.Loop
	now        func() time.Time
	shuffle    func(n int, swap func(i, j int)) // the Random sort policy
}

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.PoolClient == nil || cfg.Pools == nil || cfg.VMs == nil {
		return nil, errors.New("pool controller: Client, PoolClient, Pools and VMs are required")
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	c := &Controller{
		client:     cfg.Client,
		poolClient: cfg.PoolClient,
		poolLister: poollisters.NewVirtualMachinePoolLister(cfg.Pools.GetIndexer()),
		vmLister:   listers.NewVirtualMachineLister(cfg.VMs.GetIndexer()),
		synced:     []cache.InformerSynced{cfg.Pools.HasSynced, cfg.VMs.HasSynced},
		recorder:   cfg.Recorder,
		exp:        expectations.New(0),
		stale:      reconcile.NewSuperseded(),
		now:        time.Now,
		shuffle:    randShuffle,
	}
	c.loop = &reconcile.Loop{
		Name:    "virtualmachinepool",
		Queue:   reconcile.NewQueue("virtualmachinepool"),
		Workers: workers,
		Sync:    c.sync,
		Observe: cfg.Observe,
	}
	if _, err := cfg.Pools.AddEventHandler(c.loop.Handler()); err != nil {
		return nil, fmt.Errorf("pool controller: %w", err)
	}
	if _, err := cfg.VMs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.vmChanged(obj, true, false) },
		UpdateFunc: func(old, obj any) {
			c.vmChanged(obj, false, false)
			// A VM whose labels or controller changed may have left one
			// pool for another; the old one must look too.
			o, ok1 := old.(*v1.VirtualMachine)
			n, ok2 := obj.(*v1.VirtualMachine)
			if ok1 && ok2 && (!labels.Equals(o.Labels, n.Labels) || controllerUID(o) != controllerUID(n)) {
				c.vmChanged(old, false, false)
			}
		},
		DeleteFunc: func(obj any) { c.vmChanged(obj, false, true) },
	}); err != nil {
		return nil, fmt.Errorf("pool controller: %w", err)
	}
	return c, nil
}

// Start runs the controller until ctx is done. The informers must be started
// by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	return c.loop.Start(ctx, c.synced...)
}

func controllerUID(vm *v1.VirtualMachine) string {
	if ref := metav1.GetControllerOf(vm); ref != nil {
		return string(ref.UID)
	}
	return ""
}

// vmChanged enqueues the pool that controls a VM (observing its creation or
// deletion), or, for an orphan, every pool of its namespace that may adopt
// it: its selector matches and the VM is named after it.
func (c *Controller) vmChanged(obj any, added, deleted bool) {
	vm, ok := reconcile.Unwrap(obj).(*v1.VirtualMachine)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(vm); ref != nil {
		if ref.Kind != poolv1beta1.VirtualMachinePoolKind || !strings.HasPrefix(ref.APIVersion, poolv1beta1.GroupName+"/") {
			return
		}
		key := vm.Namespace + "/" + ref.Name
		switch {
		case added:
			c.exp.CreationObserved(key)
		case deleted:
			c.exp.DeletionObserved(key, vm.UID)
		}
		c.loop.Queue.Add(key)
		return
	}
	if deleted {
		return
	}
	pools, err := c.poolLister.VirtualMachinePools(vm.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pools {
		if _, ok := IndexOf(p.Name, vm.Name); !ok {
			continue
		}
		if sel, err := controllerref.Selector(p.Spec.Selector); err == nil && sel.Matches(labels.Set(vm.Labels)) {
			c.loop.Queue.Add(p.Namespace + "/" + p.Name)
		}
	}
}

// VMName is the name of the pool's VM with the given index: <pool>-<index>,
// as KubeVirt names them.
func VMName(pool string, index int) string {
	return pool + "-" + strconv.Itoa(index)
}

// IndexOf returns the index of the pool's VM named vm, and false when vm is
// not named <pool>-<index> (a non-negative decimal without leading zeros).
func IndexOf(pool, vm string) (int, bool) {
	rest, ok := strings.CutPrefix(vm, pool+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil
}
