// Command demo is what `make demo-local` runs (hack/demo-local.sh builds what it needs
// first): it boots a real VM on this machine with vmkit's own parts.
//
// It starts a local control plane (etcd + kube-apiserver from
// hack/setup-k8s.sh) with vmkit's CRDs, registers a Node, runs the VM and
// VMI controllers (vmcontrol.Manager) and the node agent (nodeagent, with
// its REST API on a local port), and lets localnode play the kubelet, which
// runs virt-launcher processes against the node's libvirt
// (hack/setup-libvirt.sh) with the tiny guest (hack/make-guest.sh). It
// applies examples/vm-tiny.yaml, waits for its VMI to be Running, shows
// `kubectl get vm,vmi`, reads the guest's serial console through the
// agent's console endpoint until GUEST-BOOTED, then halts the VM and shows
// it go away. Every step is timed. With -wait it keeps everything up until
// interrupted and prints a KUBECONFIG. Whatever it started is stopped before
// it exits; any failure names its step and exits 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/internal/testenv/libvirtenv"
	"github.com/vmkit/vmkit/nodeagent"
	"github.com/vmkit/vmkit/nodeagent/hypervisor/libvirt"
	"github.com/vmkit/vmkit/nodeagent/localnode"
	"github.com/vmkit/vmkit/podtemplate"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol"
)

const guestMarker = "GUEST-BOOTED"

// Options configure one run of the demo.
type Options struct {
	// Manifest is the VirtualMachine to apply (examples/vm-tiny.yaml).
	Manifest string
	// Launcher is the virt-launcher binary.
	Launcher string
	// GuestDir holds the tiny guest (hack/make-guest.sh).
	GuestDir string
	// LibvirtURI is the node's libvirt (qemu:///system).
	LibvirtURI string
	// Namespace the VM is created in ("default"; created when missing).
	Namespace string
	// NodeName of the Node object the VM runs on.
	NodeName string
	// Wait keeps everything up after the guest booted until ctx ends.
	Wait bool
	// Out gets the demo's output.
	Out io.Writer
	// StepTimeout bounds each waiting step (default 2 minutes).
	StepTimeout time.Duration
}

