// Package operator is the KubeVirt CR controller (virt-operator's job): it
// installs, updates and removes vmkit as a KubeVirt CR asks.
//
// Only one KubeVirt CR is honoured: the one holding the operator's
// finalizer, else the oldest. Others get the condition Synchronized=False
// with reason MultipleKubeVirts and are otherwise ignored. For the honoured
// CR the controller resolves the target DeploymentConfig (the operator's own
// config overlaid with the CR's image tag, registry and settings), loads its
// install strategy (generated in process, or from the ConfigMap a
// virt-operator --dump-install-strategy Job wrote), makes sure the
// installation's certificates exist (installstrategy.EnsureCertificates),
// applies the strategy with installstrategy.Apply, virt-api's APIService
// carrying the CA bundle (and, where the cluster serves the Prometheus
// Operator's kinds, the ServiceMonitor and PrometheusRule), and reports phase Deploying → Deployed, conditions
// Available, Progressing, Degraded, Created and Synchronized with reasons,
// and the target and observed version, registry and config ID. A changed
// image tag or registry is a new target: the components roll to it. The
// controller holds a finalizer on the CR; deleting it moves the phase to
// Deleting, removes everything installed (installstrategy.Delete, per the
// CR's uninstall strategy) and, once nothing is left, Deleted, and drops the
// finalizer.
//
// The controller is usable alone: New takes informers the caller starts and
// Start(ctx) error runs it, so it can be added to a controller-runtime
// manager as a Runnable. cmd/virt-operator wires it with leader election.
package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	informers "github.com/vmkit/vmkit/vmapi/generated/informers/externalversions/vmapi/v1"
	listers "github.com/vmkit/vmkit/vmapi/generated/listers/vmapi/v1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// Config is what the controller needs.
type Config struct {
	// Client writes KubeVirt CRs (finalizer, status).
	Client versioned.Interface
	// Dynamic applies and deletes install strategies.
	Dynamic dynamic.Interface
	// KubeVirts is a shared informer the caller starts.
	KubeVirts informers.KubeVirtInformer
	// Deployments and DaemonSets, optional, are shared informers over the
	// install namespace (ideally filtered by installstrategy.ManagedSelector).
	// With them the controller reports component readiness in Available
	// and Progressing, and a change to an installed workload triggers a sync
	// that puts it back; without them Available is Unknown.
	Deployments appsinformers.DeploymentInformer
	DaemonSets  appsinformers.DaemonSetInformer
	// Pods, optional, is a shared informer over the install namespace's
	// component pods (label kubevirt.io). With it a component whose image
	// cannot be pulled makes Degraded True with reason ImagePullFailed and
	// a message naming the image.
	Pods coreinformers.PodInformer
	// Operator is the operator's own config (installstrategy.ConfigFromEnv).
	Operator *installstrategy.DeploymentConfig
	// Strategies loads the strategy of a config (default: Generated).
	Strategies StrategyLoader
	// Recorder records events on KubeVirt CRs; dropped when nil.
	Recorder record.EventRecorder
	// Resync is how often an installed strategy is re-applied to catch
	// drift the informers do not see (default 5m).
	Resync time.Duration
	// Observe, if set, is called after each sync (for metrics).
	Observe func(key string, d time.Duration, err error)
	// Discovery, optional, tells whether the cluster serves the Prometheus
	// Operator's ServiceMonitor and PrometheusRule
	// (installstrategy.MonitoringServed): where it does, the strategy's are
	// applied too. Without it they are never applied.
	Discovery discovery.ServerResourcesInterface
}

// Controller is the KubeVirt CR controller.
type Controller struct {
	client     versioned.Interface
	dynamic    dynamic.Interface
	kvLister   listers.KubeVirtLister
	deploys    appslisters.DeploymentLister
	daemonSets appslisters.DaemonSetLister
	pods       corelisters.PodLister
	synced     []cache.InformerSynced
	operator   *installstrategy.DeploymentConfig
	strategies StrategyLoader
	recorder   record.EventRecorder
	resync     time.Duration
	discovery  discovery.ServerResourcesInterface
	stale      *reconcile.Superseded
	loop       *reconcile.Loop
	now        func() time.Time

	mu      sync.Mutex
	cache   map[string]*installstrategy.Strategy // by config ID
	waiting map[string]string                    // by CR key: what its uninstall last waited for
}

