// Package disruptionbudget is KubeVirt's disruption-budget controller: every
// VMI that should move rather than die when its node is drained gets a
// PodDisruptionBudget protecting its launcher pod(s), so `kubectl drain`
// (and anything else using the eviction API) never evicts it.
//
// A VMI wants a budget while it is neither final nor being deleted and its
// eviction strategy (its own spec.evictionStrategy, else the KubeVirt CR's
// spec.configuration.evictionStrategy) is LiveMigrate, or
// LiveMigrateIfPossible and its LiveMigratable condition is True (KubeVirt's
// VMIMigratableOnEviction). The budget is KubeVirt's:
//
//   - named kubevirt-disruption-budget-<random> (generateName), in the VMI's
//     namespace, controlled by the VMI (owner reference with controller and
//     blockOwnerDeletion, so garbage collection removes it with the VMI);
//   - selector kubevirt.io/created-by=<VMI UID>, the label of every launcher
//     pod of the VMI, the migration target's included;
//   - minAvailable 1; raised to 2 and labelled
//     kubevirt.io/migrationName=<migration> while a migration of the VMI is
//     unfinished (from Pending on, so it is in place before the target pod
//     exists: with source and target running, no eviction is allowed), and
//     lowered back to 1 with the label removed once that migration is final
//     and at most one launcher pod of the VMI is left (KubeVirt's migration
//     controller expanded it, its disruption-budget controller shrank it;
//     here one controller does both).
//
// A budget is deleted when the VMI is gone, final, being deleted or no longer
// wants one, when it belongs to an earlier VMI of the same name (its
// controller UID differs), and when it duplicates another budget of the VMI
// (the oldest is kept). Every write is one create, merge patch or delete of a
// budget that differs from what it should be; expectations keep a sync on a
// stale cache from creating or deleting twice.
//
// Current KubeVirt no longer creates these budgets (it deletes the ones it
// made and relies on its eviction webhook, which vmkit's virt-api also
// serves); vmkit keeps them so a cluster whose webhook is down (it fails open)
// still cannot evict a VMI that should migrate.
package disruptionbudget

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/expectations"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
	"github.com/vmkit/vmkit/vmcontrol/migration"
)

// DefaultWorkers is the number of concurrent syncs (KubeVirt's
// --disruption-budget-controller-threads default).
const DefaultWorkers = 3

// GenerateName prefixes the name of every budget (KubeVirt's).
const GenerateName = "kubevirt-disruption-budget-"

// MigrationNameLabel on a budget names the migration it protects while
// raised to two pods (KubeVirt's kubevirt.io/migrationName).
const MigrationNameLabel = "kubevirt.io/migrationName"

// Event reasons (KubeVirt's).
const (
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonFailedDelete     = "FailedDelete"
	ReasonSuccessfulUpdate = "SuccessfulUpdate"
	ReasonFailedUpdate     = "FailedUpdate"
)

// Config is what the controller needs.
type Config struct {
	// Client creates, patches and deletes budgets. kubeclient.Client
	// satisfies it, and so does a client-go clientset through
	// kubeclient.PodDisruptionBudgetsGetterFunc.
	Client kubeclient.PodDisruptionBudgetsGetter
	// VMIs, Budgets (policy/v1 PodDisruptionBudgets), Pods (launcher pods)
	// and Migrations are shared informers the caller starts; KubeVirts
	// (optional) gives the cluster-wide eviction strategy. New adds
	// indexes, so it must run before they start.
	VMIs, Budgets, Pods, Migrations cache.SharedIndexInformer
	KubeVirts                       cache.SharedIndexInformer
	// Recorder records events on VMIs; dropped when nil.
	Recorder record.EventRecorder
	// Workers is the number of concurrent syncs (default DefaultWorkers).
	Workers int
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
}

// Controller is the disruption-budget controller. Its keys are VMI keys
// (namespace/name).
type Controller struct {
	client     kubeclient.PodDisruptionBudgetsGetter
	vmis       cache.Store
	budgets    cache.Indexer
	pods       cache.Indexer
	migrations cache.Indexer
	kubevirts  cache.Store
	synced     []cache.InformerSynced
	recorder   record.EventRecorder
	exp        *expectations.Expectations
	loop       *reconcile.Loop
}

