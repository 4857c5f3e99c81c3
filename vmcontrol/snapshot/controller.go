// Package snapshot is KubeVirt's VM snapshot and restore controller
// (snapshot.kubevirt.io/v1beta1): a VirtualMachineSnapshot records a
// VirtualMachine in a VirtualMachineSnapshotContent, and a
// VirtualMachineRestore puts a snapshot back onto a VM (or creates one). It
// also reports in each VM's status.volumeSnapshotStatuses which volumes a
// snapshot can include.
//
// Volumes: KubeVirt snapshots a claim through a CSI VolumeSnapshot of its
// StorageClass's VolumeSnapshotClass. vmkit runs no CSI snapshotter (the
// local cluster's local-path-provisioner has no snapshots, and no CSI driver
// with snapshot support could be built from the registries here: see
// docs/api-compatibility.md), so every volume is excluded, as KubeVirt
// excludes a volume without a VolumeSnapshotClass, with KubeVirt's reasons:
// "No VolumeSnapshotClass: Volume snapshots are not configured for this
// StorageClass [<class>] [<volume>]", "Snapshot is not supported for this
// volumeSource type [<volume>]" and "PVC not found". A snapshot then holds
// the VM's spec, labels and annotations and succeeds with every volume in
// status.snapshotVolumes.excludedVolumes; a restore puts the spec back and
// leaves the claims' data as it is.
//
// The flow is KubeVirt's, with its finalizers, conditions, reasons,
// indications and events: a snapshot locks its VM
// (status.snapshotInProgress and the snapshot-source-protection finalizer)
// while its claims are bound, creates vmsnapshot-content-<snapshot UID>,
// goes InProgress → Succeeded (or Failed past spec.failureDeadline, five
// minutes by default) and unlocks; deleting it deletes its content unless
// deletionPolicy is Retain. A restore waits for its target to be stopped
// (targetReadinessPolicy: WaitGracePeriod by default, WaitEventually,
// StopTarget, FailImmediate), marks the VM (status.restoreInProgress),
// writes the snapshot's spec into it (keeping its run strategy) or creates
// it (halted, with spec.patches applied), and completes.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	snapshotclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/snapshot/v1beta1"
	kvclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/vmapi/v1"
	snapshotv1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// DefaultWorkers is the number of concurrent syncs of each kind:
// snapshots, restores and VMs' volumeSnapshotStatuses.
const DefaultWorkers = 2

// KubeVirt's finalizers and annotations.
const (
	SnapshotFinalizer = "snapshot.kubevirt.io/vmsnapshot-protection"
	ContentFinalizer  = "snapshot.kubevirt.io/vmsnapshotcontent-protection"
	SourceFinalizer   = "snapshot.kubevirt.io/snapshot-source-protection"
	RestoreFinalizer  = "snapshot.kubevirt.io/vmrestore-protection"
	// LastRestoreAnnotation on a restored VM is <restore>-<restore UID>.
	LastRestoreAnnotation = "restore.kubevirt.io/lastRestoreUID"
)

// Event reasons (KubeVirt's).
const (
	ReasonContentCreated    = "SuccessfulVirtualMachineSnapshotContentCreate"
	ReasonRestoreComplete   = "VirtualMachineRestoreComplete"
	ReasonRestoreError      = "VirtualMachineRestoreError"
	ReasonTargetNotReady    = "RestoreTargetNotReady"
	ReasonOperationFailed   = "Operation failed"
	ReasonStoppingTarget    = "Automatically stopping restore target for restore operation"
	ReasonVolumesNotSnapped = "VolumesExcluded"
)

