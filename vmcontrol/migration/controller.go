// Package migration is KubeVirt's migration controller: it drives each
// VirtualMachineInstanceMigration through Pending → Scheduling → Scheduled
// → PreparingTarget → TargetReady → Running → Succeeded or Failed, creating
// the target launcher pod and handing the migration to the node agents
// through the VMI's status.migrationState, and it keeps every running VMI's
// LiveMigratable condition.
//
// The contract with the node agents is KubeVirt's (docs/migration.md has
// it field by field):
//   - the controller creates the target pod (podtemplate's
//     RenderMigrationTargetPod: the launch pod labelled
//     kubevirt.io/migrationJobUID, kept off the source node) once the
//     KubeVirt CR's limits allow (parallelMigrationsPerCluster,
//     parallelOutboundMigrationsPerNode) and the VMI runs with one active
//     pod;
//   - when the target pod is ready it hands off: status.migrationState gets
//     migrationUid, sourceNode, sourcePod, targetNode, targetPod and the
//     resolved migrationConfiguration (bandwidth, timeouts), and the VMI the
//     label kubevirt.io/migrationTargetNodeName; the target agent prepares
//     and writes targetNodeAddress (→ TargetReady), the source agent starts
//     and writes startTimestamp (→ Running), then completed (→ Succeeded)
//     or failed (→ Failed); the target agent moves status.nodeName;
//   - deleting the migration cancels it: before the handoff the target pod
//     is deleted and the migration fails; after it, the controller sets
//     status.migrationState.abortRequested and the source agent aborts and
//     reports failed. The finalizer kubevirt.io/migrationJobFinalize keeps
//     the object until the migration is final.
//
// Differences from KubeVirt: the finalizer and the kubevirt.io/vmi-name
// label are added by the controller (KubeVirt's mutating webhook adds the
// finalizer); LiveMigratable and status.migrationMethod are computed here
// from the spec and the claims (KubeVirt's node agent computes them); a
// migration of a VMI whose LiveMigratable condition is False fails here
// with KubeVirt's admission message (KubeVirt's webhook refuses it); a
// failed migration's target pod is deleted at once (KubeVirt leaves it to
// the launcher's exit and garbage collection); migration policies,
// hotplug attachment pods, backend storage, decentralized migrations and
// priorities are not implemented.
package migration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	kvclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/vmapi/v1"
	kvlisters "github.com/vmkit/vmkit/vmapi/generated/listers/vmapi/v1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/expectations"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// DefaultWorkers is the number of concurrent migration syncs (KubeVirt's
// migration controller threads).
const DefaultWorkers = 3

// KubeVirt's timeouts of a target pod that stays Pending.
const (
	DefaultUnschedulableTimeout = 5 * time.Minute
	DefaultPendingTimeout       = 15 * time.Minute
)

// KeepFinalized is how many final migrations of a VMI are kept; older ones
// are deleted (KubeVirt's garbage collection buffer).
const KeepFinalized = 5

// TargetRenderer renders a migration's target launcher pod;
// *podtemplate.Renderer satisfies it.
type TargetRenderer interface {
	RenderMigrationTargetPod(vmi *v1.VirtualMachineInstance, migration *v1.VirtualMachineInstanceMigration) (*corev1.Pod, error)
}

// Config is what the controller needs.
type Config struct {
	// Client writes migrations and VMIs.
	Client kvclient.KubevirtV1Interface
	// Kube creates and deletes target pods.
	Kube kubeclient.PodsGetter
	// Renderer renders target pods.
	Renderer TargetRenderer
	// Migrations, VMIs, Pods and Claims are shared informers the caller
	// starts. Pods may be filtered to launcher pods. New adds indexes, so
	// it must run before they start.
	Migrations, VMIs, Pods, Claims cache.SharedIndexInformer
	// KubeVirts, if set, is an informer of the KubeVirt CR, whose
	// spec.configuration.migrations sets the limits; KubeVirt's defaults
	// apply without it.
	KubeVirts cache.SharedIndexInformer
	// UnschedulableTimeout and PendingTimeout bound how long a target pod
	// may stay unschedulable or pending before it is deleted and the
	// migration fails (defaults DefaultUnschedulableTimeout and
	// DefaultPendingTimeout; the migration's annotations
	// kubevirt.io/migrationUnschedulablePodTimeoutSeconds and
	// kubevirt.io/migrationPendingPodTimeoutSeconds override them).
	UnschedulableTimeout, PendingTimeout time.Duration
	// Recorder records events; dropped when nil.
	Recorder record.EventRecorder
	// Workers is the number of concurrent syncs (default DefaultWorkers).
	Workers int
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
}

