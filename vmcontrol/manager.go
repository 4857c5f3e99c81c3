// Package vmcontrol runs vmkit's controllers (the VirtualMachine,
// VirtualMachineInstance, VirtualMachineInstanceReplicaSet, node,
// VirtualMachinePool, migration, evacuation, disruption-budget,
// VirtualMachineExport and snapshot/restore controllers
// of virt-controller)
// together: one set of
// shared informers, worker counts per controller, client rate limits, leader
// election on a coordination.k8s.io Lease, Prometheus metrics on /metrics,
// and /healthz and /readyz. It reaches the API server through the typed
// kubevirt.io client and vmcontrol/kubeclient only, so a binary built on it
// does not link every Kubernetes API group.
//
// Each controller (vmcontrol/vm, vmcontrol/vmi, vmcontrol/replicaset,
// vmcontrol/node, vmcontrol/pool, vmcontrol/migration, vmcontrol/evacuation,
// vmcontrol/disruptionbudget)
// is also usable alone: it has
// a constructor taking informers and satisfies Start(ctx) error, so it can be
// added to a controller-runtime manager as a Runnable.
package vmcontrol

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/domainxml"
	"github.com/vmkit/vmkit/internal/leaderelect"
	"github.com/vmkit/vmkit/podtemplate"
	exportv1beta1 "github.com/vmkit/vmkit/vmapi/export/v1beta1"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/scheme"
	exportclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/export/v1beta1"
	instancetypeclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/instancetype/v1beta1"
	poolclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/pool/v1beta1"
	snapshotclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/snapshot/v1beta1"
	kvclient "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/typed/vmapi/v1"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	poolv1beta1 "github.com/vmkit/vmkit/vmapi/pool/v1beta1"
	snapshotv1beta1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/disruptionbudget"
	"github.com/vmkit/vmkit/vmcontrol/evacuation"
	"github.com/vmkit/vmkit/vmcontrol/export"
	"github.com/vmkit/vmkit/vmcontrol/internal/podindex"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
	"github.com/vmkit/vmkit/vmcontrol/migration"
	"github.com/vmkit/vmkit/vmcontrol/node"
	"github.com/vmkit/vmkit/vmcontrol/pool"
	"github.com/vmkit/vmkit/vmcontrol/replicaset"
	"github.com/vmkit/vmkit/vmcontrol/snapshot"
	"github.com/vmkit/vmkit/vmcontrol/vm"
	"github.com/vmkit/vmkit/vmcontrol/vmi"
)

// Options configure a Manager. Zero values take the defaults noted.
type Options struct {
	// Config reaches the API server. QPS and Burst are overridden below.
	Config *rest.Config
	// QPS and Burst of the controllers' clients (default 200 and 400).
	QPS   float32
	Burst int
	// PodTemplate configures the launcher pods: the Manager builds the
	// podtemplate.Renderer from it, with ClaimVolumeMode read from the
	// Manager's PersistentVolumeClaim informer so Block claims are attached
	// as devices (a ClaimVolumeMode set here is replaced). Set PodTemplate
	// or Renderer, not both.
	PodTemplate *podtemplate.Config
	// Renderer renders launcher pods, for renderers the caller builds. The
	// Manager cannot wire a *podtemplate.Renderer given here to its claim
	// informer: claims are then mounted as filesystems unless the renderer
	// looks their mode up itself. Missing claims hold pods back either way.
	Renderer vmi.PodRenderer
	// VMWorkers (default 3), VMIWorkers (default 10), ReplicaSetWorkers
	// (default 3), NodeWorkers (default 3), PoolWorkers (default 3),
	// MigrationWorkers (default 3), EvacuationWorkers (default 3) and
	// DisruptionBudgetWorkers (default 3), ExportWorkers (default 3) and
	// SnapshotWorkers (default 2 for each of snapshots, restores and VMs).
	VMWorkers, VMIWorkers, ReplicaSetWorkers, NodeWorkers, PoolWorkers, MigrationWorkers, EvacuationWorkers, DisruptionBudgetWorkers, ExportWorkers, SnapshotWorkers int
	// Export configures the VirtualMachineExport controller, which runs
	// when Export.Image is set and export.kubevirt.io is served.
	Export ExportOptions
	// NodeHeartbeatTimeout is how old a node agent's heartbeat may get
	// before the node controller marks its node unschedulable and fails the
	// VMIs stranded there (default 5m, as KubeVirt).
	NodeHeartbeatTimeout time.Duration
	// ResyncPeriod of the informers (default 12h; 0 keeps the default).
	ResyncPeriod time.Duration
	// LeaderElection, when enabled, runs the controllers only while this
	// process holds the Lease.
	LeaderElection LeaderElection
	// HTTPAddr serves /metrics, /healthz and /readyz ("" disables it).
	HTTPAddr string
	// HTTPTLS, when set, serves HTTPAddr over TLS with this configuration.
	HTTPTLS *tls.Config
	// HTTPGuard, when set, wraps /metrics and /debug/pprof/, but not
	// /healthz and /readyz, which the kubelet's probes read without
	// credentials. /metrics lists every VMI's namespace, name, node and
	// pod: cmd/virt-controller serves it over TLS (a self-signed
	// certificate) behind the API server's authentication and
	// authorization (internal/delegatedauth), as kube-controller-manager
	// serves its own.
	HTTPGuard func(http.Handler) http.Handler
	// Profiling adds Go's profiles (/debug/pprof/) to the HTTP server.
	Profiling bool
	// DiscoveryInterval is how often the Manager checks whether the API
	// server started or stopped serving CDI's DataVolumes,
	// instancetype.kubevirt.io, pool.kubevirt.io, export.kubevirt.io or snapshot.kubevirt.io; when it did, the controllers restart (in
	// this process) to watch them or stop (default 1m; negative: checked
	// only when the controllers start).
	DiscoveryInterval time.Duration
}

