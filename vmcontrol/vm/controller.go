// Package vm is the VirtualMachine controller: it starts and stops each VM's
// VirtualMachineInstance according to the VM's run strategy and start/stop
// requests, backs off when instances keep failing before they ever run, and
// reports what is happening in the VM's status.
//
// It watches VirtualMachines and VirtualMachineInstances, and CDI's
// DataVolumes where CDI is installed. A VMI whose controller is a VM enqueues
// that VM; an orphan VMI enqueues the VM of the same name, which adopts it. A
// VM's spec.dataVolumeTemplates become DataVolumes it controls, and the VM
// starts once they are populated (printable status Provisioning until then,
// DataVolumeError if CDI fails).
//
// A VM naming an instance type or preference (spec.instancetype,
// spec.preference, instancetype.kubevirt.io) gets them expanded into its
// instances as KubeVirt does (see vmapi/instancetype). The first sync pins
// the copies it uses in ControllerRevisions the VM owns and records them in
// status.instancetypeRef and status.preferenceRef; later edits of the
// instance type change neither the running instance nor the next one until
// the VM names another instance type or revision, or its status reference
// is removed. A template that sets what the instance type sets, a
// preference's unmet requirements, or a missing instance type give the VM
// a Failure condition and a warning event, and no instance.
package vm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	kvclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/vmapi/v1"
	instancetypelisters "github.com/vmkit/vmkit/vmapi/generated/listers/instancetype/v1beta1"
	listers "github.com/vmkit/vmkit/vmapi/generated/listers/vmapi/v1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/expectations"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// Config is what the controller needs.
type Config struct {
	// Client writes VMs and VMIs (a clientset's KubevirtV1()).
	Client kvclient.KubevirtV1Interface
	// VMs and VMIs are shared informers of VirtualMachines and
	// VirtualMachineInstances; the caller starts them.
	VMs  cache.SharedIndexInformer
	VMIs cache.SharedIndexInformer
	// DataVolumes is an informer on CDI's DataVolumes (DataVolumeResource,
	// as unstructured objects), started by the caller; Dynamic creates
	// them. With both, the controller creates each VM's
	// spec.dataVolumeTemplates and starts the VM once they are ready.
	// Leave them nil where CDI is not installed: a VM with
	// dataVolumeTemplates then reports a Failure condition and does not
	// start.
	DataVolumes cache.SharedIndexInformer
	Dynamic     dynamic.Interface
	// Instancetypes, ClusterInstancetypes, Preferences and
	// ClusterPreferences are shared informers of instancetype.kubevirt.io's
	// four kinds, Revisions one of the ControllerRevisions labelled
	// RevisionSelector, and RevisionClient creates ControllerRevisions;
	// the caller starts the informers. Set all or none: without them, a VM
	// naming an instance type or preference gets a Failure condition and
	// does not start.
	Instancetypes, ClusterInstancetypes, Preferences, ClusterPreferences cache.SharedIndexInformer
	Revisions                                                            cache.SharedIndexInformer
	RevisionClient                                                       kubeclient.ControllerRevisionsGetter
	// StartRevisions is a shared informer of the ControllerRevisions
	// labelled StartRevisionLabel, started by the caller, and
	// StartRevisionClient creates and deletes them. With both, every start
	// records the VM's spec in a ControllerRevision the VM owns
	// (StartRevisionName, KubeVirt's revision-start-vm-<uid>-<generation>,
	// named in the instance's status.virtualMachineRevisionName), the
	// revisions of earlier starts are deleted, and a VM whose spec changed
	// since its running instance started gets KubeVirt's RestartRequired
	// condition. Without them, neither.
	StartRevisions      cache.SharedIndexInformer
	StartRevisionClient kubeclient.ControllerRevisionsGetter
	// Claims is a shared informer of PersistentVolumeClaims, read to infer
	// an instance type or preference from a volume's labels
	// (inferFromVolume), for WaitingForVolumeBinding and for
	// status.volumeSnapshotStatuses. Optional.
	Claims cache.SharedIndexInformer
	// ClaimClient, with Claims, annotates the claim of a memory dump with
	// the dump's file (v1.PVCMemoryDumpAnnotation), as KubeVirt does, once
	// the dump is written (or failed). Optional.
	ClaimClient kubeclient.PersistentVolumeClaimsGetter
	// KubeVirts, if set, is a shared informer of the KubeVirt CR, started
	// by the caller. Its spec.configuration's cpuModel, machine types,
	// memoryOvercommit and network.defaultNetworkInterface decide those
	// defaults of the instances the controller creates
	// (v1.SetClusterDefaults), read at each start: a change applies to the
	// next VM started, without a restart. Without it, KubeVirt's defaults.
	KubeVirts cache.SharedIndexInformer
	// Recorder records events on VMs; events are dropped when nil.
	Recorder record.EventRecorder
	// Workers is the number of concurrent syncs (default 3, as KubeVirt).
	Workers int
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
}

