// Command virt-operator installs, updates and removes vmkit as a KubeVirt CR
// asks (vmcontrol/operator), under leader election, serving /metrics,
// /healthz and /readyz over HTTPS (/metrics to authorized users only).
// With --dump-install-strategy it instead writes the
// install strategy of its configuration (read from OPERATOR_IMAGE,
// TARGET_INSTALL_NAMESPACE, TARGET_IMAGE_PULL_POLICY and
// TARGET_DEPLOYMENT_CONFIG) to a ConfigMap and exits. With
// --dump-operator-manifest it prints the operator's own installation
// (installstrategy.OperatorManifest) for `kubectl apply -f -` and exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/delegatedauth"
	"github.com/vmkit/vmkit/internal/leaderelect"
	"github.com/vmkit/vmkit/internal/restconfig"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/scheme"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/operator"
)

type options struct {
	kubeconfig     string
	dump           bool
	manifest       installstrategy.OperatorConfig
	dumpManifest   bool
	strategyJobs   bool
	leaderElect    bool
	leaseNamespace string
	leaseName      string
	metricsAddress string
	resync         time.Duration
	qps            float64
	burst          int
}

func main() {
	o := options{}
	fs := flag.NewFlagSet("virt-operator", flag.ExitOnError)
	o.register(fs)
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if o.dumpManifest {
		data, err := installstrategy.OperatorManifest(o.manifest)
		if err != nil {
			fmt.Fprintln(os.Stderr, "virt-operator:", err)
			os.Exit(1)
		}
		_, _ = os.Stdout.Write(data)
		return
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, o, os.Getenv, os.Environ()); err != nil {
		klog.ErrorS(err, "virt-operator failed")
		os.Exit(1)
	}
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.BoolVar(&o.dump, "dump-install-strategy", false, "write the install strategy of the configuration in the environment to a ConfigMap and exit")
	fs.BoolVar(&o.strategyJobs, "install-strategy-jobs", false, "load install strategies from ConfigMaps written by --dump-install-strategy Jobs of the target version (default: generate them in process)")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "run the controller only while holding the leader Lease")
	fs.StringVar(&o.leaseNamespace, "leader-elect-namespace", "", "namespace of the leader Lease (default: the install namespace)")
	fs.StringVar(&o.leaseName, "leader-elect-name", "virt-operator", "name of the leader Lease")
	fs.StringVar(&o.metricsAddress, "metrics-address", ":8187", "address serving /metrics, /healthz and /readyz over HTTPS (a self-signed certificate; empty disables); /metrics only to whom the API server authenticates and allows get on it")
	fs.DurationVar(&o.resync, "resync", 5*time.Minute, "how often the installed strategy is re-applied")
	// An install, upgrade or uninstall makes a few hundred requests in a
	// burst; client-go's default of 5 per second made each take 20-40 s.
	fs.Float64Var(&o.qps, "qps", 100, "API client queries per second")
	fs.IntVar(&o.burst, "burst", 200, "API client burst")
	fs.BoolVar(&o.dumpManifest, "dump-operator-manifest", false, "print the operator's own installation as YAML and exit (see the --manifest-* flags)")
	fs.StringVar(&o.manifest.Image, "manifest-image", "", "with --dump-operator-manifest: the operator's image, e.g. quay.io/vmkit/virt-operator:v0.1.0")
	fs.StringVar(&o.manifest.Namespace, "manifest-namespace", installstrategy.DefaultNamespace, "with --dump-operator-manifest: the install namespace")
	fs.StringVar((*string)(&o.manifest.ImagePullPolicy), "manifest-image-pull-policy", "", "with --dump-operator-manifest: the images' pull policy")
	fs.StringVar(&o.manifest.HostNetwork, "manifest-host-network", "", "with --dump-operator-manifest: run every component on the host network, listening on this address")
	fs.BoolVar(&o.manifest.WithoutVirtAPI, "manifest-without-virt-api", false, "with --dump-operator-manifest: install no virt-api")
}

