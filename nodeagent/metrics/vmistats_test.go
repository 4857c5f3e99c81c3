package metrics

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// fakeSource is the node agent node01 as its metrics see it: the VMIs the
// test puts in its cache, and the launchers that serve their sockets under
// share.
type fakeSource struct {
	share string

	mu      sync.Mutex
	vmis    []*v1.VirtualMachineInstance
	clients map[types.UID]*client.Client
}

var _ Source = (*fakeSource)(nil)

func (s *fakeSource) NodeName() string { return "node01" }

func (s *fakeSource) CachedVMIs() ([]*v1.VirtualMachineInstance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.vmis), nil
}

func (s *fakeSource) Launcher(uid types.UID) *client.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clients == nil {
		s.clients = map[types.UID]*client.Client{}
	}
	c, ok := s.clients[uid]
	if !ok {
		c = client.New(client.SocketPath(s.share, string(uid)))
		s.clients[uid] = c
	}
	return c
}

// statsMetrics are the metrics of an agent on node01 whose launchers serve
// their sockets under share: the test puts VMIs in its cache.
func statsMetrics(t *testing.T, share string, timeout time.Duration) (*Metrics, *fakeSource) {
	t.Helper()
	src := &fakeSource{share: share}
	t.Cleanup(func() {
		for _, c := range src.clients {
			c.Close()
		}
	})
	return New(src, timeout), src
}

// cached puts vmi, in the given phase on the given node, in the agent's cache.
func cached(src *fakeSource, vmi *v1.VirtualMachineInstance, phase v1.VirtualMachineInstancePhase, node string) {
	vmi = vmi.DeepCopy()
	vmi.Status.Phase, vmi.Status.NodeName = phase, node
	src.mu.Lock()
	defer src.mu.Unlock()
	src.vmis = append(src.vmis, vmi)
}

func u64(v uint64) *uint64 { return &v }

