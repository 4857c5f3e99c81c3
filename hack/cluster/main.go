// Command cluster is what `make demo` and `make demo-down` run: vmkit on a
// real cluster of this machine (internal/cluster: one node, or -nodes of
// them), installed by its operator, with a VM that boots.
//
//	cluster up   starts the cluster in the background (if it is not running),
//	             installs the operator, which installs vmkit, and the
//	             storage (a default StorageClass and block volumes), applies
//	             examples/vm-tiny.yaml with kubectl, waits with `kubectl wait`
//	             for the VM to be Ready, prints the guest's console lines,
//	             then applies examples/vm-net.yaml (masquerade on the pod
//	             network) and GETs its guest's web page at the VMI's IPs, and
//	             leaves everything running with a KUBECONFIG to reach it.
//	             With -host-network, vmkit's components run in host-network
//	             mode instead of on the pod network. With -nodes 2 the
//	             cluster has two nodes, localhost and localhost-2 (each its
//	             own containerd and kubelet, see docs/cluster.md), and up
//	             also waits until both are schedulable.
//	cluster down stops the cluster and everything it started.
//	cluster serve (internal) runs the cluster until SIGTERM.
//
// State lives in -state (default _output/cluster): serve.pid, serve.log, the
// kubeconfig and the run directory of the control plane, whose logs a
// failing step prints.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/registry"
	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const guestMarker = "GUEST-BOOTED"

// Files in the state directory.
const (
	pidFile        = "serve.pid"
	logFile        = "serve.log"
	kubeconfigFile = "kubeconfig"
	runDirFile     = "rundir"
	readyFile      = "ready"
	nodesFile      = "nodes"
)

func main() {
	root, _ := testenv.ModuleRoot()
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	state := fs.String("state", filepath.Join(root, "_output", "cluster"), "state directory")
	manifest := fs.String("manifest", filepath.Join(root, "examples", "vm-tiny.yaml"), "VirtualMachine manifest `up` applies")
	netManifest := fs.String("net-manifest", filepath.Join(root, "examples", "vm-net.yaml"), "VirtualMachine vm-net on the pod network `up` applies next")
	kubectl := fs.String("kubectl", filepath.Join(root, "_output", "k8s-bin", "kubectl"), "kubectl binary")
	hostNetwork := fs.Bool("host-network", false, "install vmkit's components in host-network mode instead of on the pod network")
	nodes := fs.Int("nodes", 1, fmt.Sprintf("number of nodes (1 to %d), each its own containerd and kubelet", testenv.MaxNodes))
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cluster up|down|serve [flags]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	_ = fs.Parse(os.Args[2:])
	var err error
	switch cmd {
	case "up":
		err = up(*state, *manifest, *netManifest, *kubectl, cluster.Options{HostNetwork: *hostNetwork, Nodes: *nodes})
	case "down":
		err = down(*state)
	case "serve":
		err = serve(*state, *nodes)
	default:
		err = fmt.Errorf("unknown command %q: up, down or serve", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

// serve runs the control plane and the nodes until SIGTERM or SIGINT.
func serve(state string, nodes int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	opts, err := cluster.NodeOptions(cluster.Options{Nodes: nodes})
	if err != nil {
		return err
	}
	env, err := testenv.Launch(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping:", err)
		}
		for _, f := range []string{readyFile, kubeconfigFile, runDirFile, nodesFile, pidFile} {
			_ = os.Remove(filepath.Join(state, f))
		}
		fmt.Println("cluster stopped")
	}()
	kc, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, kubeconfigFile), kc, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, runDirFile), []byte(env.Dir), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, nodesFile), []byte(strconv.Itoa(len(env.Nodes))), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, readyFile), nil, 0o644); err != nil {
		return err
	}
	var names []string
	for _, n := range env.Nodes {
		names = append(names, n.Name)
	}
	fmt.Printf("cluster running: API server %s, nodes %s, registry %s, run directory %s\n", env.Config.Host, strings.Join(names, ", "), env.Registry, env.Dir)
	<-ctx.Done()
	return nil
}

