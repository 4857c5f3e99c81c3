// Package export is KubeVirt's VirtualMachineExport controller: an export of
// a stopped VirtualMachine or of a PersistentVolumeClaim gets an export
// server pod (the exportserver package, in the virt-exportserver image)
// that mounts the claims read-only, a Service virt-export-<name> in front of
// it (443 to 8443), a download token and a serving certificate, and status
// links as KubeVirt reports them, so KubeVirt's `virtctl vmexport download`
// works unchanged.
//
// What the controller creates, all owned by the export (garbage collection
// removes them with it):
//
//   - the token Secret export-token-<name> (key "token", 128 random
//     bits as 26 characters), unless spec.tokenSecretRef names one;
//   - the Service virt-export-<name>;
//   - the Secret virt-export-tls-<name>: a certificate for the Service's
//     names and 127.0.0.1 (so a client of a port-forward can verify it),
//     signed by the export CA (Issuer), valid until the export expires;
//   - for a VM, the ConfigMap exporter-vm-manifest-<name> from which the
//     server serves the VM's manifests (/internal/manifests/all) and the
//     token header Secret CDI's importer takes (/internal/manifests/secret);
//   - the pod virt-export-<name>, which runs as the launcher's user (107),
//     so it reads the disk.img the launcher created, and stops by itself
//     when the export expires.
//
// Phases and conditions are KubeVirt's: Pending (Ready False with reason
// Initializing, PodPending, InUse, VMNotFound, PVCNotFound,
// VMSnapshotNotFound), Ready (Ready True, reason PodReady, and the internal
// links), Terminated (the server stopped: PodCompleted) and Skipped (a VM
// without claims: VMNoVolumes). PVCReady says whether the claims are bound.
// A source in use (a VM that runs, a claim a running VMI uses) is not
// exported: the server pod is deleted until the source is free again. At
// status.ttlExpirationTime (creation + spec.ttlDuration, two hours by
// default) the export is deleted.
//
// Differences from KubeVirt: no external links (KubeVirt's come from an
// Ingress or an OpenShift Route named for the export proxy, which vmkit does
// not run); a VirtualMachineSnapshot source is Skipped (VMSnapshotNoVolumes),
// as vmkit's snapshots hold no volume; claims are disk images when a VM uses them as
// disks, when they are Block, or when CDI's content-type annotation says
// kubevirt, and archives (tar.gz, dir) otherwise.
package export

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	exportv1 "github.com/vmkit/vmkit/vmapi/export/v1beta1"
	exportclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/export/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// DefaultWorkers is the number of concurrent syncs (KubeVirt's
// --export-controller-threads default is 3).
const DefaultWorkers = 3

// Event reasons.
const (
	ReasonPodCreated     = "ExporterPodCreated"
	ReasonPodDeleted     = "ExporterPodDeleted"
	ReasonServiceCreated = "ExportServiceCreated"
	ReasonExpired        = "ExportExpired"
)

// Kube is the part of the Kubernetes API the controller writes to.
// *kubeclient.Client satisfies it.
type Kube interface {
	Pods(namespace string) kubeclient.PodInterface
	Services(namespace string) kubeclient.ServiceInterface
	Secrets(namespace string) kubeclient.SecretInterface
	ConfigMaps(namespace string) kubeclient.ConfigMapInterface
}