// ExportOptions configure the VirtualMachineExport controller.
type ExportOptions struct {
	// Image of the export server (vmkit/virt-exportserver); "" leaves
	// exports alone.
	Image string
	// ImagePullPolicy of the export server pods (default IfNotPresent).
	ImagePullPolicy corev1.PullPolicy
	// CANamespace and CASecret name the export CA's kubernetes.io/tls
	// Secret (default: the leader election namespace, kubevirt-export-ca).
	CANamespace, CASecret string
}

// LeaderElection configures the Lease the controllers hold.
type LeaderElection struct {
	Enabled bool
	// Namespace and Name of the Lease (default kubevirt / virt-controller).
	Namespace, Name string
	// Identity of this process (default hostname + random suffix).
	Identity string
	// LeaseDuration, RenewDeadline, RetryPeriod (default 15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Manager runs the controllers.
type Manager struct {
	opts          Options
	client        kvclient.KubevirtV1Interface
	instancetypes instancetypeclient.InstancetypeV1beta1Interface
	pools         poolclient.PoolV1beta1Interface
	exports       exportclient.ExportV1beta1Interface
	snapshots     snapshotclient.SnapshotV1beta1Interface
	kube          *kubeclient.Client
	dynamic       dynamic.Interface
	elector       *leaderelect.Elector // nil without leader election
	metrics       *metrics
	ready         atomic.Bool
	leading       atomic.Bool
	listener      net.Listener
}

// NewManager checks the options and builds the clients.
func NewManager(opts Options) (*Manager, error) {
	if opts.Config == nil || (opts.Renderer == nil) == (opts.PodTemplate == nil) {
		return nil, errors.New("vmcontrol: Options.Config and one of Options.PodTemplate and Options.Renderer are required")
	}
	if opts.PodTemplate != nil {
		// Check the configuration now; runControllers builds the renderer
		// it uses once the claim informer exists.
		if _, err := podtemplate.New(*opts.PodTemplate); err != nil {
			return nil, fmt.Errorf("vmcontrol: %w", err)
		}
	}
	cfg := rest.CopyConfig(opts.Config)
	cfg.QPS, cfg.Burst = 200, 400
	if opts.QPS > 0 {
		cfg.QPS = opts.QPS
	}
	if opts.Burst > 0 {
		cfg.Burst = opts.Burst
	}
	cfg.UserAgent = "vmkit-virt-controller"
	// The controllers use kubevirt.io's typed client and kubeclient for pods,
	// claims, events and leases, never client-go's clientset: that one links
	// every Kubernetes API group into the binary (see kubeclient). Pods,
	// claims, events and leases speak protobuf; custom resources have no
	// protobuf encoding and stay JSON.
	client, err := kvclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmcontrol: %w", err)
	}
	instancetypes, err := instancetypeclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmcontrol: %w", err)
	}
	pools, err := poolclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmcontrol: %w", err)
	}
	kube, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmcontrol: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmcontrol: %w", err)
	}
	le := &opts.LeaderElection
	le.Namespace = orDefault(le.Namespace, "kubevirt")
	le.Name = orDefault(le.Name, "virt-controller")
	if le.Identity == "" {
		host, _ := os.Hostname()
		le.Identity = fmt.Sprintf("%s_%d", host, time.Now().UnixNano())
	}
	le.LeaseDuration = orDuration(le.LeaseDuration, 15*time.Second)
	le.RenewDeadline = orDuration(le.RenewDeadline, 10*time.Second)
	le.RetryPeriod = orDuration(le.RetryPeriod, 2*time.Second)
	opts.ResyncPeriod = orDuration(opts.ResyncPeriod, 12*time.Hour)
	if opts.DiscoveryInterval == 0 {
		opts.DiscoveryInterval = time.Minute
	}
	opts.Export.CANamespace = orDefault(opts.Export.CANamespace, le.Namespace)
	opts.Export.CASecret = orDefault(opts.Export.CASecret, "kubevirt-export-ca")
	exports, err := exportclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmcontrol: %w", err)
	}
	snapshots, err := snapshotclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmcontrol: %w", err)
	}
	m := &Manager{opts: opts, client: client, instancetypes: instancetypes, pools: pools, exports: exports, snapshots: snapshots, kube: kube, dynamic: dyn}
	m.metrics = newMetrics(m.ready.Load)
	if le.Enabled {
		m.elector, err = leaderelect.New(leaderelect.Config{
			Leases: kube.Leases(le.Namespace), Name: le.Name, Identity: le.Identity,
			LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		})
		if err != nil {
			return nil, fmt.Errorf("vmcontrol: Options.LeaderElection: %w", err)
		}
	}
	if opts.HTTPAddr != "" {
		if m.listener, err = net.Listen("tcp", opts.HTTPAddr); err != nil {
			return nil, fmt.Errorf("vmcontrol: listening on %s: %w", opts.HTTPAddr, err)
		}
	}
	return m, nil
}