// byVMIIndex indexes budgets by namespace/name of the VMI controlling them.
const byVMIIndex = "vmkit.io/disruptionbudget-vmi"

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.VMIs == nil || cfg.Budgets == nil || cfg.Pods == nil || cfg.Migrations == nil {
		return nil, errors.New("disruption budget controller: Client, VMIs, Budgets, Pods and Migrations are required")
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	c := &Controller{
		client:     cfg.Client,
		vmis:       cfg.VMIs.GetStore(),
		budgets:    cfg.Budgets.GetIndexer(),
		pods:       cfg.Pods.GetIndexer(),
		migrations: cfg.Migrations.GetIndexer(),
		synced:     []cache.InformerSynced{cfg.VMIs.HasSynced, cfg.Budgets.HasSynced, cfg.Pods.HasSynced, cfg.Migrations.HasSynced},
		recorder:   cfg.Recorder,
		exp:        expectations.New(0),
	}
	if cfg.KubeVirts != nil {
		c.kubevirts = cfg.KubeVirts.GetStore()
		c.synced = append(c.synced, cfg.KubeVirts.HasSynced)
	}
	if _, ok := cfg.Budgets.GetIndexer().GetIndexers()[byVMIIndex]; !ok {
		if err := cfg.Budgets.AddIndexers(cache.Indexers{byVMIIndex: func(obj any) ([]string, error) {
			if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
				if key, ok := ownerKey(pdb); ok {
					return []string{key}, nil
				}
			}
			return nil, nil
		}}); err != nil {
			return nil, fmt.Errorf("disruption budget controller: %w", err)
		}
	}
	if err := podindex.Add(cfg.Pods); err != nil {
		return nil, fmt.Errorf("disruption budget controller: %w", err)
	}
	if err := migration.AddMigrationIndex(cfg.Migrations); err != nil {
		return nil, fmt.Errorf("disruption budget controller: %w", err)
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	c.loop = &reconcile.Loop{Name: "disruptionbudget", Queue: reconcile.NewQueue("disruptionbudget"), Workers: workers, Sync: c.sync, Observe: cfg.Observe}
	if _, err := cfg.VMIs.AddEventHandler(c.loop.Handler()); err != nil {
		return nil, fmt.Errorf("disruption budget controller: %w", err)
	}
	if _, err := cfg.Budgets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			pdb, ok := obj.(*policyv1.PodDisruptionBudget)
			if !ok {
				return
			}
			if key, ok := ownerKey(pdb); ok {
				if pdb.DeletionTimestamp != nil {
					c.exp.DeletionObserved(key, pdb.UID)
				} else {
					c.exp.CreationObserved(key)
				}
				c.loop.Queue.Add(key)
			}
		},
		UpdateFunc: func(old, cur any) {
			for _, obj := range []any{old, cur} {
				if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
					if key, ok := ownerKey(pdb); ok {
						if pdb.DeletionTimestamp != nil {
							c.exp.DeletionObserved(key, pdb.UID)
						}
						c.loop.Queue.Add(key)
					}
				}
			}
		},
		DeleteFunc: func(obj any) {
			if pdb, ok := reconcile.Unwrap(obj).(*policyv1.PodDisruptionBudget); ok {
				if key, ok := ownerKey(pdb); ok {
					c.exp.DeletionObserved(key, pdb.UID)
					c.loop.Queue.Add(key)
				}
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("disruption budget controller: %w", err)
	}
	// A pod's comings and goings decide when a budget goes back to one.
	pod := func(obj any) {
		if p, ok := reconcile.Unwrap(obj).(*corev1.Pod); ok {
			if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == v1.VirtualMachineInstanceGroupVersionKind.Kind {
				c.loop.Queue.Add(p.Namespace + "/" + ref.Name)
			}
		}
	}
	if _, err := cfg.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: pod, UpdateFunc: func(_, obj any) { pod(obj) }, DeleteFunc: pod,
	}); err != nil {
		return nil, fmt.Errorf("disruption budget controller: %w", err)
	}
	mig := func(obj any) {
		if m, ok := reconcile.Unwrap(obj).(*v1.VirtualMachineInstanceMigration); ok && m.Spec.VMIName != "" {
			c.loop.Queue.Add(m.Namespace + "/" + m.Spec.VMIName)
		}
	}
	if _, err := cfg.Migrations.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: mig, UpdateFunc: func(_, obj any) { mig(obj) }, DeleteFunc: mig,
	}); err != nil {
		return nil, fmt.Errorf("disruption budget controller: %w", err)
	}
	if cfg.KubeVirts != nil {
		// The cluster-wide eviction strategy changed: look at every VMI.
		all := func(any) {
			for _, key := range c.vmis.ListKeys() {
				c.loop.Queue.Add(key)
			}
		}
		if _, err := cfg.KubeVirts.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: all, DeleteFunc: all,
			UpdateFunc: func(old, cur any) {
				o, ok1 := old.(*v1.KubeVirt)
				n, ok2 := cur.(*v1.KubeVirt)
				if !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Spec.Configuration.EvictionStrategy, n.Spec.Configuration.EvictionStrategy) {
					all(cur)
				}
			},
		}); err != nil {
			return nil, fmt.Errorf("disruption budget controller: %w", err)
		}
	}
	return c, nil
}

// Start runs the controller until ctx is done. The informers must be
// started by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	return c.loop.Start(ctx, c.synced...)
}

// ownerKey is the namespace/name of the VMI controlling the budget.
func ownerKey(pdb *policyv1.PodDisruptionBudget) (string, bool) {
	ref := metav1.GetControllerOf(pdb)
	if ref == nil || ref.Kind != v1.VirtualMachineInstanceGroupVersionKind.Kind || ref.APIVersion != v1.SchemeGroupVersion.String() {
		return "", false
	}
	return pdb.Namespace + "/" + ref.Name, true
}