// Config is what the controller needs.
type Config struct {
	// Client reads and writes VirtualMachines (status, finalizers, spec,
	// creation by a restore).
	Client kvclient.VirtualMachinesGetter
	// Snapshots writes snapshots, contents and restores.
	Snapshots snapshotclient.SnapshotV1beta1Interface
	// SnapshotInformer, Contents, Restores, VMs, VMIs and Claims are
	// shared informers the caller starts.
	SnapshotInformer, Contents, Restores, VMs, VMIs, Claims cache.SharedIndexInformer
	// Recorder records events; dropped when nil.
	Recorder record.EventRecorder
	// Workers is the number of concurrent syncs of each kind (default
	// DefaultWorkers).
	Workers int
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Controller is the snapshot and restore controller.
type Controller struct {
	cfg                                              Config
	snapshots, contents, restores, vms, vmis, claims cache.Indexer
	synced                                           []cache.InformerSynced
	snapshotLoop, restoreLoop, vmLoop                *reconcile.Loop
}

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Snapshots == nil || cfg.SnapshotInformer == nil || cfg.Contents == nil || cfg.Restores == nil ||
		cfg.VMs == nil || cfg.VMIs == nil || cfg.Claims == nil {
		return nil, errors.New("snapshot controller: Client, Snapshots and the SnapshotInformer, Contents, Restores, VMs, VMIs and Claims informers are required")
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	c := &Controller{
		cfg: cfg, snapshots: cfg.SnapshotInformer.GetIndexer(), contents: cfg.Contents.GetIndexer(), restores: cfg.Restores.GetIndexer(),
		vms: cfg.VMs.GetIndexer(), vmis: cfg.VMIs.GetIndexer(), claims: cfg.Claims.GetIndexer(),
	}
	for _, inf := range []cache.SharedIndexInformer{cfg.SnapshotInformer, cfg.Contents, cfg.Restores, cfg.VMs, cfg.VMIs, cfg.Claims} {
		c.synced = append(c.synced, inf.HasSynced)
	}
	c.snapshotLoop = &reconcile.Loop{Name: "snapshot", Queue: reconcile.NewQueue("snapshot"), Workers: workers, Sync: c.syncSnapshot, Observe: cfg.Observe}
	c.restoreLoop = &reconcile.Loop{Name: "restore", Queue: reconcile.NewQueue("restore"), Workers: workers, Sync: c.syncRestore, Observe: cfg.Observe}
	c.vmLoop = &reconcile.Loop{Name: "snapshot-vm", Queue: reconcile.NewQueue("snapshot-vm"), Workers: workers, Sync: c.syncVolumeSnapshotStatuses, Observe: cfg.Observe}
	handlers := []struct {
		inf cache.SharedIndexInformer
		fn  func(obj any)
	}{
		{cfg.SnapshotInformer, c.snapshotLoop.Enqueue},
		{cfg.Restores, c.restoreLoop.Enqueue},
		// A content wakes its snapshot.
		{cfg.Contents, func(obj any) {
			if content, ok := reconcile.Unwrap(obj).(*snapshotv1.VirtualMachineSnapshotContent); ok && content.Spec.VirtualMachineSnapshotName != nil {
				c.snapshotLoop.Queue.Add(content.Namespace + "/" + *content.Spec.VirtualMachineSnapshotName)
			}
		}},
		// A VM or its instance wakes its statuses and the snapshots and
		// restores of its namespace (they are few).
		{cfg.VMs, c.vmChanged},
		{cfg.VMIs, c.vmChanged},
		// A claim wakes the VMs of its namespace (volumeSnapshotStatuses
		// says "PVC not found" until it exists).
		{cfg.Claims, func(obj any) {
			if key, ok := reconcile.KeyOf(obj); ok {
				ns, _, _ := cache.SplitMetaNamespaceKey(key)
				c.enqueueNamespace(c.vms, c.vmLoop, ns)
			}
		}},
	}
	for _, h := range handlers {
		fn := h.fn
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: fn, UpdateFunc: func(_, obj any) { fn(obj) }, DeleteFunc: fn,
		}); err != nil {
			return nil, fmt.Errorf("snapshot controller: %w", err)
		}
	}
	return c, nil
}

func (c *Controller) vmChanged(obj any) {
	key, ok := reconcile.KeyOf(obj)
	if !ok {
		return
	}
	if _, isVM := reconcile.Unwrap(obj).(*v1.VirtualMachine); isVM {
		c.vmLoop.Queue.Add(key)
	}
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	c.enqueueNamespace(c.snapshots, c.snapshotLoop, ns)
	c.enqueueNamespace(c.restores, c.restoreLoop, ns)
}

func (c *Controller) enqueueNamespace(idx cache.Indexer, loop *reconcile.Loop, ns string) {
	objs, _ := idx.ByIndex(cache.NamespaceIndex, ns)
	for _, o := range objs {
		if k, err := cache.MetaNamespaceKeyFunc(o); err == nil {
			loop.Queue.Add(k)
		}
	}
}

// Start runs the controller until ctx is done. The informers must be
// started by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	errs := make(chan error, 3)
	for _, l := range []*reconcile.Loop{c.snapshotLoop, c.restoreLoop, c.vmLoop} {
		go func() { errs <- l.Start(ctx, c.synced...) }()
	}
	return errors.Join(<-errs, <-errs, <-errs)
}
