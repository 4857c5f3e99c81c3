// Command virt-controller runs vmkit's VirtualMachine,
// VirtualMachineInstance, VirtualMachineInstanceReplicaSet, node, pool,
// migration, evacuation and disruption-budget controllers (vmcontrol.Manager): flags in, wiring, Run. Everything else
// lives in the packages it imports.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/internal/delegatedauth"
	"github.com/vmkit/vmkit/internal/restconfig"
	"github.com/vmkit/vmkit/podtemplate"
	"github.com/vmkit/vmkit/vmcontrol"
)

type options struct {
	kubeconfig    string
	launcherImage string
	pullPolicy    string
	emulation     bool
	featureGates  string
	cpuRatio      int
	hostNetwork   bool
	qps           float64
	manager       vmcontrol.Options
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	flag.StringVar(&o.launcherImage, "launcher-image", "", "image of the virt-launcher container (required)")
	flag.StringVar(&o.pullPolicy, "image-pull-policy", "IfNotPresent", "pull policy of the launcher image")
	flag.BoolVar(&o.emulation, "use-emulation", false, "run guests under software emulation (QEMU TCG) when nodes have no KVM")
	flag.StringVar(&o.featureGates, "feature-gates", "", "comma-separated KubeVirt feature gates turned on, e.g. HostDisk (the KubeVirt CR's spec.configuration.developerConfiguration.featureGates)")
	flag.IntVar(&o.cpuRatio, "cpu-allocation-ratio", podtemplate.DefaultCPUAllocationRatio, "vCPUs per requested host CPU for guests without a CPU request (the KubeVirt CR's spec.configuration.developerConfiguration.cpuAllocationRatio)")
	flag.BoolVar(&o.hostNetwork, "launcher-host-network", false, "put launcher pods on the node's network (clusters without a pod network)")
	flag.IntVar(&o.manager.VMWorkers, "vm-workers", 3, "concurrent VirtualMachine syncs")
	flag.IntVar(&o.manager.VMIWorkers, "vmi-workers", 10, "concurrent VirtualMachineInstance syncs")
	flag.IntVar(&o.manager.ReplicaSetWorkers, "replicaset-workers", 3, "concurrent VirtualMachineInstanceReplicaSet syncs")
	flag.IntVar(&o.manager.NodeWorkers, "node-workers", 3, "concurrent node syncs (the node controller)")
	flag.IntVar(&o.manager.PoolWorkers, "pool-workers", 3, "concurrent VirtualMachinePool syncs")
	flag.IntVar(&o.manager.MigrationWorkers, "migration-workers", 3, "concurrent VirtualMachineInstanceMigration syncs (the migration controller)")
	flag.IntVar(&o.manager.EvacuationWorkers, "evacuation-workers", 3, "concurrent node syncs of the evacuation controller")
	flag.IntVar(&o.manager.DisruptionBudgetWorkers, "disruption-budget-workers", 3, "concurrent VMI syncs of the disruption-budget controller (PodDisruptionBudgets of VMIs that migrate on eviction)")
	flag.IntVar(&o.manager.ExportWorkers, "export-workers", 3, "concurrent VirtualMachineExport syncs")
	flag.IntVar(&o.manager.SnapshotWorkers, "snapshot-workers", 2, "concurrent syncs of VirtualMachineSnapshots, of VirtualMachineRestores and of VMs' volumeSnapshotStatuses (each)")
	flag.StringVar(&o.manager.Export.Image, "exportserver-image", "", "image of the VirtualMachineExport server pods (vmkit/virt-exportserver); empty: exports are not reconciled")
	flag.StringVar(&o.manager.Export.CASecret, "export-ca-secret", "kubevirt-export-ca", "kubernetes.io/tls Secret, in the leader election namespace, of the CA that signs the export servers' certificates")
	flag.DurationVar(&o.manager.NodeHeartbeatTimeout, "node-heartbeat-timeout", 5*time.Minute, "age of a node agent's heartbeat after which its node is marked unschedulable and the VMIs stranded there fail")
	flag.Float64Var(&o.qps, "qps", 200, "API client queries per second")
	flag.IntVar(&o.manager.Burst, "burst", 400, "API client burst")
	flag.BoolVar(&o.manager.LeaderElection.Enabled, "leader-elect", true, "run the controllers only while holding the leader Lease")
	flag.StringVar(&o.manager.LeaderElection.Namespace, "leader-elect-namespace", "kubevirt", "namespace of the leader Lease")
	flag.StringVar(&o.manager.LeaderElection.Name, "leader-elect-name", "virt-controller", "name of the leader Lease")
	flag.StringVar(&o.manager.HTTPAddr, "metrics-address", ":8080", "address serving /metrics, /healthz and /readyz over HTTPS (a self-signed certificate); /metrics and /debug/pprof/ only to whom the API server authenticates and allows get on the path")
	flag.BoolVar(&o.manager.Profiling, "profiling", false, "serve Go profiles under /debug/pprof/ on the metrics address")
	flag.DurationVar(&o.manager.DiscoveryInterval, "api-discovery-interval", time.Minute, "how often to check whether CDI's DataVolumes, instancetype.kubevirt.io, pool.kubevirt.io, export.kubevirt.io or snapshot.kubevirt.io started or stopped being served (the controllers then restart in-process; negative: only at start)")
	klog.InitFlags(nil)
	flag.Parse()
	if !o.manager.Profiling {
		// Nothing can read heap profiles without --profiling: stop sampling
		// allocations, whose records cost memory for the life of the process.
		runtime.MemProfileRate = 0
	}
	if err := run(o); err != nil {
		klog.ErrorS(err, "virt-controller failed")
		os.Exit(1)
	}
}

