// Package vmi is the VirtualMachineInstance controller: it creates each
// VMI's launcher pod (rendered by a PodRenderer such as podtemplate), derives
// the VMI's phase from the pod (Pending → Scheduling → Scheduled, or Failed
// when the pod fails or disappears), and deletes the pods of final and
// deleted VMIs, holding a finalizer until they are gone.
//
// Given a PersistentVolumeClaim informer (Config.Claims), the controller
// waits for the claims a VMI mounts (persistentVolumeClaim volumes, the claim
// of the same name behind a dataVolume volume, the base of an ephemeral
// volume; hotpluggable volumes excepted) before it creates the launcher pod,
// which would otherwise sit Pending forever. While one is missing the VMI
// stays Pending with the condition Synchronized=False, reason
// FailedPvcNotFound and a message naming the volume and the claim, and gets a
// Warning event with the same reason; creating the claim brings the VMI back
// and the pod is created. As in KubeVirt, a claim that is Pending (waiting
// for its first consumer) or being deleted does not hold the pod back.
//
// Given CDI's DataVolume informer as well (Config.DataVolumes), a dataVolume
// volume also waits for its DataVolume to be usable (Succeeded,
// WaitForFirstConsumer, whose first consumer is the launcher pod, or
// PendingPopulation): until then Synchronized=False with reason
// DataVolumeNotReady, or DataVolumeError when CDI failed it. A DataVolume CDI
// already garbage-collected counts as ready when its claim exists.
//
// From the hand-over (Scheduled) on, status.volumeStatus has an entry per
// volume, and a claim volume's entry the claim's persistentVolumeClaimInfo as
// KubeVirt reports it (capacity, requests, access modes, volume mode,
// preallocated, filesystemOverhead DefaultFilesystemOverhead or "0" for
// Block): the node's launcher sizes the disk.img it creates in an empty
// Filesystem claim from it. It is written in the same update as the phase.
//
// Running, Succeeded and failures of the guest itself are reported by the
// node agent, not here.
package vmi

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	kvclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/vmapi/v1"
	listers "github.com/vmkit/vmkit/vmapi/generated/listers/vmapi/v1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/expectations"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
	"github.com/vmkit/vmkit/vmcontrol/node"
)

// PodRenderer renders the launcher pod of a VMI; *podtemplate.Renderer is one.
type PodRenderer interface {
	RenderLaunchPod(vmi *v1.VirtualMachineInstance) (*corev1.Pod, error)
}