func main() {
	root, _ := testenv.ModuleRoot()
	o := Options{Out: os.Stdout, NodeName: "node01", Namespace: "default"}
	flag.StringVar(&o.Manifest, "manifest", filepath.Join(root, "examples/vm-tiny.yaml"), "VirtualMachine to apply")
	flag.StringVar(&o.Launcher, "launcher", filepath.Join(root, "_output/bin/virt-launcher"), "virt-launcher binary")
	flag.StringVar(&o.GuestDir, "guest-dir", envOr(libvirtenv.GuestDirEnv, filepath.Join(root, "_output/guest")), "directory of the tiny guest")
	flag.StringVar(&o.LibvirtURI, "libvirt-uri", envOr(libvirtenv.LibvirtURIEnv, libvirtenv.DefaultLibvirtURI), "libvirt of this node")
	flag.BoolVar(&o.Wait, "wait", false, "keep everything running until interrupted")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo FAILED:", err)
		cancel()
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// demo is one run: what it started, in start order, and the step timings.
type demo struct {
	o      Options
	out    io.Writer
	env    *testenv.Env
	client versioned.Interface
	hv     *libvirt.Hypervisor
	local  *localnode.Node
	agent  string // base URL of the agent's REST API
	vm     *v1.VirtualMachine

	stops  []stopper // run in reverse at exit
	failed bool      // a step failed: a controller stopped before it synced is no news
	steps  []timing
}

type stopper struct {
	stop func() error
	// bg marks a background loop, whose error after an earlier failure
	// (e.g. informers that never synced) only repeats that failure.
	bg bool
}

type timing struct {
	name string
	took time.Duration
}

// step runs one step, prints its name and duration, and names it in errors.
func (d *demo) step(name string, f func() error) error {
	fmt.Fprintf(d.out, "==> %s\n", name)
	began := time.Now()
	err := f()
	took := time.Since(began)
	d.steps = append(d.steps, timing{name, took})
	if err != nil {
		d.failed = true
		return fmt.Errorf("step %q failed after %v: %w", name, took.Round(time.Millisecond), err)
	}
	fmt.Fprintf(d.out, "    done in %v\n", took.Round(time.Millisecond))
	return nil
}

func (d *demo) onStop(f func() error) { d.stops = append(d.stops, stopper{stop: f}) }

// goRun runs f(ctx) in the background until teardown.
func (d *demo) goRun(ctx context.Context, f func(context.Context) error) {
	d.stops = append(d.stops, stopper{stop: goRun(ctx, f), bg: true})
}

// run is the whole demo; everything it starts is stopped before it returns.
func run(ctx context.Context, o Options) (err error) {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 2 * time.Minute
	}
	d := &demo{o: o, out: o.Out}
	began := time.Now()
	defer func() {
		if err != nil && d.local != nil {
			err = fmt.Errorf("%w\n%s", err, d.local.Logs(20))
		}
		if terr := d.teardown(); terr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the demo: %w", terr))
		}
		d.printTimings(time.Since(began))
	}()
	if err := d.start(ctx); err != nil {
		return err
	}
	if err := d.bootVM(ctx); err != nil {
		return err
	}
	if o.Wait {
		fmt.Fprintf(d.out, "\nEverything is up; Ctrl-C stops it.\n  export KUBECONFIG=%s\n  kubectl get vm,vmi,pods -A\n"+
			"  console: %s/v1/namespaces/%s/virtualmachineinstances/%s/console (WebSocket)\n",
			d.env.KubeconfigPath, d.agent, o.Namespace, d.vm.Name)
		<-ctx.Done()
		fmt.Fprintln(d.out)
		ctx = context.Background() // halt the VM cleanly after Ctrl-C
	}
	return d.haltVM(ctx)
}

// start brings up the control plane, the Node, the controllers, the agent
// and the local node.
func (d *demo) start(ctx context.Context) error {
	o := d.o
	if err := d.step("checking libvirt at "+o.LibvirtURI, func() error {
		hv, err := libvirt.New(ctx, libvirt.Options{URI: o.LibvirtURI})
		if err != nil {
			return fmt.Errorf("%w (install and start it with hack/setup-libvirt.sh, as root)", err)
		}
		d.hv = hv
		d.onStop(hv.Close)
		return nil
	}); err != nil {
		return err
	}
	if err := d.step("starting etcd and kube-apiserver with vmkit's CRDs", func() error {
		all, err := crds.All()
		if err != nil {
			return err
		}
		env, err := testenv.Launch(ctx, testenv.Options{CRDs: all})
		if err != nil {
			return fmt.Errorf("%w (binaries come from hack/setup-k8s.sh)", err)
		}
		d.env = env
		d.onStop(env.Stop)
		fmt.Fprintf(d.out, "    API server %s, %d CRDs\n", env.Config.Host, len(all))
		d.client, err = versioned.NewForConfig(env.Config)
		return err
	}); err != nil {
		return err
	}
	if err := d.step("registering Node "+o.NodeName+" and the "+o.Namespace+" ServiceAccount", func() error {
		kube := d.env.Kube
		if _, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: o.NodeName}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		// No kube-controller-manager runs: create the ServiceAccount pods need.
		_, err := kube.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		return err
	}); err != nil {
		return err
	}
	if err := d.step("starting the VM and VMI controllers (vmcontrol.Manager)", func() error {
		renderer, err := podtemplate.New(podtemplate.Config{LauncherImage: "vmkit/virt-launcher:demo", EmulationAllowed: true})
		if err != nil {
			return err
		}
		m, err := vmcontrol.NewManager(vmcontrol.Options{Config: d.env.Config, Renderer: renderer})
		if err != nil {
			return err
		}
		d.goRun(ctx, m.Run)
		return nil
	}); err != nil {
		return err
	}
	if err := d.step("starting the local node: kubelet stand-in running virt-launcher processes", func() error {
		local, err := localnode.Start(ctx, localnode.Options{
			Kube: d.env.Kube, NodeName: o.NodeName, Namespace: o.Namespace, LauncherBinary: o.Launcher,
			LibvirtURI: o.LibvirtURI, GuestDir: o.GuestDir, Domains: d.hv,
			// The host's /dev/kvm may not run guests (see localnode.Options).
			ForceEmulation: true,
		})
		if err != nil {
			return err
		}
		d.local = local
		d.onStop(local.Stop)
		return nil
	}); err != nil {
		return err
	}
	return d.step("starting the node agent (virt-handler's job) with its REST API", func() error {
		agent, err := nodeagent.New(nodeagent.Config{
			NodeName: o.NodeName, Client: d.client, Kube: d.env.Kube, ShareDir: d.local.ShareDir(),
			// Launchers are local processes here: never look into a real
			// kubelet's pods on the same machine.
			KubeletPodsDir: filepath.Join(d.local.BaseDir(), "kubelet-pods"),
			PollInterval:   500 * time.Millisecond, HeartbeatInterval: 10 * time.Second,
		})
		if err != nil {
			return err
		}
		d.goRun(ctx, agent.Run)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: agent.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		d.onStop(func() error { return srv.Close() })
		d.agent = "http://" + l.Addr().String()
		fmt.Fprintf(d.out, "    REST API (console, VNC, pause) at %s\n", d.agent)
		return nil
	})
}

