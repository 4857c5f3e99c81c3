// Command density measures the controller pipeline at scale against a real
// control plane: etcd, kube-apiserver and kube-scheduler from
// hack/setup-k8s.sh, fake nodes run by KWOK, and the virt-controller binary as
// its own process. It creates N VirtualMachines with runStrategy Always,
// waits until every VirtualMachineInstance is Scheduled, and reports the
// wall time, the create-to-Scheduled latency, the API writes the controllers
// made per VM (from kube-apiserver's apiserver_request_total), and the
// controller's CPU seconds and peak RSS. With -vmirs it creates one
// VirtualMachineInstanceReplicaSet of N replicas instead, and reports the
// same per VMI (the latency from the replica set's creation).
//
// Usage (make density runs it with the defaults; DENSITY_VMIRS=1 the replica set):
//
//	go run ./hack/density -vms 1000 -nodes 100
//	go run ./hack/density -vms 1000 -nodes 100 -vmirs
//
// Environment: DENSITY_CONTROLLER_ENV adds variables to the controller's
// environment (e.g. "GOGC=50"); DENSITY_CONTROLLER_ARGS adds flags (e.g.
// "-v=6", which logs every request the controller makes); DENSITY_SMAPS=1 saves the idle controller's
// /proc/<pid>/smaps to _output/density/smaps-idle.txt; DENSITY_PROFILE=1 runs
// the controller with --profiling (as deployed it runs without, and samples
// no allocations) and saves its heap profile and MemStats to
// _output/density/heap.{pprof,txt}, and its CPU profile of the whole run,
// from the first create to the last VMI Scheduled, as consecutive 30-second
// profiles _output/density/cpu-NNN.pprof (`go tool pprof -top` merges them). The controller's log is kept as
// _output/density/virt-controller.log.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const ns = "density"