// New wires the controller to its informers. Call Start to run it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Dynamic == nil || cfg.KubeVirts == nil || cfg.Operator == nil {
		return nil, errors.New("operator: Client, Dynamic, KubeVirts and Operator are required")
	}
	if err := cfg.Operator.Validate(); err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	if cfg.Strategies == nil {
		cfg.Strategies = Generated{}
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 5 * time.Minute
	}
	c := &Controller{
		client:     cfg.Client,
		dynamic:    cfg.Dynamic,
		kvLister:   cfg.KubeVirts.Lister(),
		synced:     []cache.InformerSynced{cfg.KubeVirts.Informer().HasSynced},
		operator:   cfg.Operator,
		strategies: cfg.Strategies,
		recorder:   cfg.Recorder,
		resync:     cfg.Resync,
		discovery:  cfg.Discovery,
		stale:      reconcile.NewSuperseded(),
		now:        func() time.Time { return time.Now().Truncate(time.Second) }, // the API keeps seconds
		cache:      map[string]*installstrategy.Strategy{},
	}
	c.loop = &reconcile.Loop{
		Name:    "kubevirt",
		Queue:   reconcile.NewQueue("kubevirt"),
		Workers: 1, // one installation; concurrent syncs would only fight
		Sync:    c.sync,
		Observe: cfg.Observe,
	}
	// Which CR is honoured depends on all of them: any change looks at all.
	all := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueAll() },
		UpdateFunc: func(_, _ any) { c.enqueueAll() },
		DeleteFunc: func(any) { c.enqueueAll() },
	}
	if _, err := cfg.KubeVirts.Informer().AddEventHandler(all); err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	if cfg.Deployments != nil {
		c.deploys = cfg.Deployments.Lister()
		c.synced = append(c.synced, cfg.Deployments.Informer().HasSynced)
		if _, err := cfg.Deployments.Informer().AddEventHandler(all); err != nil {
			return nil, fmt.Errorf("operator: %w", err)
		}
	}
	if cfg.DaemonSets != nil {
		c.daemonSets = cfg.DaemonSets.Lister()
		c.synced = append(c.synced, cfg.DaemonSets.Informer().HasSynced)
		if _, err := cfg.DaemonSets.Informer().AddEventHandler(all); err != nil {
			return nil, fmt.Errorf("operator: %w", err)
		}
	}
	if cfg.Pods != nil {
		c.pods = cfg.Pods.Lister()
		c.synced = append(c.synced, cfg.Pods.Informer().HasSynced)
		if _, err := cfg.Pods.Informer().AddEventHandler(all); err != nil {
			return nil, fmt.Errorf("operator: %w", err)
		}
	}
	return c, nil
}

// Start runs the controller until ctx is done. The informers must be
// started by the caller; Start waits for their caches.
func (c *Controller) Start(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("operator: caches did not sync")
	}
	klog.FromContext(ctx).Info("starting controller", "controller", "kubevirt", "version", c.operator.Version, "registry", c.operator.Registry)
	c.loop.Run(ctx)
	return nil
}

func (c *Controller) enqueueAll() {
	kvs, err := c.kvLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, kv := range kvs {
		if key, ok := reconcile.KeyOf(kv); ok {
			c.loop.Queue.Add(key)
		}
	}
}

// strategy returns the (cached) strategy of cfg.
func (c *Controller) strategy(ctx context.Context, cfg *installstrategy.DeploymentConfig) (*installstrategy.Strategy, error) {
	c.mu.Lock()
	s, ok := c.cache[cfg.ID]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := c.strategies.Load(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.cache[cfg.ID] = s
	c.mu.Unlock()
	return s, nil
}

// readiness reports whether the strategy's workloads are rolled out and
// available, and if not, which are not.
func (c *Controller) readiness(s *installstrategy.Strategy) (known, ready bool, waiting []string) {
	if c.deploys == nil || c.daemonSets == nil {
		return false, false, nil
	}
	for _, want := range s.Deployments {
		d, err := c.deploys.Deployments(want.Namespace).Get(want.Name)
		if err != nil || !deploymentReady(d) {
			waiting = append(waiting, "Deployment "+want.Name)
		}
	}
	for _, want := range s.DaemonSets {
		ds, err := c.daemonSets.DaemonSets(want.Namespace).Get(want.Name)
		if err != nil || !daemonSetReady(ds) {
			waiting = append(waiting, "DaemonSet "+want.Name)
		}
	}
	return true, len(waiting) == 0, waiting
}

// pullReasons are the kubelet's reasons of a container waiting for an
// image it cannot get.
var pullReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true}

// pullFailures names, for the strategy's workloads, each image a pod of
// theirs waits for and cannot pull, with the kubelet's reason and message.
func (c *Controller) pullFailures(s *installstrategy.Strategy) []string {
	if c.pods == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	check := func(namespace, component string) {
		pods, err := c.pods.Pods(namespace).List(labels.SelectorFromSet(labels.Set{v1.AppLabel: component}))
		if err != nil {
			return
		}
		// By name: the same image waited for by two pods is told once,
		// the same way each time (a cache lists in no order).
		slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		for _, p := range pods {
			for _, st := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
				w := st.State.Waiting
				if w == nil || !pullReasons[w.Reason] || seen[st.Image] {
					continue
				}
				seen[st.Image] = true
				out = append(out, fmt.Sprintf("%s: image %s cannot be pulled (%s: %s)", component, st.Image, w.Reason, w.Message))
			}
		}
	}
	for _, d := range s.Deployments {
		check(d.Namespace, d.Name)
	}
	for _, ds := range s.DaemonSets {
		check(ds.Namespace, ds.Name)
	}
	slices.Sort(out)
	return out
}

func deploymentReady(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.AvailableReplicas == want && d.Status.Replicas == want
}

func daemonSetReady(ds *appsv1.DaemonSet) bool {
	n := ds.Status.DesiredNumberScheduled
	return ds.Status.ObservedGeneration >= ds.Generation && ds.Status.UpdatedNumberScheduled == n && ds.Status.NumberAvailable == n
}

// activeKubeVirt returns the CR the operator honours: the one holding its
// finalizer, else the oldest that is not being deleted.
func activeKubeVirt(kvs []*v1.KubeVirt) *v1.KubeVirt {
	var best *v1.KubeVirt
	for _, kv := range kvs {
		if hasFinalizer(kv) {
			return kv
		}
		if kv.DeletionTimestamp != nil {
			continue
		}
		if best == nil || kv.CreationTimestamp.Before(&best.CreationTimestamp) ||
			(kv.CreationTimestamp.Equal(&best.CreationTimestamp) && kv.Namespace+"/"+kv.Name < best.Namespace+"/"+best.Name) {
			best = kv
		}
	}
	return best
}

func hasFinalizer(kv *v1.KubeVirt) bool {
	for _, f := range kv.Finalizers {
		if f == v1.KubeVirtFinalizer {
			return true
		}
	}
	return false
}