// Registry returns the registry of the Manager's metrics, which it serves
// on /metrics: KubeVirt's virt-controller metrics (kubevirt_vmi_info,
// kubevirt_vmi_phase_count, kubevirt_vmi_phase_transition_time_from_creation_seconds,
// kubevirt_virt_controller_leading_status and _ready_status) and vmkit's
// own (vmkit_controller_*, workqueue_*, Go and process metrics).
func (m *Manager) Registry() *prometheus.Registry { return m.metrics.registry }

// HTTPAddr is the address /metrics is served on, once NewManager returned.
func (m *Manager) HTTPAddr() string {
	if m.listener == nil {
		return ""
	}
	return m.listener.Addr().String()
}

// Leading reports whether this manager runs the controllers now.
func (m *Manager) Leading() bool { return m.leading.Load() }

// Run serves HTTP and runs the controllers (under leader election if
// enabled) until ctx is done or leadership is lost, which returns an error
// so the process restarts as a candidate.
func (m *Manager) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if m.listener != nil {
		srv := &http.Server{Handler: m.handler(), ReadHeaderTimeout: 5 * time.Second, TLSConfig: m.opts.HTTPTLS}
		go func() {
			if srv.TLSConfig != nil {
				_ = srv.ServeTLS(m.listener, "", "")
				return
			}
			_ = srv.Serve(m.listener)
		}()
		defer func() { _ = srv.Close() }()
	}
	if !m.opts.LeaderElection.Enabled {
		return m.runControllers(ctx)
	}
	m.ready.Store(true) // a standby is healthy and ready
	runErr := make(chan error, 1)
	err := m.elector.Run(ctx, func(leaderCtx context.Context) {
		err := m.runControllers(leaderCtx)
		runErr <- err
		if err != nil {
			cancel() // a controller failed: give up the lease
		}
	})
	select {
	case err := <-runErr:
		if err != nil {
			return err
		}
	default:
	}
	if err != nil {
		return fmt.Errorf("vmcontrol: %w", err) // the lease was lost
	}
	return nil
}

// errAPIsChanged ends a run of the controllers whose view of the served
// APIs (CDI's DataVolumes, instancetype.kubevirt.io, pool.kubevirt.io) is
// out of date.
var errAPIsChanged = errors.New("vmcontrol: the served APIs changed")