func main() {
	vms := flag.Int("vms", 100, "number of VirtualMachines to create")
	nodes := flag.Int("nodes", 100, "number of KWOK fake nodes")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	replicaSet := flag.Bool("vmirs", false, "create one VirtualMachineInstanceReplicaSet of -vms replicas instead of -vms VirtualMachines")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *vms, *nodes, *replicaSet); err != nil {
		fmt.Fprintln(os.Stderr, "density:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, nVMs, nNodes int, replicaSet bool) error {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "_output", "bin")
	kwok := filepath.Join(bin, "kwok")
	if _, err := os.Stat(kwok); err != nil {
		return fmt.Errorf("kwok not found at %s: run `make density`, which installs it (GOBIN=_output/bin go install sigs.k8s.io/kwok/cmd/kwok@v0.7.0)", kwok)
	}
	controller := filepath.Join(bin, "virt-controller")
	build := exec.CommandContext(ctx, "go", "build", "-o", controller, "./cmd/virt-controller")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building virt-controller: %w", err)
	}

	all, err := crds.All()
	if err != nil {
		return err
	}
	env, err := testenv.Launch(ctx, testenv.Options{CRDs: all, WithScheduler: true, WithControllerManager: true})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	client, err := versioned.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	if err := prepare(ctx, env, nNodes); err != nil {
		return err
	}
	go heartbeats(ctx, env, nNodes)
	kw, err := start(env.Dir, "kwok", nil, kwok, "--kubeconfig="+env.KubeconfigPath, "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--cidr=10.244.0.1/16", "--node-ip=10.0.0.1",
		"--server-address=127.0.0.1:0")
	if err != nil {
		return err
	}
	defer kw.stop()
	httpAddr, err := freeAddr()
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig=" + env.KubeconfigPath, "--launcher-image=vmkit/virt-launcher:density",
		"--use-emulation", "--leader-elect=false", "--metrics-address=" + httpAddr}
	profile := os.Getenv("DENSITY_PROFILE") != ""
	if profile {
		args = append(args, "--profiling")
	}
	args = append(args, strings.Fields(os.Getenv("DENSITY_CONTROLLER_ARGS"))...)
	vc, err := start(env.Dir, "virt-controller", strings.Fields(os.Getenv("DENSITY_CONTROLLER_ENV")), controller, args...)
	if err != nil {
		return err
	}
	defer vc.stop()
	// The controller's log outlives the run directory, for what it printed
	// (e.g. GODEBUG=gctrace=1 through DENSITY_CONTROLLER_ENV).
	defer func() {
		b, err := os.ReadFile(filepath.Join(env.Dir, "virt-controller.log"))
		if err == nil {
			err = os.MkdirAll(filepath.Join(root, "_output", "density"), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(root, "_output", "density", "virt-controller.log"), b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "density: keeping the controller's log: %v\n", err)
		}
	}()
	if err := waitNodesReady(ctx, env, nNodes); err != nil {
		return err
	}

	before, err := requestCounts(ctx, env)
	if err != nil {
		return err
	}
	cpuBefore, _ := cpuSeconds(vc.cmd.Process.Pid)
	rssIdle, _ := procStatusKiB(vc.cmd.Process.Pid, "VmRSS")
	rssIdleFile, _ := procStatusKiB(vc.cmd.Process.Pid, "RssFile")
	if os.Getenv("DENSITY_SMAPS") != "" {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", vc.cmd.Process.Pid)); err == nil {
			_ = os.WriteFile(filepath.Join(root, "_output", "density", "smaps-idle.txt"), b, 0o644)
		}
	}
	cpuProfiles, stopCPU := new([]string), func() {}
	if profile {
		cpuProfiles, stopCPU = saveCPUProfiles(ctx, httpAddr, env.AdminToken, filepath.Join(root, "_output", "density"))
	}
	began := time.Now()
	create, what := createVMs, "VMs"
	if replicaSet {
		create, what = createReplicaSet, "VMIs of one VirtualMachineInstanceReplicaSet"
	}
	if err := create(ctx, client, nVMs); err != nil {
		return err
	}
	created := time.Since(began)
	latencies, err := waitScheduled(ctx, client, nVMs)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, diagnose(env))
	}
	wall := time.Since(began)
	stopCPU()
	time.Sleep(2 * time.Second) // let the last status writes land before counting
	after, err := requestCounts(ctx, env)
	if err != nil {
		return err
	}
	cpuAfter, _ := cpuSeconds(vc.cmd.Process.Pid)
	rss, _ := procStatusKiB(vc.cmd.Process.Pid, "VmHWM")
	var heapProfile string
	if profile {
		heapProfile = filepath.Join(root, "_output", "density", "heap.pprof")
		if err := saveHeapProfile(ctx, httpAddr, env.AdminToken, heapProfile); err != nil {
			fmt.Fprintf(os.Stderr, "density: no heap profile: %v\n", err)
			heapProfile = ""
		}
	}

	w := writes(before, after)
	perVM := func(n float64) string { return fmt.Sprintf("%.2f", n/float64(nVMs)) }
	slices.Sort(latencies)
	fmt.Printf("density: %d %s on %d KWOK nodes\n", nVMs, what, nNodes)
	fmt.Printf("| metric | value |\n|---|---|\n")
	fmt.Printf("| %s created (harness) in | %v |\n", what, created.Round(time.Millisecond))
	fmt.Printf("| all VMIs Scheduled after | %v |\n", wall.Round(time.Millisecond))
	fmt.Printf("| VMIs Scheduled per second | %.1f |\n", float64(nVMs)/wall.Seconds())
	fmt.Printf("| VM (or replica set) created→VMI Scheduled p50 / p99 | %v / %v |\n", pct(latencies, 50), pct(latencies, 99))
	fmt.Printf("| controller writes per VMI (total) | %s |\n", perVM(w.total()))
	fmt.Printf("| — VMI create / update / status / patch | %s / %s / %s / %s |\n", perVM(w.vmiCreate), perVM(w.vmiUpdate), perVM(w.vmiStatus), perVM(w.vmiPatch))
	fmt.Printf("| — pod create | %s |\n", perVM(w.podCreate))
	fmt.Printf("| — VM status / update | %s / %s |\n", perVM(w.vmStatus), perVM(w.vmUpdate))
	fmt.Printf("| — replica set status | %s |\n", perVM(w.rsStatus))
	fmt.Printf("| — of which refused as conflicts (409) | %s |\n", perVM(w.conflicts))
	fmt.Printf("| controller CPU seconds | %.2f |\n", cpuAfter-cpuBefore)
	fmt.Printf("| controller peak RSS | %d MiB |\n", rss/1024)
	fmt.Printf("| controller RSS before the VMs (caches synced, idle) | %d MiB (%d MiB of it the binary's pages) |\n", rssIdle/1024, rssIdleFile/1024)
	if heapProfile != "" {
		fmt.Printf("\ncontroller heap profile: go tool pprof -sample_index=inuse_space -top %s\n", heapProfile)
	}
	if len(*cpuProfiles) > 0 {
		fmt.Printf("controller CPU profile of the run: go tool pprof -top %s\n", strings.Join(*cpuProfiles, " "))
	}
	return nil
}