// Controller is the migration controller.
type Controller struct {
	client                 kvclient.KubevirtV1Interface
	kube                   kubeclient.PodsGetter
	renderer               TargetRenderer
	migrations             kvlisters.VirtualMachineInstanceMigrationLister
	migrationIndexer       cache.Indexer
	vmis                   kvlisters.VirtualMachineInstanceLister
	podIndexer             cache.Indexer
	claims                 corelisters.PersistentVolumeClaimLister
	kubevirts              cache.Store
	synced                 []cache.InformerSynced
	recorder               record.EventRecorder
	exp                    *expectations.Expectations
	unschedulable, pending time.Duration
	now                    func() time.Time

	// startMu serializes target pod creation, so the parallel limits are
	// counted and applied atomically.
	startMu sync.Mutex
	// handedOff holds the keys of migrations whose handoff patch was sent
	// but may not be in the VMI cache yet (KubeVirt's hand-off map).
	handedOff sync.Map

	loop    *reconcile.Loop // migrations
	vmiLoop *reconcile.Loop // the VMIs' LiveMigratable condition
}

// Annotations of a migration that override the target pod timeouts
// (KubeVirt's), in seconds.
const (
	UnschedulableTimeoutAnnotation = "kubevirt.io/migrationUnschedulablePodTimeoutSeconds"
	PendingTimeoutAnnotation       = "kubevirt.io/migrationPendingPodTimeoutSeconds"
)

// byVMIIndex indexes migrations by namespace/vmiName.
const byVMIIndex = "vmkit.io/migration-by-vmi"

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Kube == nil || cfg.Renderer == nil || cfg.Migrations == nil || cfg.VMIs == nil || cfg.Pods == nil || cfg.Claims == nil {
		return nil, errors.New("migration controller: Client, Kube, Renderer, Migrations, VMIs, Pods and Claims are required")
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	c := &Controller{
		client:           cfg.Client,
		kube:             cfg.Kube,
		renderer:         cfg.Renderer,
		migrations:       kvlisters.NewVirtualMachineInstanceMigrationLister(cfg.Migrations.GetIndexer()),
		migrationIndexer: cfg.Migrations.GetIndexer(),
		vmis:             kvlisters.NewVirtualMachineInstanceLister(cfg.VMIs.GetIndexer()),
		podIndexer:       cfg.Pods.GetIndexer(),
		claims:           corelisters.NewPersistentVolumeClaimLister(cfg.Claims.GetIndexer()),
		synced:           []cache.InformerSynced{cfg.Migrations.HasSynced, cfg.VMIs.HasSynced, cfg.Pods.HasSynced, cfg.Claims.HasSynced},
		recorder:         cfg.Recorder,
		exp:              expectations.New(0),
		unschedulable:    orDuration(cfg.UnschedulableTimeout, DefaultUnschedulableTimeout),
		pending:          orDuration(cfg.PendingTimeout, DefaultPendingTimeout),
		now:              time.Now,
	}
	if cfg.KubeVirts != nil {
		c.kubevirts = cfg.KubeVirts.GetStore()
		c.synced = append(c.synced, cfg.KubeVirts.HasSynced)
	}
	if err := AddMigrationIndex(cfg.Migrations); err != nil {
		return nil, fmt.Errorf("migration controller: %w", err)
	}
	if err := podindex.Add(cfg.Pods); err != nil {
		return nil, fmt.Errorf("migration controller: %w", err)
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	c.loop = &reconcile.Loop{Name: "migration", Queue: reconcile.NewQueue("migration"), Workers: workers, Sync: c.sync, Observe: cfg.Observe}
	c.vmiLoop = &reconcile.Loop{Name: "migration-livemigratable", Queue: reconcile.NewQueue("migration-livemigratable"), Workers: workers, Sync: c.syncMigratable, Observe: cfg.Observe}

	if _, err := cfg.Migrations.AddEventHandler(c.loop.Handler()); err != nil {
		return nil, fmt.Errorf("migration controller: %w", err)
	}
	if _, err := cfg.VMIs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.vmiChanged,
		UpdateFunc: func(_, obj any) { c.vmiChanged(obj) },
		DeleteFunc: c.vmiChanged,
	}); err != nil {
		return nil, fmt.Errorf("migration controller: %w", err)
	}
	if _, err := cfg.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(obj, false) },
		UpdateFunc: func(_, obj any) { c.podChanged(obj, false) },
		DeleteFunc: func(obj any) { c.podChanged(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("migration controller: %w", err)
	}
	// A claim that appears or changes its access modes changes whether
	// the VMIs using it can migrate.
	if _, err := cfg.Claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, obj any) { c.claimChanged(obj) },
	}); err != nil {
		return nil, fmt.Errorf("migration controller: %w", err)
	}
	return c, nil
}