// Config is what the controller needs.
type Config struct {
	// Client writes VMIs (a clientset's KubevirtV1()); Kube creates and
	// deletes pods (a *kubeclient.Client, or a client-go clientset's pods
	// through kubeclient.PodsGetterFunc).
	Client kvclient.KubevirtV1Interface
	Kube   kubeclient.PodsGetter
	// VMIs and Pods are shared informers the caller starts, of
	// VirtualMachineInstances and of Pods. Pods may be filtered to launcher
	// pods (label kubevirt.io=virt-launcher).
	VMIs cache.SharedIndexInformer
	Pods cache.SharedIndexInformer
	// Claims, if set, is a shared PersistentVolumeClaim informer the caller
	// starts (all namespaces, unfiltered). With it the controller creates a
	// launcher pod only once every claim the VMI mounts exists (see the
	// package documentation) and indexes VMIs by claim on the VMI informer,
	// so New must run before that informer starts. Give the same lister to
	// the renderer (podtemplate.Config.ClaimVolumeMode, through
	// ClaimVolumeMode) so Block claims are attached as devices.
	Claims cache.SharedIndexInformer
	// ClaimClient, if set, creates the backend-storage claim of a VMI with
	// persistent state (a persistent TPM or EFI variable store) before its
	// launcher pod, as KubeVirt's virt-controller does: named
	// v1.BackendStorageClaimName, of the KubeVirt CR's vmStateStorageClass
	// (else the cluster's default class), owned by the VMI's VM so that the
	// state outlives the VMI. Without it such a VMI gets no pod and an
	// error condition.
	ClaimClient kubeclient.PersistentVolumeClaimsGetter
	// DataVolumes, if set with Claims, is CDI's DataVolume informer
	// (unstructured, as vm.Config.DataVolumes), started by the caller.
	DataVolumes cache.SharedIndexInformer
	// Nodes, if set, is a shared Node informer the caller starts (it may be
	// slimmed to the kubevirt.io/schedulable label and the
	// kubevirt.io/heartbeat annotation). With it a launcher pod is kept
	// off the nodes whose node agent is unresponsive when the pod is
	// created (node.Unresponsive, after HeartbeatTimeout, default 5m): a
	// required node affinity, metadata.name NotIn those nodes. Only launcher
	// pods are kept off, only when they are scheduled; a kubelet that
	// restarts re-admits its running launcher pods, whose node was
	// responsive when they were made (KubeVirt's schedulable=false label
	// made such a kubelet kill them, KubeVirt's bug #11843).
	Nodes            cache.SharedIndexInformer
	HeartbeatTimeout time.Duration
	// Renderer renders launcher pods.
	Renderer PodRenderer
	// Validate, if set, checks a VMI before its launcher pod is created
	// (vmcontrol.Manager uses domainxml.Validate): a VMI it rejects gets no
	// pod, a Synchronized=False condition with reason InvalidSpec and an
	// event naming the fields, instead of a pod whose launcher fails to
	// convert it.
	Validate func(*v1.VirtualMachineInstance) field.ErrorList
	// KubeVirts, if set, is a shared informer of the KubeVirt CR, started
	// by the caller: its configuration decides some defaults of a VMI
	// created without the VM or replica-set controller
	// (v1.SetClusterDefaults), read when the controller first writes the
	// VMI. Without it, KubeVirt's defaults.
	KubeVirts cache.SharedIndexInformer
	// Recorder records events on VMIs; dropped when nil.
	Recorder record.EventRecorder
	// Workers is the number of concurrent syncs (default 10, as KubeVirt).
	Workers int
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
	// OnPhaseChange, if set, is called when a VMI enters a phase (for the
	// phase-transition-time metric).
	OnPhaseChange func(vmi *v1.VirtualMachineInstance, phase v1.VirtualMachineInstancePhase)
	// OnStartTimeline, if set, is called once per VMI with its start
	// timeline when it first becomes Ready (for metrics).
	OnStartTimeline func(vmi *v1.VirtualMachineInstance, timeline v1.StartTimeline)
}