// Scraping the agent asks the launcher of each Running VMI on its node for
// the domain's statistics and exports every one of KubeVirt's per-VMI
// families with KubeVirt's names, units and labels (node, namespace, name,
// and id/state, interface, drive); VMIs that are not Running here are not
// asked.
func TestVMIStatsMetrics(t *testing.T) {
	dir := agenttest.ShortTempDir(t)
	share := filepath.Join(dir, "share")
	h := hvfake.New()
	running := agenttest.VMI("vm1", "0d4a0f4e-1111-4222-8333-944455550001")
	scheduled := agenttest.VMI("vm2", "0d4a0f4e-1111-4222-8333-944455550002")
	for _, vmi := range []*v1.VirtualMachineInstance{running, scheduled} {
		agenttest.RunGuest(t, dir, share, h, vmi)
	}
	h.SetStats("ns_vm1", hypervisor.DomainStats{
		CPU: hypervisor.CPUStats{TimeNs: u64(12e9), UserNs: u64(10e9), SystemNs: u64(2e9)},
		Memory: hypervisor.MemoryStats{DomainBytes: u64(64 << 20), ActualBalloonBytes: u64(60 << 20), ResidentBytes: u64(80 << 20),
			AvailableBytes: u64(58 << 20), UsableBytes: u64(40 << 20), UnusedBytes: u64(30 << 20), CachedBytes: u64(5 << 20),
			SwapInBytes: u64(4096), SwapOutBytes: u64(8192), MajorFaults: u64(3), MinorFaults: u64(300)},
		VCPUs: []hypervisor.VCPUStats{
			{ID: 0, State: hypervisor.VCPURunning, TimeNs: u64(9e9), WaitNs: u64(5e8), DelayNs: u64(25e7)},
			{ID: 1, State: hypervisor.VCPUOffline, TimeNs: u64(0)},
		},
		Interfaces: []hypervisor.InterfaceStats{
			{Name: "tap0", Alias: "default", RxBytes: u64(1000), RxPackets: u64(10), RxErrors: u64(1), RxDrops: u64(2),
				TxBytes: u64(2000), TxPackets: u64(20), TxErrors: u64(3), TxDrops: u64(4)},
			{Name: "tap1", RxBytes: u64(7)},
		},
		Disks: []hypervisor.DiskStats{{Name: "vda", Alias: "rootdisk", ReadRequests: u64(100), ReadBytes: u64(409600), ReadTimeNs: u64(2e9),
			WriteRequests: u64(50), WriteBytes: u64(204800), WriteTimeNs: u64(1e9), FlushRequests: u64(5), FlushTimeNs: u64(5e8)}},
	})
	m, src := statsMetrics(t, share, time.Second)
	cached(src, running, v1.Running, "node01")
	cached(src, scheduled, v1.Scheduled, "node01")

	got := agenttest.Samples(t, m.Registry(), "kubevirt_vmi_")
	vm := `name="vm1",namespace="ns",node="node01"`
	want := map[string]float64{
		"kubevirt_vmi_memory_domain_bytes{" + vm + "}":            64 << 20,
		"kubevirt_vmi_memory_actual_balloon_bytes{" + vm + "}":    60 << 20,
		"kubevirt_vmi_memory_resident_bytes{" + vm + "}":          80 << 20,
		"kubevirt_vmi_memory_available_bytes{" + vm + "}":         58 << 20,
		"kubevirt_vmi_memory_usable_bytes{" + vm + "}":            40 << 20,
		"kubevirt_vmi_memory_unused_bytes{" + vm + "}":            30 << 20,
		"kubevirt_vmi_memory_cached_bytes{" + vm + "}":            5 << 20,
		"kubevirt_vmi_memory_swap_in_traffic_bytes{" + vm + "}":   4096,
		"kubevirt_vmi_memory_swap_out_traffic_bytes{" + vm + "}":  8192,
		"kubevirt_vmi_memory_pgmajfault_total{" + vm + "}":        3,
		"kubevirt_vmi_memory_pgminfault_total{" + vm + "}":        300,
		"kubevirt_vmi_cpu_usage_seconds_total{" + vm + "}":        12,
		"kubevirt_vmi_cpu_user_usage_seconds_total{" + vm + "}":   10,
		"kubevirt_vmi_cpu_system_usage_seconds_total{" + vm + "}": 2,

		`kubevirt_vmi_vcpu_seconds_total{id="0",` + vm + `,state="running"}`: 9,
		`kubevirt_vmi_vcpu_seconds_total{id="1",` + vm + `,state="offline"}`: 0,
		`kubevirt_vmi_vcpu_wait_seconds_total{id="0",` + vm + `}`:            0.5,
		`kubevirt_vmi_vcpu_delay_seconds_total{id="0",` + vm + `}`:           0.25,

		`kubevirt_vmi_network_receive_bytes_total{interface="default",` + vm + `}`:            1000,
		`kubevirt_vmi_network_receive_packets_total{interface="default",` + vm + `}`:          10,
		`kubevirt_vmi_network_receive_errors_total{interface="default",` + vm + `}`:           1,
		`kubevirt_vmi_network_receive_packets_dropped_total{interface="default",` + vm + `}`:  2,
		`kubevirt_vmi_network_transmit_bytes_total{interface="default",` + vm + `}`:           2000,
		`kubevirt_vmi_network_transmit_packets_total{interface="default",` + vm + `}`:         20,
		`kubevirt_vmi_network_transmit_errors_total{interface="default",` + vm + `}`:          3,
		`kubevirt_vmi_network_transmit_packets_dropped_total{interface="default",` + vm + `}`: 4,
		`kubevirt_vmi_network_traffic_bytes_total{interface="default",` + vm + `,type="rx"}`:  1000,
		`kubevirt_vmi_network_traffic_bytes_total{interface="default",` + vm + `,type="tx"}`:  2000,
		`kubevirt_vmi_network_receive_bytes_total{interface="tap1",` + vm + `}`:               7,
		`kubevirt_vmi_network_traffic_bytes_total{interface="tap1",` + vm + `,type="rx"}`:     7,

		`kubevirt_vmi_storage_iops_read_total{drive="rootdisk",` + vm + `}`:           100,
		`kubevirt_vmi_storage_read_traffic_bytes_total{drive="rootdisk",` + vm + `}`:  409600,
		`kubevirt_vmi_storage_read_times_seconds_total{drive="rootdisk",` + vm + `}`:  2,
		`kubevirt_vmi_storage_iops_write_total{drive="rootdisk",` + vm + `}`:          50,
		`kubevirt_vmi_storage_write_traffic_bytes_total{drive="rootdisk",` + vm + `}`: 204800,
		`kubevirt_vmi_storage_write_times_seconds_total{drive="rootdisk",` + vm + `}`: 1,
		`kubevirt_vmi_storage_flush_requests_total{drive="rootdisk",` + vm + `}`:      5,
		`kubevirt_vmi_storage_flush_times_seconds_total{drive="rootdisk",` + vm + `}`: 0.5,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("per-VMI metrics (-want +got):\n%s", diff)
	}
	// Every family the collector describes was exported.
	ch := make(chan *prometheus.Desc, 100)
	m.vmiStats.Describe(ch)
	close(ch)
	for d := range ch {
		name := strings.Split(d.String(), `"`)[1] // Desc{fqName: "name", ...}
		if !strings.HasPrefix(name, "kubevirt_vmi_") {
			continue // vmkit_nodeagent_vmi_paused: no VMI here is paused (TestIOErrorPauseThroughSync)
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(got)), func(k string) bool { return strings.HasPrefix(k, name+"{") }) {
			t.Errorf("family %s described but not exported", name)
		}
	}
	if slices.Contains(h.Calls(), "Stats ns_vm2") {
		t.Errorf("the launcher of the Scheduled VMI vm2 was asked for statistics: %v", h.Calls())
	}
	if errs := agenttest.Samples(t, m.Registry(), "vmkit_nodeagent_launcher_errors_total"); len(errs) != 0 {
		t.Errorf("launcher errors after a good scrape: %v, want none", errs)
	}
}