// prepare makes the namespace, its default ServiceAccount and the fake
// nodes KWOK keeps Ready (kube-controller-manager lifts their not-ready taint).
func prepare(ctx context.Context, env *testenv.Env, nNodes int) error {
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The controller manager creates the default ServiceAccount too; whoever is first wins.
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for i := range nNodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("kwok-node-%d", i),
				Labels: map[string]string{v1.NodeSchedulable: "true", "type": "kwok", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
				// A fresh virt-handler heartbeat, renewed every minute as
				// virt-handler does (heartbeats): the node controller marks a
				// node whose heartbeat is older than 5 minutes unresponsive.
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", v1.VirtHandlerHeartbeat: time.Now().UTC().Format(time.RFC3339)},
			},
			// What a node running vmkit's node agent advertises, device plugins included.
			Status: corev1.NodeStatus{Allocatable: nodeResources(), Capacity: nodeResources()},
		}
		if _, err := env.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// heartbeats renews the fake nodes' virt-handler heartbeats every minute
// until ctx ends, as virt-handler does on a real node.
func heartbeats(ctx context.Context, env *testenv.Env, nNodes int) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Minute):
		}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1.VirtHandlerHeartbeat, time.Now().UTC().Format(time.RFC3339))
		for i := range nNodes {
			if _, err := env.Kube.CoreV1().Nodes().Patch(ctx, fmt.Sprintf("kwok-node-%d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "density: renewing a heartbeat:", err)
			}
		}
	}
}

func nodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
		v1.KVMDevice: resource.MustParse("1000"), v1.TunDevice: resource.MustParse("1000"), v1.VhostNetDevice: resource.MustParse("1000"),
	}
}

func waitNodesReady(ctx context.Context, env *testenv.Env, n int) error {
	for ctx.Err() == nil {
		nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err == nil {
			ready := 0
			for _, node := range nodes.Items {
				for _, c := range node.Status.Conditions {
					// Ready, and the controller manager has lifted the not-ready taint.
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && len(node.Spec.Taints) == 0 {
						ready++
					}
				}
			}
			if ready == n {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("KWOK nodes not Ready: %w", ctx.Err())
}

func createVMs(ctx context.Context, client versioned.Interface, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := client.KubevirtV1().VirtualMachines(ns).Create(ctx, vm(i), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func vm(i int) *v1.VirtualMachine {
	name := fmt.Sprintf("vm-%05d", i)
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: v1.RunStrategyPtr(v1.RunStrategyAlways),
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				Spec: v1.VirtualMachineInstanceSpec{
					Domain: v1.DomainSpec{
						Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
						Devices:   v1.Devices{Disks: []v1.Disk{{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}}},
					},
					Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "quay.io/kubevirt/cirros-container-disk-demo"}}}},
				},
			},
		},
	}
}

// createReplicaSet creates one VirtualMachineInstanceReplicaSet of n
// replicas of vm's template.
func createReplicaSet(ctx context.Context, client versioned.Interface, n int) error {
	tmpl := vm(0).Spec.Template
	tmpl.ObjectMeta.Labels = map[string]string{"density": "vmirs"}
	replicas := int32(n)
	_, err := client.KubevirtV1().VirtualMachineInstanceReplicaSets(ns).Create(ctx, &v1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "density", Namespace: ns},
		Spec: v1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.ObjectMeta.Labels},
			Template: tmpl,
		},
	}, metav1.CreateOptions{})
	return err
}