func run(o options) error {
	if o.launcherImage == "" {
		return errors.New("--launcher-image is required")
	}
	var err error
	if o.manager.Config, err = restConfig(o.kubeconfig); err != nil {
		return err
	}
	o.manager.QPS = float32(o.qps)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := secureHTTP(ctx, &o.manager); err != nil {
		return err
	}
	// The Manager builds the renderer, looking claims' volume modes up in its informer.
	o.manager.PodTemplate = &podtemplate.Config{
		LauncherImage:      o.launcherImage,
		ImagePullPolicy:    corev1.PullPolicy(o.pullPolicy),
		EmulationAllowed:   o.emulation,
		FeatureGates:       splitList(o.featureGates),
		CPUAllocationRatio: o.cpuRatio,
		HostNetwork:        o.hostNetwork,
	}
	o.manager.Export.ImagePullPolicy = corev1.PullPolicy(o.pullPolicy)
	mgr, err := vmcontrol.NewManager(o.manager)
	if err != nil {
		return err
	}
	klog.InfoS("virt-controller starting", "http", mgr.HTTPAddr(), "leaderElection", o.manager.LeaderElection.Enabled, "emulation", o.emulation, "featureGates", o.manager.PodTemplate.FeatureGates)
	return mgr.Run(ctx)
}

// secureHTTP serves the Manager's HTTP address over TLS with a certificate
// made in memory, and /metrics and /debug/pprof/ only to users the API
// server authenticates and allows get on the path, as
// kube-controller-manager does when given no certificate: /metrics lists
// every VMI's namespace, name, node and pod (#35 N5). Prometheus skips
// verifying the certificate, as it does for kube-controller-manager's and
// KubeVirt's, and presents its service account's token.
func secureHTTP(ctx context.Context, opts *vmcontrol.Options) error {
	if opts.HTTPAddr == "" {
		return nil
	}
	host, _ := os.Hostname()
	tlsConfig, err := delegatedauth.SelfSignedTLS("virt-controller", host, "localhost", "127.0.0.1")
	if err != nil {
		return err
	}
	guard, err := delegatedauth.New(ctx, delegatedauth.Config{Client: opts.Config})
	if err != nil {
		return err
	}
	opts.HTTPTLS, opts.HTTPGuard = tlsConfig, guard.Handler
	return nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	return restconfig.Load(kubeconfig, "", 0, 0)
}
