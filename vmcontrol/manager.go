// Package vmcontrol runs vmkit's controllers (the VirtualMachine and
// VirtualMachineInstance controllers of virt-controller) together: one shared
// informer factory, worker counts per controller, client rate limits, leader
// election on a coordination.k8s.io Lease, Prometheus metrics on /metrics,
// and /healthz and /readyz.
//
// Each controller (vmcontrol/vm, vmcontrol/vmi) is also usable alone: it has
// a constructor taking informers and satisfies Start(ctx) error, so it can be
// added to a controller-runtime manager as a Runnable.
package vmcontrol

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/podtemplate"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/scheme"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
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
	// VMWorkers (default 3) and VMIWorkers (default 10), as KubeVirt.
	VMWorkers, VMIWorkers int
	// ResyncPeriod of the informers (default 12h; 0 keeps the default).
	ResyncPeriod time.Duration
	// LeaderElection, when enabled, runs the controllers only while this
	// process holds the Lease.
	LeaderElection LeaderElection
	// HTTPAddr serves /metrics, /healthz and /readyz ("" disables it).
	HTTPAddr string
	// Profiling adds Go's profiles (/debug/pprof/) to the HTTP server.
	Profiling bool
	// DiscoveryInterval is how often the Manager checks whether the API
	// server started or stopped serving CDI's DataVolumes; when it did, the
	// controllers restart (in this process) to watch them or stop
	// (default 1m; negative: checked only when the controllers start).
	DiscoveryInterval time.Duration
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
	opts     Options
	client   versioned.Interface
	kube     kubernetes.Interface
	dynamic  dynamic.Interface
	metrics  *metrics
	ready    atomic.Bool
	leading  atomic.Bool
	listener net.Listener
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
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmcontrol: %w", err)
	}
	// Pods, claims, nodes, events and leases speak protobuf: decoding a
	// launcher pod costs a fraction of its JSON in CPU and garbage. (Custom
	// resources have no protobuf encoding: the clientset above stays JSON.)
	kcfg := rest.CopyConfig(cfg)
	if kcfg.ContentType == "" {
		kcfg.ContentType = runtime.ContentTypeProtobuf
		kcfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	kube, err := kubernetes.NewForConfig(kcfg)
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
	m := &Manager{opts: opts, client: client, kube: kube, dynamic: dyn, metrics: newMetrics()}
	if opts.HTTPAddr != "" {
		if m.listener, err = net.Listen("tcp", opts.HTTPAddr); err != nil {
			return nil, fmt.Errorf("vmcontrol: listening on %s: %w", opts.HTTPAddr, err)
		}
	}
	return m, nil
}

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
		srv := &http.Server{Handler: m.handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(m.listener) }()
		defer func() { _ = srv.Close() }()
	}
	if !m.opts.LeaderElection.Enabled {
		return m.runControllers(ctx)
	}
	le := m.opts.LeaderElection
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     m.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	m.ready.Store(true) // a standby is healthy and ready
	runErr := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				err := m.runControllers(leaderCtx)
				runErr <- err
				if err != nil {
					cancel() // a controller failed: give up the lease
				}
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("vmcontrol: leader election: %w", err)
	}
	elector.Run(ctx)
	select {
	case err := <-runErr:
		if err != nil {
			return err
		}
	default:
	}
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("vmcontrol: lost the leader lease")
}

// errAPIsChanged ends a run of the controllers whose view of the served
// APIs (CDI's DataVolumes) is out of date.
var errAPIsChanged = errors.New("vmcontrol: the served APIs changed")