func run(ctx context.Context, o options, getenv func(string) string, environ []string) error {
	cfg, err := installstrategy.ConfigFromEnv(getenv, environ)
	if err != nil {
		return err
	}
	restCfg, err := o.restConfig()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	if o.dump {
		return dump(ctx, kube, cfg)
	}
	client, err := versioned.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	var ready atomic.Bool
	metrics := operator.NewMetrics()
	if err := metrics.Register(prometheus.DefaultRegisterer); err != nil {
		return err
	}
	if o.metricsAddress != "" {
		// /metrics over TLS and only to users the API server
		// authenticates and allows get on it, as virt-controller's
		// (#35 N5): a certificate made in memory, which Prometheus does
		// not verify, and the API server's TokenReviews and
		// SubjectAccessReviews. The probes read /healthz and /readyz
		// without credentials.
		host, _ := os.Hostname()
		tlsConfig, err := delegatedauth.SelfSignedTLS("virt-operator", host, "localhost", "127.0.0.1")
		if err != nil {
			return err
		}
		guard, err := delegatedauth.New(ctx, delegatedauth.Config{Client: restCfg})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", o.metricsAddress)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", o.metricsAddress, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", guard.Handler(promhttp.Handler()))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !ready.Load() {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, TLSConfig: tlsConfig}
		go func() { _ = srv.ServeTLS(ln, "", "") }()
		defer func() { _ = srv.Close() }()
	}
	controllers := func(ctx context.Context) error {
		metrics.Leading.Set(1)
		defer metrics.Leading.Set(0)
		factory := externalversions.NewSharedInformerFactory(client, 0)
		kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithNamespace(cfg.Namespace),
			kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = installstrategy.ManagedSelector }))
		// The components' pods (kubevirt.io=<component>), whose image pulls
		// the operator reports.
		podFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithNamespace(cfg.Namespace),
			kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = v1.AppLabel }))
		broadcaster := record.NewBroadcaster(record.WithContext(ctx))
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
		defer broadcaster.Shutdown()
		var strategies operator.StrategyLoader = operator.Generated{}
		if o.strategyJobs {
			strategies = &operator.ConfigMapStrategies{Kube: kube, Namespace: cfg.Namespace, CreateJobs: true}
		}
		ctl, err := operator.New(operator.Config{
			Client: client, Dynamic: dyn, KubeVirts: factory.Kubevirt().V1().KubeVirts(),
			Deployments: kubeFactory.Apps().V1().Deployments(), DaemonSets: kubeFactory.Apps().V1().DaemonSets(),
			Pods:     podFactory.Core().V1().Pods(),
			Operator: cfg, Strategies: strategies, Resync: o.resync, Discovery: kube.Discovery(),
			Recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "virt-operator"}),
		})
		if err != nil {
			return err
		}
		factory.Start(ctx.Done())
		kubeFactory.Start(ctx.Done())
		podFactory.Start(ctx.Done())
		defer factory.Shutdown()
		defer kubeFactory.Shutdown()
		defer podFactory.Shutdown()
		ready.Store(true)
		metrics.Ready.Set(1)
		defer func() { ready.Store(false); metrics.Ready.Set(0) }()
		return ctl.Start(ctx)
	}
	klog.InfoS("virt-operator starting", "version", cfg.Version, "registry", cfg.Registry, "namespace", cfg.Namespace, "id", cfg.ID)
	if !o.leaderElect {
		return controllers(ctx)
	}
	return leaderElect(ctx, kube, o, cfg.Namespace, controllers)
}

// dump writes the strategy of cfg to its ConfigMap (replacing an older one
// with the same ID, which holds the same strategy).
func dump(ctx context.Context, kube kubernetes.Interface, cfg *installstrategy.DeploymentConfig) error {
	s, err := installstrategy.Generate(cfg)
	if err != nil {
		return err
	}
	cm, err := s.ToConfigMap()
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = kube.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	klog.InfoS("wrote install strategy", "configMap", cm.Namespace+"/"+cm.Name, "version", cfg.Version, "objects", len(s.Objects()))
	return nil
}

// leaderElect runs run while this replica holds the operator's Lease, with
// the same election (internal/leaderelect) and durations as virt-controller.
func leaderElect(ctx context.Context, kube kubernetes.Interface, o options, namespace string, run func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ns := o.leaseNamespace
	if ns == "" {
		ns = namespace
	}
	host, _ := os.Hostname()
	elector, err := leaderelect.New(leaderelect.Config{
		Leases: kube.CoordinationV1().Leases(ns), Name: o.leaseName,
		Identity:      fmt.Sprintf("%s_%d", host, time.Now().UnixNano()),
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	runErr := make(chan error, 1)
	err = elector.Run(ctx, func(ctx context.Context) {
		runErr <- run(ctx)
		// The controllers are done: end the election, which releases the Lease.
		cancel()
	})
	if err != nil {
		// Lost the Lease: exit, so that the replica starts again as a candidate.
		return err
	}
	select {
	case err := <-runErr:
		return err
	default:
		return nil
	}
}

// restConfig is the operator's client configuration: in-cluster or from
// --kubeconfig, with its user agent and the --qps and --burst rate limit.
func (o options) restConfig() (*rest.Config, error) {
	return restconfig.Load(o.kubeconfig, "vmkit-virt-operator", float32(o.qps), o.burst)
}