// A launcher that accepts and never answers does not hold /metrics: the
// scrape returns after the agent's StatsTimeout with the other VMIs'
// metrics, and counts the failure.
func TestVMIStatsHungLauncher(t *testing.T) {
	dir := agenttest.ShortTempDir(t)
	share := filepath.Join(dir, "share")
	h := hvfake.New()
	healthy := agenttest.VMI("vm1", "0d4a0f4e-1111-4222-8333-944455550001")
	hung := agenttest.VMI("vm2", "0d4a0f4e-1111-4222-8333-944455550002")
	agenttest.RunGuest(t, dir, share, h, healthy)
	hungSock := client.SocketPath(share, string(hung.UID))
	if err := os.MkdirAll(filepath.Dir(hungSock), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", hungSock)
	if err != nil {
		t.Fatal(err)
	}
	agenttest.HungLauncher(t, ln)
	h.SetStats("ns_vm1", hypervisor.DomainStats{CPU: hypervisor.CPUStats{TimeNs: u64(1e9)}})

	const timeout = 300 * time.Millisecond
	m, src := statsMetrics(t, share, timeout)
	cached(src, healthy, v1.Running, "node01")
	cached(src, hung, v1.Running, "node01")
	began := time.Now()
	got := agenttest.Samples(t, m.Registry(), "kubevirt_vmi_cpu_usage_seconds_total")
	took := time.Since(began)
	want := map[string]float64{`kubevirt_vmi_cpu_usage_seconds_total{name="vm1",namespace="ns",node="node01"}`: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics with a hung launcher (-want +got):\n%s", diff)
	}
	if took < timeout || took > timeout+time.Second {
		t.Errorf("the scrape took %v, want the stats timeout %v (and not much more)", took, timeout)
	}
	wantErrs := map[string]float64{`vmkit_nodeagent_launcher_errors_total{op="stats"}`: 1}
	if diff := cmp.Diff(wantErrs, agenttest.Samples(t, m.Registry(), "vmkit_nodeagent_launcher_errors_total")); diff != "" {
		t.Errorf("failed launcher calls (-want +got):\n%s", diff)
	}
}

// A scrape of an agent without VMIs asks nobody.
func TestVMIStatsNoVMIs(t *testing.T) {
	m, _ := statsMetrics(t, t.TempDir(), 0)
	if m.vmiStats.timeout != DefaultStatsTimeout {
		t.Errorf("default StatsTimeout %v, want %v", m.vmiStats.timeout, DefaultStatsTimeout)
	}
	if got := agenttest.Samples(t, m.Registry(), "kubevirt_vmi_"); len(got) != 0 {
		t.Errorf("metrics without VMIs: %v", got)
	}
}