// runControllers runs the controllers until ctx ends, starting them again
// when the API server starts or stops serving CDI's DataVolumes.
func (m *Manager) runControllers(ctx context.Context) error {
	for {
		err := m.runControllersOnce(ctx)
		if !errors.Is(err, errAPIsChanged) {
			return err
		}
		klog.FromContext(ctx).Info("CDI DataVolumes appeared or went away: restarting the controllers")
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
	m.metrics.leader.Set(1)
	defer func() { m.leading.Store(false); m.metrics.leader.Set(0) }()

	// Cached objects drop managedFields, which the controllers never read and
	// which are a large part of each object.
	factory := externalversions.NewSharedInformerFactoryWithOptions(m.client, m.opts.ResyncPeriod,
		externalversions.WithTransform(stripManagedFields))
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(m.kube, m.opts.ResyncPeriod,
		kubeinformers.WithTransform(slimPod),
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = v1.AppLabel + "=" + v1.VirtLauncherValue
		}))
	// Claims are not launcher pods: they get their own factory, unfiltered.
	claimFactory := kubeinformers.NewSharedInformerFactoryWithOptions(m.kube, m.opts.ResyncPeriod,
		kubeinformers.WithTransform(slimClaim))
	claims := claimFactory.Core().V1().PersistentVolumeClaims()
	renderer := m.opts.Renderer
	if m.opts.PodTemplate != nil {
		cfg := *m.opts.PodTemplate
		cfg.ClaimVolumeMode = vmi.ClaimVolumeMode(claims.Lister())
		r, err := podtemplate.New(cfg)
		if err != nil {
			return fmt.Errorf("vmcontrol: %w", err)
		}
		renderer = r
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "virt-controller"})

	vmConfig := vm.Config{
		Client: m.client, VMs: factory.Kubevirt().V1().VirtualMachines(), VMIs: factory.Kubevirt().V1().VirtualMachineInstances(),
		Recorder: recorder, Workers: m.opts.VMWorkers, Observe: m.metrics.observer("virtualmachine"),
	}
	// CDI's DataVolumes are watched when the API server serves them; a
	// change is noticed by watchServedAPIs, which restarts this run.
	cdi, err := m.servesDataVolumes()
	if err != nil {
		return err
	}
	var dvFactory dynamicinformer.DynamicSharedInformerFactory
	if cdi {
		dvFactory = dynamicinformer.NewDynamicSharedInformerFactory(m.dynamic, m.opts.ResyncPeriod)
		vmConfig.DataVolumes = dvFactory.ForResource(vm.DataVolumeResource).Informer()
		if err := vmConfig.DataVolumes.SetTransform(stripManagedFields); err != nil {
			return fmt.Errorf("vmcontrol: %w", err)
		}
		vmConfig.Dynamic = m.dynamic
		log.Info("watching CDI DataVolumes", "resource", vm.DataVolumeResource.String())
	} else {
		log.Info("CDI DataVolumes are not served: VMs with dataVolumeTemplates will not start", "resource", vm.DataVolumeResource.String())
	}
	vmController, err := vm.New(vmConfig)
	if err != nil {
		return err
	}
	vmiController, err := vmi.New(vmi.Config{
		Client: m.client, Kube: m.kube, Renderer: renderer,
		VMIs: factory.Kubevirt().V1().VirtualMachineInstances(), Pods: kubeFactory.Core().V1().Pods(), Claims: claims, DataVolumes: vmConfig.DataVolumes,
		Recorder: recorder, Workers: m.opts.VMIWorkers, Observe: m.metrics.observer("virtualmachineinstance"),
		OnPhaseChange: m.metrics.phaseChanged,
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	claimFactory.Start(ctx.Done())
	if dvFactory != nil {
		dvFactory.Start(ctx.Done())
		defer dvFactory.Shutdown()
	}
	defer factory.Shutdown()
	defer kubeFactory.Shutdown()
	defer claimFactory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return notSynced(ctx, typ)
		}
	}
	for _, f := range []kubeinformers.SharedInformerFactory{kubeFactory, claimFactory} {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return notSynced(ctx, typ)
			}
		}
	}
	m.ready.Store(true)
	log.Info("controllers running")
	if m.opts.DiscoveryInterval > 0 {
		go m.watchServedAPIs(ctx, cdi, stop)
	}
	errs := make(chan error, 2)
	go func() { errs <- vmController.Start(ctx) }()
	go func() { errs <- vmiController.Start(ctx) }()
	err = errors.Join(<-errs, <-errs)
	if cause := context.Cause(ctx); errors.Is(cause, errAPIsChanged) {
		return cause
	}
	return err
}

// notSynced is the error of an informer that did not sync: none when ctx
// ended first (a shutdown, not a failure).
func notSynced(ctx context.Context, typ any) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("vmcontrol: informer for %v did not sync", typ)
}

// watchServedAPIs checks every DiscoveryInterval whether CDI's DataVolumes
// are still served as they were when the controllers started (cdi), and
// stops the run with errAPIsChanged when not. A failed check is logged and
// tried again at the next interval.
func (m *Manager) watchServedAPIs(ctx context.Context, cdi bool, stop context.CancelCauseFunc) {
	t := time.NewTicker(m.opts.DiscoveryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		served, err := m.servesDataVolumes()
		if err != nil {
			klog.FromContext(ctx).Error(err, "checking which APIs are served")
			continue
		}
		if served != cdi {
			stop(errAPIsChanged)
			return
		}
	}
}

// servesDataVolumes reports whether the API server serves CDI's DataVolumes.
func (m *Manager) servesDataVolumes() (bool, error) {
	gv := vm.DataVolumeResource.GroupVersion().String()
	list, err := m.kube.Discovery().ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("vmcontrol: discovering %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == vm.DataVolumeResource.Resource {
			return true, nil
		}
	}
	return false, nil
}

func (m *Manager) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.metrics.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.ready.Load() {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	if m.opts.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// stripManagedFields is an informer transform that drops metadata.managedFields.
func stripManagedFields(obj any) (any, error) {
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}

// slimPod is the launcher-pod informer's transform: it keeps what the
// controllers read (metadata without managedFields, the node, phase,
// conditions, container readiness, QoS class) and drops the rest of the spec
// and status, which is most of a launcher pod's size. Controllers needing
// more of the pod must read it from the API server.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return stripManagedFields(obj)
	}
	slim := &corev1.Pod{ObjectMeta: pod.ObjectMeta}
	slim.ManagedFields = nil
	slim.Spec.NodeName = pod.Spec.NodeName
	slim.Status.Phase = pod.Status.Phase
	slim.Status.Conditions = pod.Status.Conditions
	slim.Status.QOSClass = pod.Status.QOSClass
	for _, cs := range pod.Status.ContainerStatuses {
		slim.Status.ContainerStatuses = append(slim.Status.ContainerStatuses, corev1.ContainerStatus{Name: cs.Name, Ready: cs.Ready})
	}
	return slim, nil
}

// slimClaim is the claim informer's transform: the VMI controller reads
// whether a claim exists, whether it is being deleted, its volume mode and
// phase; the rest (labels, annotations, requests, conditions) is dropped.
func slimClaim(obj any) (any, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return stripManagedFields(obj)
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pvc.Name, Namespace: pvc.Namespace, UID: pvc.UID,
			ResourceVersion: pvc.ResourceVersion, DeletionTimestamp: pvc.DeletionTimestamp},
		Spec:   corev1.PersistentVolumeClaimSpec{VolumeMode: pvc.Spec.VolumeMode},
		Status: corev1.PersistentVolumeClaimStatus{Phase: pvc.Status.Phase},
	}, nil
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