// waitScheduled watches the VMIs until n are Scheduled and returns, for
// each, the time from the creation of its VM (or of the replica set that
// owns it) to Scheduled (whole seconds: the API's timestamps). It lists
// once and then watches, as a controller does: listing 8,000 VMIs twice a
// second kept kube-apiserver busy serializing them, and the harness, not
// the controllers, set the pace.
func waitScheduled(ctx context.Context, client versioned.Interface, n int) ([]time.Duration, error) {
	vms, err := client.KubevirtV1().VirtualMachines(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	createdAt := map[string]time.Time{}
	for _, vm := range vms.Items {
		createdAt[vm.Name] = vm.CreationTimestamp.Time
	}
	sets, err := client.KubevirtV1().VirtualMachineInstanceReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, rs := range sets.Items {
		createdAt["rs/"+string(rs.UID)] = rs.CreationTimestamp.Time
	}
	var (
		mu        sync.Mutex
		scheduled = map[string]time.Duration{}
		done      = make(chan struct{})
	)
	note := func(obj any) {
		vmi, ok := obj.(*v1.VirtualMachineInstance)
		if !ok {
			return
		}
		for _, t := range vmi.Status.PhaseTransitionTimestamps {
			if t.Phase != v1.Scheduled {
				continue
			}
			created, ok := createdAt[vmi.Name]
			if ref := metav1.GetControllerOf(vmi); ref != nil && ref.Kind == "VirtualMachineInstanceReplicaSet" {
				created, ok = createdAt["rs/"+string(ref.UID)]
			}
			if !ok {
				continue
			}
			mu.Lock()
			if _, seen := scheduled[vmi.Name]; !seen {
				scheduled[vmi.Name] = t.PhaseTransitionTimestamp.Sub(created)
				if len(scheduled) == n {
					close(done)
				}
			}
			mu.Unlock()
		}
	}
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(ns))
	informer := factory.Kubevirt().V1().VirtualMachineInstances().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, obj any) { note(obj) }}); err != nil {
		return nil, err
	}
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	factory.Start(watchCtx.Done())
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		got := len(scheduled)
		mu.Unlock()
		return nil, fmt.Errorf("VMIs not all Scheduled (%d of %d): %w", got, n, ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	lat := make([]time.Duration, 0, len(scheduled))
	for _, d := range scheduled {
		lat = append(lat, d)
	}
	return lat, nil
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, len(d)*p/100)].Round(10 * time.Millisecond)
}

type writeCounts struct {
	vmiCreate, vmiUpdate, vmiStatus, vmiPatch, podCreate, vmStatus, vmUpdate, rsStatus float64
	// conflicts are writes (counted above) the API server refused with 409.
	conflicts float64
}

func (w writeCounts) total() float64 {
	return w.vmiCreate + w.vmiUpdate + w.vmiStatus + w.vmiPatch + w.podCreate + w.vmStatus + w.vmUpdate + w.rsStatus
}

type requestKey struct{ verb, resource, subresource, code string }

func writes(before, after map[requestKey]float64) writeCounts {
	d := func(verb, res, sub string) float64 {
		k := requestKey{verb, res, sub, ""}
		return after[k] - before[k]
	}
	conflicts := 0.0
	for k, v := range after {
		if k.code == "409" && (k.resource == "virtualmachineinstances" || k.resource == "virtualmachines" || k.resource == "virtualmachineinstancereplicasets" || k.resource == "pods") && k.verb != "POST" {
			conflicts += v - before[k]
		}
	}
	return writeCounts{
		vmiCreate: d("POST", "virtualmachineinstances", ""),
		vmiUpdate: d("PUT", "virtualmachineinstances", ""),
		vmiStatus: d("PUT", "virtualmachineinstances", "status"),
		vmiPatch:  d("PATCH", "virtualmachineinstances", "") + d("PATCH", "virtualmachineinstances", "status"),
		podCreate: d("POST", "pods", ""),
		vmStatus:  d("PUT", "virtualmachines", "status") + d("PATCH", "virtualmachines", "status"),
		vmUpdate:  d("PUT", "virtualmachines", "") + d("PATCH", "virtualmachines", ""),
		rsStatus:  d("PUT", "virtualmachineinstancereplicasets", "status") + d("PATCH", "virtualmachineinstancereplicasets", "status"),
		conflicts: conflicts,
	}
}