// runControllers runs the controllers until ctx ends, starting them again
// when the API server starts or stops serving CDI's DataVolumes,
// instancetype.kubevirt.io, pool.kubevirt.io, export.kubevirt.io or snapshot.kubevirt.io.
func (m *Manager) runControllers(ctx context.Context) error {
	for {
		err := m.runControllersOnce(ctx)
		if !errors.Is(err, errAPIsChanged) {
			return err
		}
		klog.FromContext(ctx).Info("CDI DataVolumes, instancetype.kubevirt.io, pool.kubevirt.io, export.kubevirt.io or snapshot.kubevirt.io appeared or went away: restarting the controllers")
	}
}

// runControllersOnce builds informers and controllers and runs them until
// ctx ends or the served APIs change (errAPIsChanged).
func (m *Manager) runControllersOnce(ctx context.Context) error {
	// Everything this run starts stops with ctx: the informers too, so a
	// restart does not wait for the parent context.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	log := klog.FromContext(ctx)
	m.leading.Store(true)
	m.metrics.leading.Set(1)
	defer func() { m.leading.Store(false); m.metrics.leading.Set(0) }()

	inf, err := m.newInformers()
	if err != nil {
		return err
	}
	renderer := m.opts.Renderer
	if m.opts.PodTemplate != nil {
		cfg := *m.opts.PodTemplate
		cfg.ClaimVolumeMode = vmi.ClaimVolumeMode(corelisters.NewPersistentVolumeClaimLister(inf.claims.GetIndexer()))
		r, err := podtemplate.New(cfg)
		if err != nil {
			return fmt.Errorf("vmcontrol: %w", err)
		}
		renderer = r
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(kubeclient.EventSink(m.kube.Events))
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "virt-controller"})

	// CDI's DataVolumes, instance types and pools are watched when the API
	// server serves them; a change is noticed by watchServedAPIs, which
	// restarts this run.
	served, err := m.servedAPIs(ctx)
	if err != nil {
		return err
	}
	controllers, err := m.newControllers(ctx, inf, served, renderer, recorder)
	if err != nil {
		return err
	}

	// The informers stop with ctx, which the run cancels, and waits for,
	// before it returns.
	var informers sync.WaitGroup
	defer func() { stop(nil); informers.Wait() }()
	synced := make([]cache.InformerSynced, 0, len(inf.started))
	for _, i := range inf.started {
		informers.Add(1)
		go func() {
			defer informers.Done()
			i.RunWithContext(ctx)
		}()
		synced = append(synced, i.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // ctx ended before the caches synced: a shutdown, not a failure
	}
	m.ready.Store(true)
	// kubevirt_vmi_info and kubevirt_vmi_phase_count read the caches
	// while the controllers run.
	m.metrics.vmis.watch(inf.vmis.GetStore(), inf.pods.GetIndexer())
	defer m.metrics.vmis.watch(nil, nil)
	log.Info("controllers running")
	if m.opts.DiscoveryInterval > 0 {
		go m.watchServedAPIs(ctx, served, stop)
	}
	errs := make(chan error, len(controllers))
	for _, c := range controllers {
		go func() { errs <- c.Start(ctx) }()
	}
	var all []error
	for range controllers {
		all = append(all, <-errs)
	}
	err = errors.Join(all...)
	if cause := context.Cause(ctx); errors.Is(cause, errAPIsChanged) {
		return cause
	}
	return err
}

// runInformers are the shared informers of one run; started lists every
// informer the run starts (those below and those a controller adds).
type runInformers struct {
	vms, vmis, replicaSets, pods, claims, nodes, migrations, kubevirts, budgets cache.SharedIndexInformer
	started                                                                     []cache.SharedIndexInformer
	// snapshots (VirtualMachineSnapshots) is shared by the export and
	// snapshot controllers when snapshot.kubevirt.io is served: see
	// snapshotInformer.
	snapshots cache.SharedIndexInformer
}

// snapshotInformer is the run's VirtualMachineSnapshot informer, made (and
// started) on first use.
func (m *Manager) snapshotInformer(inf *runInformers) cache.SharedIndexInformer {
	if inf.snapshots == nil {
		inf.snapshots = newInformer(m.snapshots.VirtualMachineSnapshots(""), &snapshotv1beta1.VirtualMachineSnapshot{}, m.opts.ResyncPeriod, stripManagedFields, nil)
		inf.started = append(inf.started, inf.snapshots)
	}
	return inf.snapshots
}