// Config is what the controller needs.
type Config struct {
	// Exports writes exports (status, and deletion at expiry).
	Exports exportclient.VirtualMachineExportsGetter
	// Kube creates and deletes the server pods, Services, Secrets and
	// ConfigMaps.
	Kube Kube
	// Issuer signs the servers' certificates.
	Issuer Issuer
	// Image is the export server's image (vmkit/virt-exportserver).
	Image string
	// ImagePullPolicy of the server pod (default IfNotPresent).
	ImagePullPolicy corev1.PullPolicy
	// ExportInformer, Pods (export server pods: the label
	// kubevirt.io=virt-exporter), Claims, VMs and VMIs are shared
	// informers the caller starts; Snapshots (VirtualMachineSnapshots) is
	// optional: without it snapshot sources are not found.
	ExportInformer, Pods, Claims, VMs, VMIs, Snapshots cache.SharedIndexInformer
	// Recorder records events on exports; dropped when nil.
	Recorder record.EventRecorder
	// Workers is the number of concurrent syncs (default DefaultWorkers).
	Workers int
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Controller is the export controller. Its keys are export keys.
type Controller struct {
	cfg     Config
	exports cache.Indexer
	pods    cache.Store
	claims  cache.Store
	vms     cache.Store
	vmis    cache.Indexer
	// snapshots is nil without Config.Snapshots.
	snapshots cache.Store
	synced    []cache.InformerSynced
	loop      *reconcile.Loop
}

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Exports == nil || cfg.Kube == nil || cfg.Issuer == nil || cfg.Image == "" ||
		cfg.ExportInformer == nil || cfg.Pods == nil || cfg.Claims == nil || cfg.VMs == nil || cfg.VMIs == nil {
		return nil, errors.New("export controller: Exports, Kube, Issuer, Image and the ExportInformer, Pods, Claims, VMs and VMIs informers are required")
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ImagePullPolicy == "" {
		cfg.ImagePullPolicy = corev1.PullIfNotPresent
	}
	c := &Controller{
		cfg:     cfg,
		exports: cfg.ExportInformer.GetIndexer(),
		pods:    cfg.Pods.GetStore(),
		claims:  cfg.Claims.GetStore(),
		vms:     cfg.VMs.GetStore(),
		vmis:    cfg.VMIs.GetIndexer(),
		synced: []cache.InformerSynced{cfg.ExportInformer.HasSynced, cfg.Pods.HasSynced, cfg.Claims.HasSynced,
			cfg.VMs.HasSynced, cfg.VMIs.HasSynced},
	}
	if cfg.Snapshots != nil {
		c.snapshots = cfg.Snapshots.GetStore()
		c.synced = append(c.synced, cfg.Snapshots.HasSynced)
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	c.loop = &reconcile.Loop{Name: "export", Queue: reconcile.NewQueue("export"), Workers: workers, Sync: c.sync, Observe: cfg.Observe}
	if _, err := cfg.ExportInformer.AddEventHandler(c.loop.Handler()); err != nil {
		return nil, fmt.Errorf("export controller: %w", err)
	}
	// A server pod wakes its export.
	pod := func(obj any) {
		if p, ok := reconcile.Unwrap(obj).(*corev1.Pod); ok {
			for _, ref := range p.OwnerReferences {
				if ref.Kind == exportv1.VirtualMachineExportKind && ref.Controller != nil && *ref.Controller {
					c.loop.Queue.Add(p.Namespace + "/" + ref.Name)
				}
			}
		}
	}
	if _, err := cfg.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: pod, UpdateFunc: func(_, obj any) { pod(obj) }, DeleteFunc: pod,
	}); err != nil {
		return nil, fmt.Errorf("export controller: %w", err)
	}
	// Claims, VMs and VMIs decide whether a source is ready or in use:
	// they wake the exports of their namespace (exports are few).
	namespace := func(obj any) {
		key, ok := reconcile.KeyOf(obj)
		if !ok {
			return
		}
		ns, _, _ := cache.SplitMetaNamespaceKey(key)
		exports, _ := c.exports.ByIndex(cache.NamespaceIndex, ns)
		for _, e := range exports {
			if k, err := cache.MetaNamespaceKeyFunc(e); err == nil {
				c.loop.Queue.Add(k)
			}
		}
	}
	wake := []cache.SharedIndexInformer{cfg.Claims, cfg.VMs, cfg.VMIs}
	if cfg.Snapshots != nil {
		wake = append(wake, cfg.Snapshots)
	}
	for _, inf := range wake {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: namespace, UpdateFunc: func(_, obj any) { namespace(obj) }, DeleteFunc: namespace,
		}); err != nil {
			return nil, fmt.Errorf("export controller: %w", err)
		}
	}
	return c, nil
}

// Start runs the controller until ctx is done. The informers must be
// started by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	return c.loop.Start(ctx, c.synced...)
}

// PodSelector selects export server pods: the Pods informer's label
// selector.
const PodSelector = v1.AppLabel + "=" + exportv1.App

// newToken is 26 random characters (128 bits, crypto/rand's Text).
func newToken() string { return rand.Text() }
