// Command virt-api serves KubeVirt's subresource API
// (subresources.kubevirt.io/v1) as an aggregated API server (package
// virtapi): flags in, wiring, Serve. Everything else lives in virtapi.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/restconfig"
	"github.com/vmkit/vmkit/virtapi"
	"github.com/vmkit/vmkit/virtapi/webconsole"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
)

type options struct {
	kubeconfig   string
	qps          float64
	burst        int
	webhookQPS   float64
	webhookBurst int
	gates        string
	serve        virtapi.ServeOptions
	handlers     virtapi.HandlerPods
}

func main() {
	var o options
	o.register(flag.CommandLine)
	klog.InitFlags(nil)
	flag.Parse()
	o.serve.Kubeconfig = o.kubeconfig
	for _, g := range strings.Split(o.gates, ",") {
		if g = strings.TrimSpace(g); g != "" {
			o.serve.Admission.FeatureGates = append(o.serve.Admission.FeatureGates, g)
		}
	}
	if err := run(o); err != nil {
		klog.ErrorS(err, "virt-api failed")
		os.Exit(1)
	}
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	// Two clients with a rate limiter each, as KubeVirt's virt-api has:
	// anyone who reaches virt-api's Service can call the webhooks, and a
	// flood of such calls must not starve the subresources (#35 N5).
	// client-go's default, 5 per second after a burst of 10, was shared by
	// both. KubeVirt's webhook client has 200 and 400.
	fs.Float64Var(&o.qps, "qps", 100, "queries per second of the API client serving the subresources")
	fs.IntVar(&o.burst, "burst", 200, "burst of the API client serving the subresources")
	fs.Float64Var(&o.webhookQPS, "webhook-qps", 200, "queries per second of the admission webhooks' API client")
	fs.IntVar(&o.webhookBurst, "webhook-burst", 400, "burst of the admission webhooks' API client")
	fs.BoolVar(&o.serve.AuthenticateWebhooks, "authenticate-webhooks", false, "serve the admission webhooks only to callers the API server authenticates and allows post on the webhook's path (kube-apiserver must present credentials: its --admission-control-config-file; docs/reliability.md)")
	fs.StringVar(&o.serve.BindAddress, "bind-address", "0.0.0.0", "address to listen on")
	fs.IntVar(&o.serve.Port, "port", installstrategy.APIPort, "HTTPS port")
	fs.StringVar(&o.serve.CertFile, "tls-cert-file", installstrategy.APICertFile, "serving certificate (reloaded when it changes)")
	fs.StringVar(&o.serve.KeyFile, "tls-private-key-file", installstrategy.APIKeyFile, "serving certificate's key")
	fs.BoolVar(&o.serve.Admission.Emulation, "use-emulation", false, "validate admitted VMIs for QEMU's TCG emulator (the KubeVirt CR's useEmulation)")
	fs.StringVar(&o.gates, "feature-gates", "", "comma-separated KubeVirt feature gates turned on, e.g. HostDisk (the KubeVirt CR's developerConfiguration.featureGates)")
	fs.StringVar(&o.handlers.Namespace, "namespace", "kubevirt", "namespace of the virt-handler pods")
	fs.IntVar(&o.handlers.Port, "handler-port", installstrategy.HandlerConsolePort, "port of virt-handler's REST API")
	fs.StringVar(&o.handlers.Host, "handler-host", "", "address of every virt-handler (host-network installs); the handler pod's IP when empty")
	fs.StringVar(&o.handlers.ClientCertDir, "handler-client-cert-dir", installstrategy.APIHandlerClientCertDir, "directory holding tls.crt and tls.key, the client certificate virt-handler accepts")
	fs.StringVar(&o.handlers.CABundleFile, "ca-bundle-file", installstrategy.APICABundleFile, "CA bundle that signed virt-handler's serving certificate")
	fs.StringVar(&o.handlers.ServerName, "handler-server-name", installstrategy.HandlerServerName, "name in virt-handler's serving certificate")
}

func run(o options) error {
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	kube, kv, err := clients(cfg)
	if err != nil {
		return err
	}
	hookKube, hookKV, err := clients(o.webhookConfig(cfg))
	if err != nil {
		return err
	}
	o.handlers.Kube = kube
	srv, err := virtapi.New(virtapi.Config{Kube: kube, Kubevirt: kv, Handlers: &o.handlers, WebhookKube: hookKube, WebhookKubevirt: hookKV})
	if err != nil {
		return err
	}
	if err := webconsole.Check(webconsole.Libraries()); err != nil {
		klog.ErrorS(err, "the web console will not work")
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	stopped, err := srv.Serve(ctx, o.serve)
	if err != nil {
		return err
	}
	<-stopped
	return nil
}

// clients are a Kubernetes and a kubevirt.io clientset on cfg, each with
// a rate limiter of its own (cfg sets none).
func clients(cfg *rest.Config) (kubernetes.Interface, versioned.Interface, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	kv, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return kube, kv, nil
}

// restConfig is virt-api's client configuration: in-cluster or from
// --kubeconfig, with its user agent and the --qps and --burst rate limit.
func (o options) restConfig() (*rest.Config, error) {
	return restconfig.Load(o.kubeconfig, "vmkit-virt-api", float32(o.qps), o.burst)
}

// webhookConfig is cfg for the admission webhooks' clients: the same
// identity with the --webhook-qps and --webhook-burst rate limit.
func (o options) webhookConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.UserAgent = "vmkit-virt-api-webhooks"
	out.QPS, out.Burst = float32(o.webhookQPS), o.webhookBurst
	return out
}