// newInformers builds the informers every run has. Cached objects drop
// managedFields, which the controllers never read and which are a large
// part of each object, and more where a slim function says so.
func (m *Manager) newInformers() (*runInformers, error) {
	resync := m.opts.ResyncPeriod
	i := &runInformers{
		vms:         newInformer(m.client.VirtualMachines(""), &v1.VirtualMachine{}, resync, slimVM, nil),
		vmis:        newInformer(m.client.VirtualMachineInstances(""), &v1.VirtualMachineInstance{}, resync, stripManagedFields, nil),
		replicaSets: newInformer(m.client.VirtualMachineInstanceReplicaSets(""), &v1.VirtualMachineInstanceReplicaSet{}, resync, stripManagedFields, nil),
		pods: newInformer(m.kube.Pods(""), &corev1.Pod{}, resync, slimPod, func(o *metav1.ListOptions) {
			o.LabelSelector = v1.AppLabel + "=" + v1.VirtLauncherValue
		}),
		// Claims are not launcher pods: their informer is unfiltered.
		claims:     newInformer(m.kube.PersistentVolumeClaims(""), &corev1.PersistentVolumeClaim{}, resync, slimClaim, nil),
		nodes:      newInformer(m.kube.Nodes(), &corev1.Node{}, resync, slimNode, nil),
		migrations: newInformer(m.client.VirtualMachineInstanceMigrations(""), &v1.VirtualMachineInstanceMigration{}, resync, stripManagedFields, nil),
		kubevirts:  newInformer(m.client.KubeVirts(""), &v1.KubeVirt{}, resync, stripManagedFields, nil),
		// Every budget: the controller finds its own by their owner reference.
		budgets: newInformer(m.kube.PodDisruptionBudgets(""), &policyv1.PodDisruptionBudget{}, resync, stripManagedFields, nil),
	}
	if err := podindex.Add(i.pods); err != nil { // kubevirt_vmi_info's vmi_pod
		return nil, fmt.Errorf("vmcontrol: %w", err)
	}
	i.started = []cache.SharedIndexInformer{i.vms, i.vmis, i.replicaSets, i.pods, i.claims, i.nodes, i.migrations, i.kubevirts, i.budgets}
	return i, nil
}

// starter is a controller: it runs until ctx ends.
type starter interface{ Start(context.Context) error }