// AddMigrationIndex indexes a migration informer by the VMI each migration
// names (namespace/vmiName), unless it already is; MigrationsOf reads it.
func AddMigrationIndex(migrations cache.SharedIndexInformer) error {
	if _, ok := migrations.GetIndexer().GetIndexers()[byVMIIndex]; ok {
		return nil
	}
	return migrations.AddIndexers(cache.Indexers{byVMIIndex: func(obj any) ([]string, error) {
		if m, ok := obj.(*v1.VirtualMachineInstanceMigration); ok {
			return []string{m.Namespace + "/" + m.Spec.VMIName}, nil
		}
		return nil, nil
	}})
}

// MigrationsOf returns the migrations naming the VMI, from an indexer
// AddMigrationIndex indexed.
func MigrationsOf(indexer cache.Indexer, namespace, vmiName string) ([]*v1.VirtualMachineInstanceMigration, error) {
	objs, err := indexer.ByIndex(byVMIIndex, namespace+"/"+vmiName)
	if err != nil {
		return nil, err
	}
	out := make([]*v1.VirtualMachineInstanceMigration, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*v1.VirtualMachineInstanceMigration); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// Start runs the controller until ctx is done. The informers must be
// started by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	errs := make(chan error, 1)
	go func() { errs <- c.vmiLoop.Start(ctx, c.synced...) }()
	err := c.loop.Start(ctx, c.synced...)
	return errors.Join(err, <-errs)
}

// vmiChanged enqueues the VMI (its LiveMigratable condition) and its
// migrations.
func (c *Controller) vmiChanged(obj any) {
	vmi, ok := reconcile.Unwrap(obj).(*v1.VirtualMachineInstance)
	if !ok {
		return
	}
	c.vmiLoop.Enqueue(vmi)
	c.enqueueMigrationsOf(vmi.Namespace, vmi.Name)
}

func (c *Controller) enqueueMigrationsOf(namespace, vmiName string) {
	ms, _ := MigrationsOf(c.migrationIndexer, namespace, vmiName)
	for _, m := range ms {
		c.loop.Enqueue(m)
	}
}

// podChanged brings back the migration a target pod belongs to, and
// observes its creation or deletion.
func (c *Controller) podChanged(obj any, deleted bool) {
	pod, ok := reconcile.Unwrap(obj).(*corev1.Pod)
	if !ok {
		return
	}
	uid, name := pod.Labels[v1.MigrationJobLabel], pod.Annotations[migrationJobNameAnnotation]
	if uid == "" || name == "" {
		return
	}
	m, err := c.migrations.VirtualMachineInstanceMigrations(pod.Namespace).Get(name)
	if err != nil || string(m.UID) != uid {
		return
	}
	key := pod.Namespace + "/" + name
	switch {
	case deleted || pod.DeletionTimestamp != nil:
		c.exp.DeletionObserved(key, pod.UID)
	default:
		c.exp.CreationObserved(key)
	}
	c.loop.Queue.Add(key)
}

// claimChanged enqueues the VMIs of the claim's namespace using it.
func (c *Controller) claimChanged(obj any) {
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	vmis, err := c.vmis.VirtualMachineInstances(claim.Namespace).List(everything)
	if err != nil {
		return
	}
	for _, vmi := range vmis {
		for _, vol := range vmi.Spec.Volumes {
			if (vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ClaimName == claim.Name) ||
				(vol.DataVolume != nil && vol.DataVolume.Name == claim.Name) {
				c.vmiLoop.Enqueue(vmi)
				break
			}
		}
	}
}

// migrationJobNameAnnotation on a target pod holds the migration's name
// (KubeVirt's kubevirt.io/migrationJobName; podtemplate sets it).
const migrationJobNameAnnotation = "kubevirt.io/migrationJobName"

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
