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
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/virtapi"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
)

func main() {
	var (
		kubeconfig string
		serve      virtapi.ServeOptions
		handlers   virtapi.HandlerPods
	)
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	flag.StringVar(&serve.BindAddress, "bind-address", "0.0.0.0", "address to listen on")
	flag.IntVar(&serve.Port, "port", installstrategy.APIPort, "HTTPS port")
	flag.StringVar(&serve.CertFile, "tls-cert-file", installstrategy.APICertFile, "serving certificate (reloaded when it changes)")
	flag.StringVar(&serve.KeyFile, "tls-private-key-file", installstrategy.APIKeyFile, "serving certificate's key")
	var gates string
	flag.BoolVar(&serve.Admission.Emulation, "use-emulation", false, "validate admitted VMIs for QEMU's TCG emulator (the KubeVirt CR's useEmulation)")
	flag.StringVar(&gates, "feature-gates", "", "comma-separated KubeVirt feature gates turned on, e.g. HostDisk (the KubeVirt CR's developerConfiguration.featureGates)")
	flag.StringVar(&handlers.Namespace, "namespace", "kubevirt", "namespace of the virt-handler pods")
	flag.IntVar(&handlers.Port, "handler-port", installstrategy.HandlerConsolePort, "port of virt-handler's REST API")
	flag.StringVar(&handlers.Host, "handler-host", "", "address of every virt-handler (host-network installs); the handler pod's IP when empty")
	flag.StringVar(&handlers.ClientCertDir, "handler-client-cert-dir", installstrategy.APIHandlerClientCertDir, "directory holding tls.crt and tls.key, the client certificate virt-handler accepts")
	flag.StringVar(&handlers.CABundleFile, "ca-bundle-file", installstrategy.APICABundleFile, "CA bundle that signed virt-handler's serving certificate")
	flag.StringVar(&handlers.ServerName, "handler-server-name", installstrategy.HandlerServerName, "name in virt-handler's serving certificate")
	klog.InitFlags(nil)
	flag.Parse()
	serve.Kubeconfig = kubeconfig
	for _, g := range strings.Split(gates, ",") {
		if g = strings.TrimSpace(g); g != "" {
			serve.Admission.FeatureGates = append(serve.Admission.FeatureGates, g)
		}
	}
	if err := run(kubeconfig, serve, &handlers); err != nil {
		klog.ErrorS(err, "virt-api failed")
		os.Exit(1)
	}
}

func run(kubeconfig string, serve virtapi.ServeOptions, handlers *virtapi.HandlerPods) error {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kv, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	handlers.Kube = kube
	srv, err := virtapi.New(virtapi.Config{Kube: kube, Kubevirt: kv, Handlers: handlers})
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	stopped, err := srv.Serve(ctx, serve)
	if err != nil {
		return err
	}
	<-stopped
	return nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}
