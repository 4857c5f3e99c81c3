// Package agenttest holds what the node agent's packages' tests share: a
// real launcher running a VMI on a fake hypervisor, a launcher that never
// answers, a runnable VMI, a short temporary directory for launcher
// sockets, qemu-ga's replies in the test guest, and Prometheus samples read
// back. It is for tests only.
package agenttest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// VMI is a VMI in namespace ns that the launcher can run on the fake
// hypervisor.
func VMI(name, uid string) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		}},
	}
}

// RunLauncher runs a real launcher of vmi on h, with its directories under
// dir and its socket under share (<share>/sockets/<uid>/launcher.sock; a
// pod's sockets volume when share is <pod dir>/volumes/kubernetes.io~empty-dir),
// and waits until it answers. The launcher stops when the test ends; the
// returned channel is closed when it has exited.
func RunLauncher(t *testing.T, dir, share string, h hypervisor.Hypervisor, vmi *v1.VirtualMachineInstance) <-chan struct{} {
	t.Helper()
	l, err := launcher.New(launcher.Config{
		Name: vmi.Name, Namespace: vmi.Namespace, UID: string(vmi.UID), ShareDir: share,
		EphemeralDiskDir: filepath.Join(dir, vmi.Name, "eph"), ContainerDiskDir: filepath.Join(dir, vmi.Name, "cd"),
		PrivateDir: filepath.Join(dir, vmi.Name, "priv"),
		Hypervisor: h, QEMUImg: "none", PollInterval: 10 * time.Millisecond, GracePeriod: 100 * time.Millisecond,
		Emulation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _, _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c := client.New(client.SocketPath(share, string(vmi.UID)))
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for _, err := c.Ping(ctx); err != nil; _, err = c.Ping(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("the launcher of %s does not answer: %v", vmi.Name, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return done
}

// StartGuest has the launcher of vmi, with its socket under share, start
// the domain, as the node agent does.
func StartGuest(t *testing.T, share string, vmi *v1.VirtualMachineInstance) {
	t.Helper()
	c := client.New(client.SocketPath(share, string(vmi.UID)))
	defer c.Close()
	if st, err := c.Sync(context.Background(), vmi); err != nil || !st.Started {
		t.Fatalf("starting the guest of %s: %+v, %v", vmi.Name, st, err)
	}
}

// RunGuest runs a real launcher of vmi on h (RunLauncher) and has it start
// the domain (StartGuest).
func RunGuest(t *testing.T, dir, share string, h hypervisor.Hypervisor, vmi *v1.VirtualMachineInstance) {
	t.Helper()
	RunLauncher(t, dir, share, h, vmi)
	StartGuest(t, share, vmi)
}

// HungLauncher accepts connections on ln, as a launcher's socket, and
// never answers, until the test ends.
func HungLauncher(t *testing.T, ln net.Listener) {
	t.Helper()
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
}

// ShortTempDir is a temporary directory with a short path, removed when
// the test ends: a launcher's socket path under it must fit sun_path.
func ShortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nvs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Samples gathers g and returns the samples of the families whose names
// start with prefix, keyed name{label="value",...} (labels sorted).
func Samples(t *testing.T, g prometheus.Gatherer, prefix string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), prefix) {
			continue
		}
		for _, m := range mf.GetMetric() {
			var pairs []string
			for _, lp := range m.GetLabel() {
				pairs = append(pairs, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			sort.Strings(pairs)
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			out[mf.GetName()+"{"+strings.Join(pairs, ",")+"}"] = v
		}
	}
	return out
}