// Controller is the VirtualMachineInstance controller.
type Controller struct {
	client          kvclient.KubevirtV1Interface
	kube            kubeclient.PodsGetter
	vmiLister       listers.VirtualMachineInstanceLister
	podIndexer      cache.Indexer                           // pods by the UID of the VMI that created them
	claimLister     corelisters.PersistentVolumeClaimLister // nil: claims are not checked
	claimClient     kubeclient.PersistentVolumeClaimsGetter // creates backend-storage claims
	dataVolumes     cache.Indexer                           // nil: DataVolumes are not checked
	nodes           cache.Store                             // nil: no node is avoided
	heartbeat       time.Duration                           // a node's heartbeat timeout
	vmiIndexer      cache.Indexer
	synced          []cache.InformerSynced
	renderer        PodRenderer
	validate        func(*v1.VirtualMachineInstance) field.ErrorList
	kubevirts       cache.Store // the KubeVirt CR; nil without it
	recorder        record.EventRecorder
	exp             *expectations.Expectations
	stale           *reconcile.Superseded
	loop            *reconcile.Loop
	now             func() time.Time
	onPhaseChange   func(*v1.VirtualMachineInstance, v1.VirtualMachineInstancePhase)
	onStartTimeline func(*v1.VirtualMachineInstance, v1.StartTimeline)
}

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Kube == nil || cfg.VMIs == nil || cfg.Pods == nil || cfg.Renderer == nil {
		return nil, errors.New("vmi controller: Client, Kube, VMIs, Pods and Renderer are required")
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = 10
	}
	c := &Controller{
		client:          cfg.Client,
		kube:            cfg.Kube,
		claimClient:     cfg.ClaimClient,
		vmiLister:       listers.NewVirtualMachineInstanceLister(cfg.VMIs.GetIndexer()),
		podIndexer:      cfg.Pods.GetIndexer(),
		vmiIndexer:      cfg.VMIs.GetIndexer(),
		synced:          []cache.InformerSynced{cfg.VMIs.HasSynced, cfg.Pods.HasSynced},
		renderer:        cfg.Renderer,
		validate:        cfg.Validate,
		recorder:        cfg.Recorder,
		exp:             expectations.New(0),
		stale:           reconcile.NewSuperseded(),
		now:             time.Now,
		onPhaseChange:   cfg.OnPhaseChange,
		onStartTimeline: cfg.OnStartTimeline,
		heartbeat:       cfg.HeartbeatTimeout,
	}
	if c.heartbeat <= 0 {
		c.heartbeat = node.DefaultHeartbeatTimeout
	}
	if cfg.Nodes != nil {
		c.nodes = cfg.Nodes.GetStore()
		c.synced = append(c.synced, cfg.Nodes.HasSynced)
	}
	// A sync looks its VMI's pods up by UID: listing the namespace and
	// matching labels costs O(pods in the namespace) per sync.
	if err := podindex.Add(cfg.Pods); err != nil {
		return nil, fmt.Errorf("vmi controller: %w", err)
	}
	c.loop = &reconcile.Loop{
		Name:    "virtualmachineinstance",
		Queue:   reconcile.NewQueue("virtualmachineinstance"),
		Workers: workers,
		Sync:    c.sync,
		Observe: cfg.Observe,
	}
	if _, err := cfg.VMIs.AddEventHandler(c.loop.Handler()); err != nil {
		return nil, fmt.Errorf("vmi controller: %w", err)
	}
	if cfg.DataVolumes != nil && cfg.Claims == nil {
		return nil, errors.New("vmi controller: DataVolumes need Claims")
	}
	if cfg.KubeVirts != nil {
		c.kubevirts = cfg.KubeVirts.GetStore()
		c.synced = append(c.synced, cfg.KubeVirts.HasSynced)
	}
	if cfg.Claims != nil {
		if err := c.watchClaims(cfg); err != nil {
			return nil, fmt.Errorf("vmi controller: %w", err)
		}
	}
	if _, err := cfg.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if key, ok := vmiKeyOf(obj); ok {
				c.exp.CreationObserved(key)
				c.loop.Queue.Add(key)
			}
		},
		UpdateFunc: func(_, obj any) {
			if key, ok := vmiKeyOf(obj); ok {
				c.loop.Queue.Add(key)
			}
		},
		DeleteFunc: func(obj any) {
			if key, ok := vmiKeyOf(obj); ok {
				if pod, ok := reconcile.Unwrap(obj).(*corev1.Pod); ok {
					c.exp.DeletionObserved(key, pod.UID)
				}
				c.loop.Queue.Add(key)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("vmi controller: %w", err)
	}
	return c, nil
}

// Start runs the controller until ctx is done. The informers must be started
// by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	return c.loop.Start(ctx, c.synced...)
}

// watchClaims indexes VMIs by the claims they need and enqueues them when a
// claim is added or updated.
func (c *Controller) watchClaims(cfg Config) error {
	if err := cfg.VMIs.AddIndexers(cache.Indexers{claimIndex: indexByClaim}); err != nil {
		return err
	}
	c.claimLister = corelisters.NewPersistentVolumeClaimLister(cfg.Claims.GetIndexer())
	c.synced = append(c.synced, cfg.Claims.HasSynced)
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueClaimUsers,
		UpdateFunc: func(_, obj any) { c.enqueueClaimUsers(obj) },
	}
	if _, err := cfg.Claims.AddEventHandler(handler); err != nil {
		return err
	}
	if cfg.DataVolumes == nil {
		return nil
	}
	// A DataVolume's claim has its name: the claim index finds its users.
	c.dataVolumes = cfg.DataVolumes.GetIndexer()
	c.synced = append(c.synced, cfg.DataVolumes.HasSynced)
	_, err := cfg.DataVolumes.AddEventHandler(handler)
	return err
}

// vmiKeyOf returns the key of the VMI controlling a launcher pod.
func vmiKeyOf(obj any) (string, bool) {
	pod, ok := reconcile.Unwrap(obj).(*corev1.Pod)
	if !ok {
		return "", false
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != v1.VirtualMachineInstanceGroupVersionKind.Kind {
		return "", false
	}
	return pod.Namespace + "/" + ref.Name, true
}