// newControllers builds the run's controllers, one entry of the table each;
// an entry whose build returns a nil controller is off in this cluster
// (its API not served, or no renderer of migration targets), as it logs.
func (m *Manager) newControllers(ctx context.Context, inf *runInformers, served servedAPIs, renderer vmi.PodRenderer, recorder record.EventRecorder) ([]starter, error) {
	log := klog.FromContext(ctx)
	resync := m.opts.ResyncPeriod
	var vmConfig vm.Config // DataVolumes, shared with the VMI controller
	target, migrates := renderer.(migration.TargetRenderer)
	table := []struct {
		name  string
		build func() (starter, error)
	}{
		{"virtualmachine", func() (starter, error) {
			vmConfig = vm.Config{
				Client: m.client, VMs: inf.vms, VMIs: inf.vmis, KubeVirts: inf.kubevirts,
				Claims: inf.claims, ClaimClient: m.kube, Recorder: recorder, Workers: m.opts.VMWorkers, Observe: m.metrics.observer("virtualmachine"),
			}
			// The start revisions of the VMs (vm.StartRevisionLabel), not
			// those of every DaemonSet and StatefulSet.
			vmConfig.StartRevisions = newInformer(m.kube.ControllerRevisions(""), &appsv1.ControllerRevision{}, resync, stripManagedFields, func(o *metav1.ListOptions) {
				o.LabelSelector = vm.StartRevisionLabel
			})
			vmConfig.StartRevisionClient = m.kube
			inf.started = append(inf.started, vmConfig.StartRevisions)
			if served.instancetypes {
				inf.started = append(inf.started, m.addInstancetypeInformers(&vmConfig, resync)...)
			} else {
				log.Info("instancetype.kubevirt.io is not served: VMs naming an instance type or preference will not start")
			}
			if served.dataVolumes {
				vmConfig.DataVolumes = newInformer(m.dynamic.Resource(vm.DataVolumeResource), &unstructured.Unstructured{}, resync, stripManagedFields, nil)
				vmConfig.Dynamic = m.dynamic
				inf.started = append(inf.started, vmConfig.DataVolumes)
				log.Info("watching CDI DataVolumes", "resource", vm.DataVolumeResource.String())
			} else {
				log.Info("CDI DataVolumes are not served: VMs with dataVolumeTemplates will not start", "resource", vm.DataVolumeResource.String())
			}
			return vm.New(vmConfig)
		}},
		{"virtualmachineinstance", func() (starter, error) {
			// A VMI no node could run gets no launcher pod: validated for
			// TCG when the cluster may emulate (a few features are
			// KVM-only).
			emulation := m.opts.PodTemplate != nil && m.opts.PodTemplate.EmulationAllowed
			return vmi.New(vmi.Config{
				Client: m.client, Kube: m.kube, ClaimClient: m.kube, Renderer: renderer,
				VMIs: inf.vmis, Pods: inf.pods, Claims: inf.claims, DataVolumes: vmConfig.DataVolumes, KubeVirts: inf.kubevirts,
				Nodes: inf.nodes, HeartbeatTimeout: m.opts.NodeHeartbeatTimeout,
				Recorder: recorder, Workers: m.opts.VMIWorkers, Observe: m.metrics.observer("virtualmachineinstance"),
				OnPhaseChange: m.metrics.phaseChanged, OnStartTimeline: m.metrics.startTimeline,
				// As virt-api admits: more vCPUs than vmkit runs still get
				// a launcher pod, which stays unscheduled
				// (ErrorUnschedulable), as on KubeVirt.
				Validate: func(v *v1.VirtualMachineInstance) field.ErrorList {
					errs, warnings := domainxml.ValidateAdmission(v, emulation)
					for _, w := range warnings {
						if w.Field == domainxml.MaxSocketsField {
							errs = append(errs, w)
						}
					}
					return errs
				},
			})
		}},
		{"virtualmachineinstancereplicaset", func() (starter, error) {
			return replicaset.New(replicaset.Config{
				Client: m.client, ReplicaSets: inf.replicaSets, VMIs: inf.vmis, KubeVirts: inf.kubevirts,
				Recorder: recorder, Workers: m.opts.ReplicaSetWorkers, Observe: m.metrics.observer("virtualmachineinstancereplicaset"),
			})
		}},
		{"node", func() (starter, error) {
			return node.New(node.Config{
				Client: m.client, Kube: m.kube.Nodes(), Nodes: inf.nodes, VMIs: inf.vmis, Pods: inf.pods,
				HeartbeatTimeout: m.opts.NodeHeartbeatTimeout, Recorder: recorder,
				Workers: m.opts.NodeWorkers, Observe: m.metrics.observer("node"), OnPhaseChange: m.metrics.phaseChanged,
			})
		}},
		// Budgets protect VMIs that should migrate on eviction whether or
		// not this Manager migrates them (KubeVirt runs the controller
		// always).
		{"disruptionbudget", func() (starter, error) {
			return disruptionbudget.New(disruptionbudget.Config{
				Client: m.kube, VMIs: inf.vmis, Budgets: inf.budgets, Pods: inf.pods, Migrations: inf.migrations, KubeVirts: inf.kubevirts,
				Recorder: recorder, Workers: m.opts.DisruptionBudgetWorkers, Observe: m.metrics.observer("disruptionbudget"),
			})
		}},
		// Live migration needs a renderer of target pods.
		{"virtualmachineinstancemigration", func() (starter, error) {
			if !migrates {
				log.Info("the pod renderer does not render migration target pods: VirtualMachineInstanceMigrations are not reconciled")
				return nil, nil
			}
			return migration.New(migration.Config{
				Client: m.client, Kube: m.kube, Renderer: target,
				Migrations: inf.migrations, VMIs: inf.vmis, Pods: inf.pods, Claims: inf.claims, KubeVirts: inf.kubevirts,
				Recorder: recorder, Workers: m.opts.MigrationWorkers, Observe: m.metrics.observer("virtualmachineinstancemigration"),
			})
		}},
		{"evacuation", func() (starter, error) {
			if !migrates {
				return nil, nil
			}
			return evacuation.New(evacuation.Config{
				Client: m.client, Nodes: inf.nodes, VMIs: inf.vmis, Migrations: inf.migrations, KubeVirts: inf.kubevirts,
				Recorder: recorder, Workers: m.opts.EvacuationWorkers, Observe: m.metrics.observer("evacuation"),
			})
		}},
		// VirtualMachinePools are watched when the API server serves them.
		{"virtualmachinepool", func() (starter, error) {
			if !served.pools {
				log.Info("pool.kubevirt.io is not served: VirtualMachinePools are not reconciled")
				return nil, nil
			}
			pools := newInformer(m.pools.VirtualMachinePools(""), &poolv1beta1.VirtualMachinePool{}, resync, stripManagedFields, nil)
			inf.started = append(inf.started, pools)
			return pool.New(pool.Config{
				Client: m.client, PoolClient: m.pools, Pools: pools, VMs: inf.vms,
				Recorder: recorder, Workers: m.opts.PoolWorkers, Observe: m.metrics.observer("virtualmachinepool"),
			})
		}},
		// VirtualMachineExports, when served and an export server image
		// is configured.
		{"virtualmachineexport", func() (starter, error) {
			if !served.exports || m.opts.Export.Image == "" {
				log.Info("export.kubevirt.io is not served or no export server image is set: VirtualMachineExports are not reconciled", "served", served.exports)
				return nil, nil
			}
			exports := newInformer(m.exports.VirtualMachineExports(""), &exportv1beta1.VirtualMachineExport{}, resync, stripManagedFields, nil)
			pods := newInformer(m.kube.Pods(""), &corev1.Pod{}, resync, stripManagedFields, func(o *metav1.ListOptions) {
				o.LabelSelector = export.PodSelector
			})
			inf.started = append(inf.started, exports, pods)
			var snaps cache.SharedIndexInformer
			if served.snapshots {
				snaps = m.snapshotInformer(inf)
			}
			return export.New(export.Config{
				Exports: m.exports, Kube: m.kube,
				Issuer: export.SecretIssuer{Secrets: m.kube.Secrets(m.opts.Export.CANamespace), Name: m.opts.Export.CASecret},
				Image:  m.opts.Export.Image, ImagePullPolicy: m.opts.Export.ImagePullPolicy,
				ExportInformer: exports, Pods: pods, Claims: inf.claims, VMs: inf.vms, VMIs: inf.vmis, Snapshots: snaps,
				Recorder: recorder, Workers: m.opts.ExportWorkers, Observe: m.metrics.observer("virtualmachineexport"),
			})
		}},
		// VM snapshots and restores, when served.
		{"snapshot", func() (starter, error) {
			if !served.snapshots {
				log.Info("snapshot.kubevirt.io is not served: VirtualMachineSnapshots and VirtualMachineRestores are not reconciled")
				return nil, nil
			}
			s := m.snapshots
			snaps := m.snapshotInformer(inf)
			contents := newInformer(s.VirtualMachineSnapshotContents(""), &snapshotv1beta1.VirtualMachineSnapshotContent{}, resync, stripManagedFields, nil)
			restores := newInformer(s.VirtualMachineRestores(""), &snapshotv1beta1.VirtualMachineRestore{}, resync, stripManagedFields, nil)
			inf.started = append(inf.started, contents, restores)
			return snapshot.New(snapshot.Config{
				Client: m.client, Snapshots: s,
				SnapshotInformer: snaps, Contents: contents, Restores: restores, VMs: inf.vms, VMIs: inf.vmis, Claims: inf.claims,
				Recorder: recorder, Workers: m.opts.SnapshotWorkers, Observe: m.metrics.observer("snapshot"),
			})
		}},
	}
	var controllers []starter
	for _, c := range table {
		ctrl, err := c.build()
		if err != nil {
			return nil, fmt.Errorf("vmcontrol: the %s controller: %w", c.name, err)
		}
		if ctrl != nil {
			controllers = append(controllers, ctrl)
		}
	}
	return controllers, nil
}