// bootVM applies the manifest, waits for Running and reads the console.
func (d *demo) bootVM(ctx context.Context) error {
	o := d.o
	created := time.Now()
	manifest := o.Manifest
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, manifest); err == nil && !strings.HasPrefix(rel, "..") {
			manifest = rel
		}
	}
	if err := d.step("applying "+manifest, func() error {
		raw, err := os.ReadFile(o.Manifest)
		if err != nil {
			return err
		}
		vm := &v1.VirtualMachine{}
		if err := yaml.UnmarshalStrict(raw, vm); err != nil {
			return fmt.Errorf("%s: %w", o.Manifest, err)
		}
		vm.Namespace = o.Namespace
		if doms, err := d.hv.List(ctx, ""); err == nil {
			for _, dom := range doms {
				if dom.VMI.Namespace == o.Namespace && dom.VMI.Name == vm.Name {
					return fmt.Errorf("libvirt already has domain %s (from another demo run?); remove it with `virsh destroy %[1]s; virsh undefine %[1]s`", dom.Name)
				}
			}
		}
		if d.vm, err = d.client.KubevirtV1().VirtualMachines(o.Namespace).Create(ctx, vm, metav1.CreateOptions{}); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "    virtualmachine.kubevirt.io/%s created (the API server's first write of a new CRD takes ~2 s)\n", vm.Name)
		return nil
	}); err != nil {
		return err
	}
	var vmi *v1.VirtualMachineInstance
	if err := d.step("waiting for the VMI to be Running and the VM Ready", func() error {
		var err error
		vmi, err = d.waitVMI(ctx, "Running", func(vmi *v1.VirtualMachineInstance) bool {
			return vmi != nil && vmi.Status.Phase == v1.Running
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(d.out, "    VMI %s Running on %s, %v after the VM was created\n", vmi.UID, vmi.Status.NodeName, time.Since(created).Round(time.Millisecond))
		// The VM controller mirrors the VMI's Ready condition a moment later.
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, o.StepTimeout, true, func(ctx context.Context) (bool, error) {
			vm, err := d.client.KubevirtV1().VirtualMachines(o.Namespace).Get(ctx, d.vm.Name, metav1.GetOptions{})
			return err == nil && vm.Status.Ready, nil
		}); err != nil {
			return fmt.Errorf("VM %s/%s not Ready: %w", o.Namespace, d.vm.Name, err)
		}
		return d.printTables(ctx)
	}); err != nil {
		return err
	}
	return d.step("reading the serial console through the node agent", func() error {
		lines, err := d.console(ctx)
		for _, l := range lines {
			fmt.Fprintf(d.out, "    | %s\n", l)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(d.out, "    %s on the console %v after the VM was created\n", guestMarker, time.Since(created).Round(time.Millisecond))
		if p := d.local.Launcher(vmi.UID); p == nil || p.Exited() {
			return fmt.Errorf("no running launcher for VMI %s", vmi.UID)
		}
		return nil
	})
}

// haltVM sets runStrategy Halted and waits until the VMI, its launcher and
// its domain are gone.
func (d *demo) haltVM(ctx context.Context) error {
	return d.step("stopping the VM (runStrategy: Halted)", func() error {
		vmi, err := d.client.KubevirtV1().VirtualMachineInstances(d.o.Namespace).Get(ctx, d.vm.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		patch := []byte(`{"spec":{"runStrategy":"Halted"}}`)
		if _, err := d.client.KubevirtV1().VirtualMachines(d.o.Namespace).Patch(ctx, d.vm.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		if _, err := d.waitVMI(ctx, "the VMI to go away", func(vmi *v1.VirtualMachineInstance) bool { return vmi == nil }); err != nil {
			return err
		}
		if p := d.local.Launcher(vmi.UID); p != nil {
			select {
			case <-p.Done():
			case <-time.After(30 * time.Second):
				return errors.New("the launcher still runs 30s after its VMI is gone")
			}
			if code := p.ExitCode(); code != 0 {
				return fmt.Errorf("the launcher exited with code %d", code)
			}
		}
		doms, err := d.hv.List(ctx, string(vmi.UID))
		if err != nil {
			return err
		}
		if len(doms) > 0 {
			return fmt.Errorf("libvirt still has domain %s of the halted VM", doms[0].Name)
		}
		// The VM controller writes Stopped once it has seen the VMI go:
		// wait for it, so the tables show the VM as users will find it.
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, d.o.StepTimeout, true, func(ctx context.Context) (bool, error) {
			vm, err := d.client.KubevirtV1().VirtualMachines(d.o.Namespace).Get(ctx, d.vm.Name, metav1.GetOptions{})
			return err == nil && vm.Status.PrintableStatus == v1.VirtualMachineStatusStopped && !vm.Status.Ready, nil
		})
		if err != nil {
			return fmt.Errorf("waiting %v for VM %s/%s to be Stopped: %w", d.o.StepTimeout, d.o.Namespace, d.vm.Name, err)
		}
		fmt.Fprintln(d.out, "    VMI gone, launcher exited 0, no domain left in libvirt")
		return d.printTables(ctx)
	})
}

// waitVMI polls the VM's VMI until cond holds (cond(nil): no VMI).
func (d *demo) waitVMI(ctx context.Context, what string, cond func(*v1.VirtualMachineInstance) bool) (*v1.VirtualMachineInstance, error) {
	var last *v1.VirtualMachineInstance
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, d.o.StepTimeout, true, func(ctx context.Context) (bool, error) {
		vmi, err := d.client.KubevirtV1().VirtualMachineInstances(d.o.Namespace).Get(ctx, d.vm.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = nil
			return cond(nil), nil
		}
		if err != nil {
			return false, nil
		}
		last = vmi
		return cond(vmi), nil
	})
	if err != nil {
		state := "no VMI"
		if last != nil {
			state = fmt.Sprintf("VMI phase %q, reason %q, conditions %+v", last.Status.Phase, last.Status.Reason, last.Status.Conditions)
		}
		return nil, fmt.Errorf("waiting %v for %s: %w; %s", d.o.StepTimeout, what, err, state)
	}
	return last, nil
}

// console reads the serial console from the agent's WebSocket endpoint, as
// `virtctl console` would, until the marker line; it returns the lines read.
func (d *demo) console(ctx context.Context) ([]string, error) {
	url := strings.Replace(d.agent, "http://", "ws://", 1) +
		fmt.Sprintf("/v1/namespaces/%s/virtualmachineinstances/%s/console?history=true", d.o.Namespace, d.vm.Name)
	ws, err := websocket.Dial(url, "", "http://localhost/")
	if err != nil {
		return nil, fmt.Errorf("console %s: %w", url, err)
	}
	defer ws.Close()
	ctx, cancel := context.WithTimeout(ctx, d.o.StepTimeout)
	defer cancel()
	lines, err := cluster.ReadUntil(ctx, ws, guestMarker)
	if err != nil {
		return lines, fmt.Errorf("console: %w", err)
	}
	return lines, nil
}

// printTables prints `kubectl get vm,vmi` from the server-side Table API.
func (d *demo) printTables(ctx context.Context) error {
	fmt.Fprintf(d.out, "\n$ kubectl get vm,vmi -n %s\n", d.o.Namespace)
	for _, r := range []string{"virtualmachines", "virtualmachineinstances"} {
		if err := d.printTable(ctx, r); err != nil {
			return fmt.Errorf("kubectl get %s: %w", r, err)
		}
	}
	fmt.Fprintln(d.out)
	return nil
}

func (d *demo) printTable(ctx context.Context, resource string) error {
	raw, err := d.env.Kube.CoreV1().RESTClient().Get().AbsPath("/apis/kubevirt.io/v1/namespaces", d.o.Namespace, resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		return err
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		return err
	}
	if len(table.Rows) == 0 {
		fmt.Fprintf(d.out, "No %s found.\n", resource)
		return nil
	}
	w := tabwriter.NewWriter(d.out, 0, 8, 3, ' ', 0)
	var head []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			head = append(head, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(w, strings.Join(head, "\t"))
	for _, row := range table.Rows {
		var cells []string
		for i, c := range row.Cells {
			if table.ColumnDefinitions[i].Priority == 0 {
				if c == nil {
					c = ""
				}
				cells = append(cells, fmt.Sprint(c))
			}
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}

// teardown stops everything in reverse start order, then checks that no
// domain of the demo's namespace is left in libvirt.
func (d *demo) teardown() error {
	began := time.Now()
	var errs []error
	for i := len(d.stops) - 1; i >= 0; i-- {
		// Check for leftover domains while libvirt is still connected.
		if i == 0 && d.hv != nil && d.vm != nil {
			if doms, err := d.hv.List(context.Background(), ""); err == nil {
				for _, dom := range doms {
					if dom.VMI.Namespace == d.o.Namespace && dom.VMI.Name == d.vm.Name {
						errs = append(errs, fmt.Errorf("domain %s was left in libvirt", dom.Name))
						_ = d.hv.Destroy(context.Background(), dom.Name)
						_ = d.hv.Undefine(context.Background(), dom.Name)
					}
				}
			}
		}
		if err := d.stops[i].stop(); err != nil && !(d.failed && d.stops[i].bg) {
			errs = append(errs, err)
		}
	}
	d.steps = append(d.steps, timing{"stopping everything", time.Since(began)})
	return errors.Join(errs...)
}

func (d *demo) printTimings(total time.Duration) {
	fmt.Fprintln(d.out, "\nstep timings:")
	for _, s := range d.steps {
		fmt.Fprintf(d.out, "  %8.3fs  %s\n", s.took.Seconds(), s.name)
	}
	fmt.Fprintf(d.out, "  %8.3fs  total\n", total.Seconds())
}

// goRun runs f(ctx) in a goroutine and returns a function that cancels it
// and returns its error.
func goRun(ctx context.Context, f func(context.Context) error) func() error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}
