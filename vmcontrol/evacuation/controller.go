// Package evacuation is KubeVirt's evacuation controller: it creates a
// VirtualMachineInstanceMigration for every VMI that must leave its node.
// A VMI must leave when
//   - its node carries the taint kubevirt.io/drain:NoSchedule (KubeVirt's
//     deprecated drain signal), or
//   - its status.evacuationNodeName names the node it still runs on: an
//     eviction of its launcher pod (kubectl drain) was refused and turned
//     into this request (KubeVirt's pod-eviction webhook sets it; the
//     target node agent clears it once the guest runs elsewhere);
//
// and it wants to and can migrate: its eviction strategy (its own, else the
// KubeVirt CR's) is LiveMigrate, or LiveMigrateIfPossible and it is
// LiveMigratable, its LiveMigratable condition is True, it is neither final
// nor being deleted, no unfinished migration names it and it has one
// active pod. The migrations are named kubevirt-evacuation-<random> and
// annotated kubevirt.io/evacuationMigration=<node>, as KubeVirt's; the
// migration controller (vmcontrol/migration) applies the parallel limits.
//
// Differences from KubeVirt: no back-off between repeated failed evacuation
// migrations of a VMI (KubeVirt's migration controller waits 20 s, doubling)
// and no priority field.
package evacuation

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
	"github.com/vmkit/vmkit/vmcontrol/internal/expectations"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/migration"
)

// DefaultWorkers is the number of concurrent syncs (KubeVirt's).
const DefaultWorkers = 3

// DrainTaintKey is the taint (effect NoSchedule) that evacuates a node
// (KubeVirt's default nodeDrainTaintKey).
const DrainTaintKey = "kubevirt.io/drain"

// MigrationAnnotation on a migration the controller created holds the node
// it evacuates (KubeVirt's kubevirt.io/evacuationMigration).
const MigrationAnnotation = "kubevirt.io/evacuationMigration"

// Event reasons (KubeVirt's).
const (
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
)

// Config is what the controller needs.
type Config struct {
	// Client creates migrations.
	Client kvclient.KubevirtV1Interface
	// Nodes, VMIs and Migrations are shared informers the caller starts;
	// KubeVirts (optional) gives the cluster-wide eviction strategy. New
	// adds indexes, so it must run before they start.
	Nodes, VMIs, Migrations cache.SharedIndexInformer
	KubeVirts               cache.SharedIndexInformer
	// Recorder records events on VMIs; dropped when nil.
	Recorder record.EventRecorder
	// Workers is the number of concurrent syncs (default DefaultWorkers).
	Workers int
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
}

// Controller is the evacuation controller.
type Controller struct {
	client     kvclient.KubevirtV1Interface
	nodes      corelisters.NodeLister
	vmiIndexer cache.Indexer
	migrations cache.Indexer
	kubevirts  cache.Store
	synced     []cache.InformerSynced
	recorder   record.EventRecorder
	exp        *expectations.Expectations
	loop       *reconcile.Loop
}

const vmisByNodeIndex = "vmkit.io/evacuation-status.nodeName"

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Nodes == nil || cfg.VMIs == nil || cfg.Migrations == nil {
		return nil, errors.New("evacuation controller: Client, Nodes, VMIs and Migrations are required")
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	c := &Controller{
		client:     cfg.Client,
		nodes:      corelisters.NewNodeLister(cfg.Nodes.GetIndexer()),
		vmiIndexer: cfg.VMIs.GetIndexer(),
		migrations: cfg.Migrations.GetIndexer(),
		synced:     []cache.InformerSynced{cfg.Nodes.HasSynced, cfg.VMIs.HasSynced, cfg.Migrations.HasSynced},
		recorder:   cfg.Recorder,
		exp:        expectations.New(0),
	}
	if cfg.KubeVirts != nil {
		c.kubevirts = cfg.KubeVirts.GetStore()
		c.synced = append(c.synced, cfg.KubeVirts.HasSynced)
	}
	if _, ok := cfg.VMIs.GetIndexer().GetIndexers()[vmisByNodeIndex]; !ok {
		if err := cfg.VMIs.AddIndexers(cache.Indexers{vmisByNodeIndex: func(obj any) ([]string, error) {
			if vmi, ok := obj.(*v1.VirtualMachineInstance); ok && vmi.Status.NodeName != "" {
				return []string{vmi.Status.NodeName}, nil
			}
			return nil, nil
		}}); err != nil {
			return nil, fmt.Errorf("evacuation controller: %w", err)
		}
	}
	if err := migration.AddMigrationIndex(cfg.Migrations); err != nil {
		return nil, fmt.Errorf("evacuation controller: %w", err)
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	c.loop = &reconcile.Loop{Name: "evacuation", Queue: reconcile.NewQueue("evacuation"), Workers: workers, Sync: c.sync, Observe: cfg.Observe}
	if _, err := cfg.Nodes.AddEventHandler(c.loop.Handler()); err != nil {
		return nil, fmt.Errorf("evacuation controller: %w", err)
	}
	vmiNode := func(obj any) {
		if vmi, ok := reconcile.Unwrap(obj).(*v1.VirtualMachineInstance); ok && vmi.Status.NodeName != "" {
			c.loop.Queue.Add(vmi.Status.NodeName)
		}
	}
	if _, err := cfg.VMIs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: vmiNode, UpdateFunc: func(_, obj any) { vmiNode(obj) }, DeleteFunc: vmiNode,
	}); err != nil {
		return nil, fmt.Errorf("evacuation controller: %w", err)
	}
	migrationNode := func(obj any, added bool) {
		m, ok := reconcile.Unwrap(obj).(*v1.VirtualMachineInstanceMigration)
		if !ok {
			return
		}
		if node, ok := m.Annotations[MigrationAnnotation]; ok && added {
			c.exp.CreationObserved(node)
		}
		if o, ok, _ := c.vmiIndexer.GetByKey(m.Namespace + "/" + m.Spec.VMIName); ok {
			vmiNode(o)
		}
	}
	if _, err := cfg.Migrations.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { migrationNode(obj, true) },
		UpdateFunc: func(_, obj any) { migrationNode(obj, false) },
		DeleteFunc: func(obj any) { migrationNode(obj, false) },
	}); err != nil {
		return nil, fmt.Errorf("evacuation controller: %w", err)
	}
	return c, nil
}

// Start runs the controller until ctx is done. The informers must be
// started by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	return c.loop.Start(ctx, c.synced...)
}

// Drained reports whether the node carries the drain taint.
func Drained(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == DrainTaintKey && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}