// running returns the pid of a live serve process, or 0.
func running(state string) int {
	data, err := os.ReadFile(filepath.Join(state, pidFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// start runs `cluster serve` in its own session, detached from this one,
// and waits until it is ready.
func start(state string, nodes int) error {
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(state, readyFile))
	log, err := os.Create(filepath.Join(state, logFile))
	if err != nil {
		return err
	}
	defer log.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "serve", "-state", state, "-nodes", strconv.Itoa(nodes))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, pidFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(4 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(state, readyFile)); err == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the cluster did not start (%v); %s:\n%s", err, filepath.Join(state, logFile), tailFile(filepath.Join(state, logFile), 30))
		case <-deadline:
			return fmt.Errorf("the cluster was not ready after 4 minutes; see %s", filepath.Join(state, logFile))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// demo is one run of `up`: its steps and their times.
type demo struct {
	state, kubectl string
	c              *cluster.Cluster
	began          time.Time
}

// step runs f, printing its name and time; on failure it prints the step
// and the logs of the components that may be at fault.
func (d *demo) step(name string, f func(ctx context.Context) error) error {
	fmt.Printf("==> %s\n", name)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := f(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "demo FAILED at step %q after %v: %v\n", name, time.Since(began).Round(time.Millisecond), err)
		d.diagnose()
		return fmt.Errorf("step %q failed", name)
	}
	fmt.Printf("    done in %v (%v since start)\n", time.Since(began).Round(time.Millisecond), time.Since(d.began).Round(time.Millisecond))
	return nil
}

// guestHTTP GETs vm-net's page at each of its VMI's addresses (IPv4 and
// IPv6 on the dual-stack pod network) until the guest has answered on all.
func (d *demo) guestHTTP(ctx context.Context) error {
	client := &http.Client{Timeout: 3 * time.Second}
	last := "no IP in status.interfaces yet"
	answered := map[string]bool{}
	for {
		vmi, err := d.c.Client.KubevirtV1().VirtualMachineInstances("default").Get(ctx, "vm-net", metav1.GetOptions{})
		if err == nil && len(vmi.Status.Interfaces) > 0 && len(vmi.Status.Interfaces[0].IPs) > 0 {
			ips := vmi.Status.Interfaces[0].IPs
			for _, ip := range ips {
				if answered[ip] {
					continue
				}
				url := "http://" + net.JoinHostPort(ip, "80") + "/"
				resp, err := client.Get(url)
				if err != nil {
					last = err.Error()
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = fmt.Sprintf("GET %s: %s %q", url, resp.Status, body)
				if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "vmkit guest vm-net") {
					answered[ip] = true
					fmt.Printf("    | %s: %s", url, body)
				}
			}
			if len(answered) == len(ips) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %s)", ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// diagnose prints the last log lines of vmkit's pods and of the node's and
// control plane's processes.
func (d *demo) diagnose() {
	if d.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		fmt.Fprint(os.Stderr, d.c.PodLogs(ctx, cluster.Namespace, v1.AppLabel, 30))
		fmt.Fprint(os.Stderr, d.c.PodLogs(ctx, "default", v1.AppLabel, 30))
	}
	if dir, err := os.ReadFile(filepath.Join(d.state, runDirFile)); err == nil {
		names := []string{"kubelet", "containerd"}
		if d.c != nil {
			for i := 1; i < d.c.Nodes; i++ {
				names = append(names, "kubelet-"+testenv.NodeNameAt(i), "containerd-"+testenv.NodeNameAt(i))
			}
		}
		for _, name := range append(names, "kube-scheduler", "kube-controller-manager", "kube-apiserver") {
			path := filepath.Join(string(dir), name+".log")
			fmt.Fprintf(os.Stderr, "==> %s <==\n%s\n", path, tailFile(path, 15))
		}
	}
}

func up(state, manifest, netManifest, kubectl string, opts cluster.Options) error {
	d := &demo{state: state, kubectl: kubectl, began: time.Now()}
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	what := "containerd, kubelet"
	if opts.Nodes > 1 {
		what = fmt.Sprintf("%d nodes (containerd, kubelet each)", opts.Nodes)
	}
	if pid := running(state); pid != 0 {
		data, _ := os.ReadFile(filepath.Join(state, nodesFile))
		if n, _ := strconv.Atoi(strings.TrimSpace(string(data))); n != opts.Nodes {
			return fmt.Errorf("a cluster of %s nodes runs (pid %d); %d asked for: stop it first (make demo-down)", strings.TrimSpace(string(data)), pid, opts.Nodes)
		}
		fmt.Printf("==> cluster already running (pid %d); reusing it\n", pid)
	} else if err := d.step("start etcd, kube-apiserver, controller-manager, scheduler, "+what+"; import images", func(context.Context) error {
		return start(state, opts.Nodes)
	}); err != nil {
		return err
	}
	kubeconfig := filepath.Join(state, kubeconfigFile)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	if d.c, err = cluster.Connect(cfg, opts); err != nil {
		return err
	}
	steps := []struct {
		name string
		f    func(ctx context.Context) error
	}{
		{"apply the operator's manifest and a KubeVirt CR (" + accelerationNote() + ")", d.c.InstallOperator},
		{"install the storage: local-path-provisioner (default StorageClass " + cluster.DefaultStorageClass + ") and the node's block volumes (" + cluster.BlockStorageClass + ")", func(ctx context.Context) error {
			runDir, err := os.ReadFile(filepath.Join(state, runDirFile))
			if err != nil {
				return err
			}
			dir := strings.TrimSpace(string(runDir))
			o := cluster.StorageOptions{Dir: testenv.NodeStorageDir(dir), OtherNodeDirs: map[string]string{}}
			for i := 1; i < opts.Nodes; i++ {
				o.OtherNodeDirs[testenv.NodeNameAt(i)] = testenv.NodeStorageDirAt(dir, i)
			}
			return d.c.InstallStorage(ctx, o)
		}},
		{"operator installs vmkit: virt-controller and virt-handler running (KubeVirt Available)", d.c.WaitAvailable},
		{"every node schedulable (its virt-handler labels it kubevirt.io/schedulable=true)", d.c.WaitNodesSchedulable},
		{"kubectl get nodes", func(ctx context.Context) error {
			return d.run(ctx, kubeconfig, "get", "nodes", "-o", "wide", "-L", v1.NodeSchedulable)
		}},
		{"the storage provisioner is ready", d.c.WaitStorage},
		{"kubectl apply -f " + manifest, func(ctx context.Context) error {
			return d.run(ctx, kubeconfig, "apply", "-f", manifest)
		}},
		{"kubectl wait vm/vm-tiny --for=condition=Ready", func(ctx context.Context) error {
			return d.run(ctx, kubeconfig, "wait", "vm/vm-tiny", "--for=condition=Ready", "--timeout=4m")
		}},
		{"kubectl get vm,vmi,pods", func(ctx context.Context) error {
			return d.run(ctx, kubeconfig, "get", "vm,vmi,pods", "-o", "wide")
		}},
		{"the guest's serial console through virt-handler's console endpoint", func(ctx context.Context) error {
			lines, err := d.c.Console(ctx, "default", "vm-tiny", guestMarker)
			for _, l := range lines {
				fmt.Println("    | " + l)
			}
			return err
		}},
		{"kubectl apply -f " + netManifest + " (masquerade on the pod network)", func(ctx context.Context) error {
			return d.run(ctx, kubeconfig, "apply", "-f", netManifest)
		}},
		{"kubectl wait vm/vm-net --for=condition=Ready", func(ctx context.Context) error {
			return d.run(ctx, kubeconfig, "wait", "vm/vm-net", "--for=condition=Ready", "--timeout=4m")
		}},
		{"kubectl get vmi vm-net (its IP is the launcher pod's)", func(ctx context.Context) error {
			return d.run(ctx, kubeconfig, "get", "vmi", "vm-net", "-o", "wide")
		}},
		{"GET http://<vm-net's IPs>/: the guest answers on the pod network, on IPv4 and IPv6", d.guestHTTP},
	}
	for _, s := range steps {
		if err := d.step(s.name, s.f); err != nil {
			return err
		}
	}
	fmt.Printf(`
vmkit runs on this machine (%v). To reach it:
    export KUBECONFIG=%s
    %s get vm,vmi,pods -A
registry: %s
    The nodes pull every image from this OCI registry (plain HTTP), for
    docker.io/..., quay.io/... and the other registry names too. Push a disk
    image as a container disk and boot it (docs/images.md):
    go run ./cmd/vmctl containerdisk push disk.qcow2 %s/my/disk:v1
    then use containerDisk.image: %s/my/disk:v1 in a VM.
Stop everything with: make demo-down
`, time.Since(d.began).Round(time.Millisecond), kubeconfig, kubectl, registry.DefaultAddr, registry.DefaultAddr, registry.DefaultAddr)
	return nil
}

// run runs kubectl with the cluster's kubeconfig, its output indented.
func (d *demo) run(ctx context.Context, kubeconfig string, args ...string) error {
	if _, err := os.Stat(d.kubectl); err != nil {
		return fmt.Errorf("kubectl missing (%v): hack/demo.sh builds it with hack/setup-k8s.sh", err)
	}
	cmd := exec.CommandContext(ctx, d.kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("    " + l)
	}
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// down stops a running serve process and waits for it to finish cleaning up.
func down(state string) error {
	pid := running(state)
	if pid == 0 {
		fmt.Println("no cluster running")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	for i := 0; i < 600; i++ {
		if syscall.Kill(pid, 0) != nil {
			fmt.Printf("cluster stopped (pid %d)\n", pid)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("the cluster did not stop within a minute; see " + filepath.Join(state, logFile))
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > 64<<10 {
		_, _ = f.Seek(-64<<10, io.SeekEnd)
	}
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// accelerationNote says how the cluster's guests will run: KVM where this
// machine's /dev/kvm works, else TCG (the KubeVirt CR's useEmulation).
func accelerationNote() string {
	if ok, why := cluster.KVM(); !ok {
		return "useEmulation: true, guests run under QEMU's TCG: " + why
	}
	return "useEmulation: false, guests run on KVM"
}