// watchServedAPIs checks every DiscoveryInterval whether CDI's DataVolumes,
// instancetype.kubevirt.io and pool.kubevirt.io are still served as they were when the
// controllers started, and stops the run with errAPIsChanged when not. A
// failed check is logged and tried again at the next interval.
func (m *Manager) watchServedAPIs(ctx context.Context, was servedAPIs, stop context.CancelCauseFunc) {
	t := time.NewTicker(m.opts.DiscoveryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		served, err := m.servedAPIs(ctx)
		if err != nil {
			klog.FromContext(ctx).Error(err, "checking which APIs are served")
			continue
		}
		if served != was {
			stop(errAPIsChanged)
			return
		}
	}
}

// servedAPIs are the optional APIs the controllers use where the API
// server serves them.
type servedAPIs struct {
	dataVolumes   bool // CDI's DataVolumes
	instancetypes bool // instancetype.kubevirt.io/v1beta1
	pools         bool // pool.kubevirt.io/v1beta1
	exports       bool // export.kubevirt.io/v1beta1
	snapshots     bool // snapshot.kubevirt.io/v1beta1
}

// servedAPIs asks the API server which optional APIs it serves.
func (m *Manager) servedAPIs(ctx context.Context) (servedAPIs, error) {
	var s servedAPIs
	var err error
	if s.dataVolumes, err = m.kube.Serves(ctx, vm.DataVolumeResource); err != nil {
		return s, fmt.Errorf("vmcontrol: %w", err)
	}
	if s.instancetypes, err = m.kube.Serves(ctx, instancetypev1beta1.SchemeGroupVersion.WithResource("virtualmachineinstancetypes")); err != nil {
		return s, fmt.Errorf("vmcontrol: %w", err)
	}
	if s.pools, err = m.kube.Serves(ctx, poolv1beta1.SchemeGroupVersion.WithResource("virtualmachinepools")); err != nil {
		return s, fmt.Errorf("vmcontrol: %w", err)
	}
	if s.exports, err = m.kube.Serves(ctx, exportv1beta1.SchemeGroupVersion.WithResource("virtualmachineexports")); err != nil {
		return s, fmt.Errorf("vmcontrol: %w", err)
	}
	if s.snapshots, err = m.kube.Serves(ctx, snapshotv1beta1.SchemeGroupVersion.WithResource("virtualmachinesnapshots")); err != nil {
		return s, fmt.Errorf("vmcontrol: %w", err)
	}
	return s, nil
}