// requestCounts reads apiserver_request_total from kube-apiserver.
func requestCounts(ctx context.Context, env *testenv.Env) (map[requestKey]float64, error) {
	raw, err := env.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		return nil, err
	}
	out := map[requestKey]float64{}
	fam, ok := families["apiserver_request_total"]
	if !ok {
		return nil, errors.New("kube-apiserver has no apiserver_request_total")
	}
	for _, m := range fam.GetMetric() {
		k := requestKey{label(m, "verb"), label(m, "resource"), label(m, "subresource"), ""}
		out[k] += m.GetCounter().GetValue()
		if code := label(m, "code"); code == "409" {
			k.code = code
			out[k] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// cpuSeconds is the user+system CPU time of a process.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// procStatusKiB reads a KiB field of /proc/<pid>/status (VmHWM: peak resident
// set size; VmRSS: resident set size now).
func procStatusKiB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			return strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// diagnose summarizes pod phases and the last log lines of KWOK and the
// controller, for a run that did not finish.
func diagnose(env *testenv.Env) string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		phases := map[string]int{}
		for _, p := range pods.Items {
			phases[fmt.Sprintf("%s/node=%t", p.Status.Phase, p.Spec.NodeName != "")]++
		}
		fmt.Fprintf(&b, "pods: %v\n", phases)
		if len(pods.Items) > 0 {
			for _, c := range pods.Items[0].Status.Conditions {
				fmt.Fprintf(&b, "first pod: %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	for _, name := range []string{"kwok", "virt-controller"} {
		data, _ := os.ReadFile(filepath.Join(env.Dir, name+".log"))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "--- %s.log (last lines)\n%s\n", name, strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return b.String()
}

type proc struct{ cmd *exec.Cmd }

// freeAddr is a loopback address with a port free right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// saveHeapProfile writes the controller's heap profile (in-use and allocated
// memory by call site) to path, for `go tool pprof`.
// saveHeapProfile reads the controller's heap profile as the admin: the
// controller serves its profiles over HTTPS (a self-signed certificate) to
// users the API server allows only.
func saveHeapProfile(ctx context.Context, addr, token, path string) error {
	if err := saveURL(ctx, "https://"+addr+"/debug/pprof/heap", token, path); err != nil {
		return err
	}
	// The text form ends with the runtime's MemStats: how much of the RSS is
	// heap, stacks and the runtime's own structures.
	return saveURL(ctx, "https://"+addr+"/debug/pprof/heap?debug=1", token, strings.TrimSuffix(path, ".pprof")+".txt")
}

// cpuProfileSlice is the length of each CPU profile saveCPUProfiles takes.
const cpuProfileSlice = 30 * time.Second

// saveCPUProfiles takes the controller's CPU profile in consecutive slices
// of cpuProfileSlice into dir/cpu-NNN.pprof until stop is called (which
// waits for the slice under way), and lists the files saved.
func saveCPUProfiles(ctx context.Context, addr, token, dir string) (*[]string, func()) {
	var saved []string
	old, _ := filepath.Glob(filepath.Join(dir, "cpu-*.pprof"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			path := filepath.Join(dir, fmt.Sprintf("cpu-%03d.pprof", i))
			url := fmt.Sprintf("https://%s/debug/pprof/profile?seconds=%d", addr, int(cpuProfileSlice.Seconds()))
			if err := saveURL(ctx, url, token, path); err != nil {
				fmt.Fprintf(os.Stderr, "density: CPU profile %d: %v\n", i, err)
				return
			}
			saved = append(saved, path)
		}
	}()
	return &saved, func() { close(done); <-stopped }
}

func saveURL(ctx context.Context, url, token, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// start runs path with args, its output in <dir>/<name>.log, with env added
// to this process's environment.
func start(dir, name string, env []string, path string, args ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return &proc{cmd: cmd}, nil
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}
