package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/internal/testenv/libvirtenv"
	"github.com/vmkit/vmkit/nodeagent/hypervisor/libvirt"
)

// demoOptions returns the options `make demo-local` uses, with a virt-launcher
// built for the test and a namespace of its own, so the test can run while
// someone runs the demo.
func demoOptions(t *testing.T) (Options, *bytes.Buffer) {
	t.Helper()
	uri := libvirtenv.RequireLibvirt(t)
	guest := libvirtenv.RequireGuest(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "virt-launcher")
	build := exec.Command("go", "build", "-o", bin, "./cmd/virt-launcher")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building virt-launcher (needs libvirt-dev and pkg-config: make test-deps): %v\n%s", err, out)
	}
	var out bytes.Buffer
	return Options{
		Manifest:    filepath.Join(root, "examples/vm-tiny.yaml"),
		Launcher:    bin,
		GuestDir:    filepath.Dir(guest.Kernel),
		LibvirtURI:  uri,
		Namespace:   "demo-" + rand.String(5),
		NodeName:    "node01",
		Out:         &out,
		StepTimeout: time.Minute,
	}, &out
}

// TestDemo runs what `make demo-local` runs and checks what it shows: the VM
// Running with its VMI on the node, the guest's marker on the console, the
// VM Stopped with no VMI after the halt, and the step timings; afterwards no
// domain of the demo is left in libvirt.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM with etcd, kube-apiserver and libvirt; run without -short")
	}
	o, out := demoOptions(t)
	err := run(t.Context(), o)
	t.Logf("demo output:\n%s", out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{
		"vm-tiny   ", "Running   True", "node01", // kubectl get vm,vmi while it runs
		"| GUEST-BOOTED", // the guest's console line
		"VMI gone, launcher exited 0, no domain left in libvirt",
		"Stopped   False", "No virtualmachineinstances found.",
		"step timings:", "total",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	hv, err := libvirt.New(context.Background(), libvirt.Options{URI: o.LibvirtURI})
	if err != nil {
		t.Fatal(err)
	}
	defer hv.Close()
	doms, err := hv.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range doms {
		if d.VMI.Namespace == o.Namespace {
			t.Errorf("domain %s left in libvirt after the demo", d.Name)
		}
	}
}

// TestDemoFailureNamesTheStep checks that a failing step is named in the
// error and that what was started before it is stopped.
func TestDemoFailureNamesTheStep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; run without -short")
	}
	o, out := demoOptions(t)
	o.Launcher = filepath.Join(t.TempDir(), "no-such-virt-launcher")
	err := run(t.Context(), o)
	if err == nil {
		t.Fatalf("run with a missing virt-launcher succeeded:\n%s", out)
	}
	for _, want := range []string{`step "starting the local node`, "no-such-virt-launcher", "go build"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !strings.Contains(out.String(), "stopping everything") {
		t.Errorf("no teardown after the failure:\n%s", out)
	}
}
