// Command virt-handler is the node agent: it runs nodeagent.Agent for one
// node, serves its REST API (nodeagent/restapi: console, VNC, pause,
// unpause, guest info, ...) on --console-server-port and its metrics and
// health on --port.
//
// Both servers use TLS with the given certificate; the REST API also
// requires client certificates signed by --client-ca-file, and /metrics
// answers only users the API server authenticates (a token, or a client
// certificate of the cluster's client CA) and allows get on /metrics
// (internal/delegatedauth). --insecure serves plain HTTP without
// authentication instead, for local use only.
//
// It also advertises devices.kubevirt.io/kvm, tun and vhost-net to the
// kubelet through the device plugin API (nodeagent/deviceplugin), in
// --device-plugins-dir; --device-plugins=false turns that off where no
// kubelet runs.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/delegatedauth"
	"github.com/vmkit/vmkit/internal/restconfig"
	"github.com/vmkit/vmkit/nodeagent"
	"github.com/vmkit/vmkit/nodeagent/deviceplugin"
	"github.com/vmkit/vmkit/nodeagent/restapi"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "virt-handler:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		node, kubeconfig, listen, shareDir, podsDir string
		port, consolePort                           int
		certFile, keyFile, clientCA                 string
		insecure, devicePlugins, checkLauncherPod   bool
		devicePluginsDir, cpuManagerState           string
		seccompDir                                  string
		heartbeat, poll, orphanSweep                time.Duration
		podIP                                       string
		mig                                         migrationFlags
	)
	fs := flag.NewFlagSet("virt-handler", flag.ContinueOnError)
	fs.StringVar(&node, "hostname-override", os.Getenv("NODE_NAME"), "name of this node (default $NODE_NAME, else the host name)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&shareDir, "kubevirt-share-dir", "/var/run/kubevirt", "where launchers sharing this directory have their command sockets (sockets/<vmi uid>/launcher.sock)")
	fs.StringVar(&podsDir, "kubelet-pods-dir", nodeagent.DefaultKubeletPodsDir, "the kubelet's pods directory: launcher pods' command sockets are in <pod uid>/volumes/kubernetes.io~empty-dir/sockets/<vmi uid>/launcher.sock")
	fs.StringVar(&cpuManagerState, "cpu-manager-state", nodeagent.DefaultCPUManagerStateFile, "the kubelet's CPU manager checkpoint: the node is labelled kubevirt.io/cpumanager=true while it names the static policy")
	fs.StringVar(&seccompDir, "seccomp-dir", nodeagent.DefaultSeccompDir, "the kubelet's directory of Localhost seccomp profiles, where the launcher pods' are installed (empty: none)")
	fs.StringVar(&listen, "listen-address", "0.0.0.0", "address the servers listen on")
	fs.IntVar(&port, "port", 8443, "port of /metrics and /healthz (0 disables)")
	fs.IntVar(&consolePort, "console-server-port", 8186, "port of the console, VNC and lifecycle REST API (0 disables)")
	fs.StringVar(&certFile, "tls-cert-file", "", "server certificate (PEM)")
	fs.StringVar(&keyFile, "tls-key-file", "", "server key (PEM)")
	fs.StringVar(&clientCA, "client-ca-file", "", "CA that signs the REST API's client certificates (PEM)")
	fs.BoolVar(&checkLauncherPod, "check-launcher-pod", true, "talk only to a launcher whose process runs in the pod whose sockets volume holds its socket (its cgroup names the pod's UID; needs hostPID); false where launchers are not kubelet pods")
	fs.BoolVar(&insecure, "insecure", false, "serve plain HTTP without authentication (local use only)")
	fs.BoolVar(&devicePlugins, "device-plugins", true, "advertise devices.kubevirt.io/kvm, tun and vhost-net to the kubelet (device plugin API); false where no kubelet runs")
	fs.StringVar(&devicePluginsDir, "device-plugins-dir", deviceplugin.DefaultDir, "the kubelet's device plugins directory (its kubelet.sock and the plugins' sockets)")
	fs.DurationVar(&heartbeat, "heartbeat-interval", time.Minute, "how often the node's heartbeat is written")
	fs.DurationVar(&poll, "poll-interval", time.Second, "how often each VMI's domain is checked")
	fs.DurationVar(&orphanSweep, "orphan-sweep-interval", nodeagent.DefaultOrphanSweepInterval, "how often launchers whose VMI is gone, final or elsewhere are looked for and stopped (always once at start; negative: only then)")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.Var(klogFlags.Lookup("v").Value, "v", "log verbosity")
	// Accepted for compatibility with KubeVirt's DaemonSet; unused.
	fs.StringVar(&podIP, "pod-ip-address", "", "this node agent's IP address: the default --migration-address")
	mig.register(fs)
	fs.Int("max-metric-request", 3, "unused")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		node = h
	}
	if !insecure && (certFile == "" || keyFile == "" || clientCA == "") {
		return errors.New("--tls-cert-file, --tls-key-file and --client-ca-file are required (or --insecure for local use)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// The certificates and the CA bundle are followed as the kubelet
	// rotates the mounted Secrets and ConfigMap: no restart needed.
	var tlsConfig, metricsTLS *tls.Config
	var serving *restapi.ServingTLS
	if !insecure {
		var err error
		serving = &restapi.ServingTLS{CertFile: certFile, KeyFile: keyFile, ClientCAFile: clientCA, ClientName: installstrategy.HandlerClientCommonName}
		if tlsConfig, err = serving.Config(ctx); err != nil {
			return err
		}
		// /metrics asks for a client certificate without requiring one:
		// the API server's client CA verifies it, or a token is presented
		// instead (see the guard below).
		if metricsTLS, err = (restapi.ServingTLS{CertFile: certFile, KeyFile: keyFile}).Config(ctx); err != nil {
			return err
		}
		metricsTLS = delegatedauth.RequestClientCertificates(metricsTLS)
	}
	if seccompDir != "" {
		// Without it, a launcher pod of a passtBinding guest cannot start;
		// every other VMI can: report it and go on.
		if err := nodeagent.InstallSeccompProfiles(seccompDir); err != nil {
			klog.FromContext(ctx).Error(err, "launcher pods of passtBinding guests will not start")
		}
	}
	cfg, err := restconfig.Load(kubeconfig, "", 0, 0)
	if err != nil {
		return fmt.Errorf("API server configuration: %w", err)
	}
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	migration, err := mig.config(ctx, podIP, serving)
	if err != nil {
		return err
	}
	agent, err := nodeagent.New(nodeagent.Config{
		NodeName: node, Client: client, Kube: kube, ShareDir: shareDir, KubeletPodsDir: podsDir,
		CPUManagerStateFile: cpuManagerState,
		HeartbeatInterval:   heartbeat, PollInterval: poll, OrphanSweepInterval: orphanSweep,
		Migration: migration, CheckLauncherPod: checkLauncherPod,
	})
	if err != nil {
		return err
	}

	errc := make(chan error, 4)
	pluginsDone := make(chan struct{})
	if devicePlugins {
		go func() {
			defer close(pluginsDone)
			if err := deviceplugin.Run(ctx, deviceplugin.Config{Dir: devicePluginsDir}); err != nil {
				errc <- fmt.Errorf("device plugins (--device-plugins=false runs without them): %w", err)
				return
			}
			errc <- nil
		}()
	} else {
		close(pluginsDone)
	}
	// The device plugins remove their sockets before virt-handler exits.
	defer func() { stop(); <-pluginsDone }()
	if consolePort != 0 {
		api := tlsConfig
		go func() {
			errc <- serve(ctx, net.JoinHostPort(listen, strconv.Itoa(consolePort)), restapi.Handler(agent), api)
		}()
	}
	if port != 0 {
		// /metrics lists the node's VMIs (namespace, name, pod): only to
		// users the API server authenticates and allows get on it, as
		// kube-controller-manager's (#35 N15). /healthz stays open for
		// probes; --insecure serves both to anyone.
		metrics := promhttp.HandlerFor(agent.Registry(), promhttp.HandlerOpts{})
		if !insecure {
			guard, err := delegatedauth.New(ctx, delegatedauth.Config{Client: cfg})
			if err != nil {
				return err
			}
			metrics = guard.Handler(metrics)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics)
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		go func() { errc <- serve(ctx, net.JoinHostPort(listen, strconv.Itoa(port)), mux, metricsTLS) }()
	}
	go func() { errc <- agent.Run(ctx) }()
	select {
	case err := <-errc:
		stop()
		return err
	case <-ctx.Done():
		return nil
	}
}

// serve runs an HTTP(S) server on addr until ctx ends.
func serve(ctx context.Context, addr string, h http.Handler, tlsConfig *tls.Config) error {
	srv := &http.Server{Addr: addr, Handler: h, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	var err error
	if tlsConfig != nil {
		err = srv.ListenAndServeTLS("", "")
	} else {
		err = srv.ListenAndServe()
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serving %s: %w", addr, err)
}