// addInstancetypeInformers gives the VM controller informers of the four
// instancetype.kubevirt.io kinds and of the ControllerRevisions pinning
// them, and returns them for the caller to start.
func (m *Manager) addInstancetypeInformers(cfg *vm.Config, resync time.Duration) []cache.SharedIndexInformer {
	it := m.instancetypes
	cfg.Instancetypes = newInformer(it.VirtualMachineInstancetypes(""), &instancetypev1beta1.VirtualMachineInstancetype{}, resync, stripManagedFields, nil)
	cfg.ClusterInstancetypes = newInformer(it.VirtualMachineClusterInstancetypes(), &instancetypev1beta1.VirtualMachineClusterInstancetype{}, resync, stripManagedFields, nil)
	cfg.Preferences = newInformer(it.VirtualMachinePreferences(""), &instancetypev1beta1.VirtualMachinePreference{}, resync, stripManagedFields, nil)
	cfg.ClusterPreferences = newInformer(it.VirtualMachineClusterPreferences(), &instancetypev1beta1.VirtualMachineClusterPreference{}, resync, stripManagedFields, nil)
	// Only the revisions pinning instance types and preferences, not those
	// of every DaemonSet and StatefulSet.
	cfg.Revisions = newInformer(m.kube.ControllerRevisions(""), &appsv1.ControllerRevision{}, resync, stripManagedFields, func(o *metav1.ListOptions) {
		o.LabelSelector = vm.RevisionSelector
	})
	cfg.RevisionClient = m.kube
	return []cache.SharedIndexInformer{cfg.Instancetypes, cfg.ClusterInstancetypes, cfg.Preferences, cfg.ClusterPreferences, cfg.Revisions}
}

// listerWatcher is what a typed client offers an informer.
type listerWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// newInformer is a shared informer on everything c lists (all namespaces),
// indexed by namespace as generated listers expect, with transform applied
// to every object before it is cached and tweak (if set) to every list and
// watch. It does what a generated informer factory does without the factory,
// whose clientset would link every API group (see kubeclient).
func newInformer[L runtime.Object](c listerWatcher[L], example runtime.Object, resync time.Duration, transform cache.TransformFunc, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			tweak(&opts)
			return c.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			tweak(&opts)
			return c.Watch(ctx, opts)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{
		ResyncPeriod: resync,
		Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
	_ = inf.SetTransform(transform) // fails only once the informer runs
	return inf
}

func (m *Manager) handler() http.Handler {
	guard := m.opts.HTTPGuard
	if guard == nil {
		guard = func(h http.Handler) http.Handler { return h }
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", guard(promhttp.HandlerFor(m.metrics.registry, promhttp.HandlerOpts{})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.ready.Load() {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	if m.opts.Profiling {
		mux.Handle("/debug/pprof/", guard(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/profile", guard(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", guard(http.HandlerFunc(pprof.Trace)))
	}
	return mux
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
