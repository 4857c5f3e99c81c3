// Package agenttest holds what the node agent's packages' tests share: a
// real launcher running a VMI on a fake hypervisor, a runnable VMI, a short
// temporary directory for launcher sockets, and Prometheus samples read
// back. It is for tests only.
package agenttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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

// RunGuest runs a real launcher of vmi on h, with its directories under
// dir and its socket under share (<share>/sockets/<uid>/launcher.sock),
// and has it start the domain, as the node agent does. The launcher stops
// when the test ends.
func RunGuest(t *testing.T, dir, share string, h hypervisor.Hypervisor, vmi *v1.VirtualMachineInstance) {
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
	if st, err := c.Sync(ctx, vmi); err != nil || !st.Started {
		t.Fatalf("starting the guest of %s: %+v, %v", vmi.Name, st, err)
	}
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