// Controller is the VirtualMachine controller.
type Controller struct {
	client    kvclient.KubevirtV1Interface
	vmLister  listers.VirtualMachineLister
	vmiLister listers.VirtualMachineInstanceLister
	synced    []cache.InformerSynced
	recorder  record.EventRecorder
	// dataVolumes is the DataVolume cache (nil without CDI); dynamic creates them.
	dataVolumes cache.Indexer
	dynamic     dynamic.Interface
	// it reads instance types, preferences and revisions (nil without
	// them); claims (nil without them) are read to infer them.
	it          *instancetypes
	claims      corelisters.PersistentVolumeClaimLister
	claimClient kubeclient.PersistentVolumeClaimsGetter
	// starts keeps the start revisions (nil without them).
	starts *startRevisions
	// kubevirts holds the KubeVirt CR (nil without it).
	kubevirts cache.Store
	exp       *expectations.Expectations
	stale     *reconcile.Superseded
	loop      *reconcile.Loop
	now       func() time.Time
	jitter    func() float64
}

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.VMs == nil || cfg.VMIs == nil {
		return nil, errors.New("vm controller: Client, VMs and VMIs are required")
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if (cfg.DataVolumes == nil) != (cfg.Dynamic == nil) {
		return nil, errors.New("vm controller: DataVolumes and Dynamic go together")
	}
	c := &Controller{
		client:    cfg.Client,
		vmLister:  listers.NewVirtualMachineLister(cfg.VMs.GetIndexer()),
		vmiLister: listers.NewVirtualMachineInstanceLister(cfg.VMIs.GetIndexer()),
		synced:    []cache.InformerSynced{cfg.VMs.HasSynced, cfg.VMIs.HasSynced},
		recorder:  cfg.Recorder,
		exp:       expectations.New(0),
		stale:     reconcile.NewSuperseded(),
		now:       time.Now,
		jitter:    rand.Float64,
	}
	c.loop = &reconcile.Loop{
		Name:    "virtualmachine",
		Queue:   reconcile.NewQueue("virtualmachine"),
		Workers: cmpOr(cfg.Workers, 3),
		Sync:    c.sync,
		Observe: cfg.Observe,
	}
	if _, err := cfg.VMs.AddEventHandler(c.loop.Handler()); err != nil {
		return nil, fmt.Errorf("vm controller: %w", err)
	}
	if _, err := cfg.VMIs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.vmiAdded,
		UpdateFunc: func(_, obj any) { c.enqueueOwner(obj) },
		DeleteFunc: c.vmiDeleted,
	}); err != nil {
		return nil, fmt.Errorf("vm controller: %w", err)
	}
	its := []cache.SharedIndexInformer{cfg.Instancetypes, cfg.ClusterInstancetypes, cfg.Preferences, cfg.ClusterPreferences, cfg.Revisions}
	switch set := countSet(its); {
	case set == len(its) && cfg.RevisionClient != nil:
		c.it = &instancetypes{
			instancetypes:        instancetypelisters.NewVirtualMachineInstancetypeLister(cfg.Instancetypes.GetIndexer()),
			clusterInstancetypes: instancetypelisters.NewVirtualMachineClusterInstancetypeLister(cfg.ClusterInstancetypes.GetIndexer()),
			preferences:          instancetypelisters.NewVirtualMachinePreferenceLister(cfg.Preferences.GetIndexer()),
			clusterPreferences:   instancetypelisters.NewVirtualMachineClusterPreferenceLister(cfg.ClusterPreferences.GetIndexer()),
			revisions:            appslisters.NewControllerRevisionLister(cfg.Revisions.GetIndexer()),
			revisionClient:       cfg.RevisionClient,
		}
		for _, inf := range its {
			c.synced = append(c.synced, inf.HasSynced)
		}
		if err := c.addInstancetypeHandlers(cfg); err != nil {
			return nil, fmt.Errorf("vm controller: %w", err)
		}
	case set != 0 || cfg.RevisionClient != nil:
		return nil, errors.New("vm controller: Instancetypes, ClusterInstancetypes, Preferences, ClusterPreferences, Revisions and RevisionClient go together")
	}
	switch {
	case cfg.StartRevisions != nil && cfg.StartRevisionClient != nil:
		starts, err := newStartRevisions(cfg.StartRevisions, cfg.StartRevisionClient)
		if err != nil {
			return nil, err
		}
		c.starts = starts
		c.synced = append(c.synced, cfg.StartRevisions.HasSynced)
	case cfg.StartRevisions != nil || cfg.StartRevisionClient != nil:
		return nil, errors.New("vm controller: StartRevisions and StartRevisionClient go together")
	}
	if cfg.KubeVirts != nil {
		c.kubevirts = cfg.KubeVirts.GetStore()
		c.synced = append(c.synced, cfg.KubeVirts.HasSynced)
	}
	if cfg.Claims != nil {
		c.claims, c.claimClient = corelisters.NewPersistentVolumeClaimLister(cfg.Claims.GetIndexer()), cfg.ClaimClient
		c.synced = append(c.synced, cfg.Claims.HasSynced)
	}
	if cfg.DataVolumes != nil {
		c.dataVolumes = cfg.DataVolumes.GetIndexer()
		c.dynamic = cfg.Dynamic
		c.synced = append(c.synced, cfg.DataVolumes.HasSynced)
		if _, err := cfg.DataVolumes.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueDataVolumeOwner,
			UpdateFunc: func(_, obj any) { c.enqueueDataVolumeOwner(obj) },
			DeleteFunc: c.enqueueDataVolumeOwner,
		}); err != nil {
			return nil, fmt.Errorf("vm controller: %w", err)
		}
	}
	return c, nil
}

// enqueueDataVolumeOwner enqueues the VM that controls a DataVolume.
func (c *Controller) enqueueDataVolumeOwner(obj any) {
	dv, ok := reconcile.Unwrap(obj).(metav1.Object)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(dv); ref != nil && ref.Kind == v1.VirtualMachineGroupVersionKind.Kind {
		c.loop.Queue.Add(dv.GetNamespace() + "/" + ref.Name)
	}
}

// Start runs the controller until ctx is done. The informers must be started
// by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	return c.loop.Start(ctx, c.synced...)
}

// ownerKey returns the key of the VM that owns (or may adopt) a VMI: the VM
// named in its controller reference, or the VM of the same name.
func ownerKey(vmi *v1.VirtualMachineInstance) (string, bool) {
	if ref := metav1.GetControllerOf(vmi); ref != nil {
		if ref.Kind != v1.VirtualMachineGroupVersionKind.Kind {
			return "", false
		}
		return vmi.Namespace + "/" + ref.Name, true
	}
	return vmi.Namespace + "/" + vmi.Name, true
}

func (c *Controller) enqueueOwner(obj any) {
	vmi, ok := reconcile.Unwrap(obj).(*v1.VirtualMachineInstance)
	if !ok {
		return
	}
	if key, ok := ownerKey(vmi); ok {
		c.loop.Queue.Add(key)
	}
}

func (c *Controller) vmiAdded(obj any) {
	vmi, ok := obj.(*v1.VirtualMachineInstance)
	if !ok {
		return
	}
	if key, ok := ownerKey(vmi); ok {
		if metav1.GetControllerOf(vmi) != nil {
			c.exp.CreationObserved(key)
		}
		c.loop.Queue.Add(key)
	}
}

func (c *Controller) vmiDeleted(obj any) {
	vmi, ok := reconcile.Unwrap(obj).(*v1.VirtualMachineInstance)
	if !ok {
		return
	}
	if key, ok := ownerKey(vmi); ok {
		c.exp.DeletionObserved(key, vmi.UID)
		c.loop.Queue.Add(key)
	}
}

func countSet(infs []cache.SharedIndexInformer) int {
	n := 0
	for _, inf := range infs {
		if inf != nil {
			n++
		}
	}
	return n
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
