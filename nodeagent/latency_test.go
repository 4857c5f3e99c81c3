package nodeagent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// LatencyEnv sets how many VMs TestLatency creates (default 2, which keeps
// it a quick end-to-end check in CI; the numbers in docs/performance.md use 20):
//
//	VMKIT_LATENCY_VMS=20 go test ./nodeagent -run TestLatency -v -timeout 15m
const latencyEnv = "VMKIT_LATENCY_VMS"

// TestLatency measures VM create → VMI Running → guest marker on the
// console, for N VMs one after the other and then N VMs 5 at a time, and
// the RSS of each launcher and of its QEMU.
func TestLatency(t *testing.T) {
	count, _ := strconv.Atoi(os.Getenv(latencyEnv))
	if count <= 0 {
		count = 2
	}
	n := startNode(t)
	ctx := context.Background()
	one := func(name string) (running, marker time.Duration, rss [2]int64) {
		created := time.Now()
		if _, err := n.client.KubevirtV1().VirtualMachines(n.ns).Create(ctx, tinyVM(n.ns, name, v1.RunStrategyAlways), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		vmi := n.waitVMI(name, 120*time.Second, "Running", phaseIs(v1.Running))
		running = time.Since(created)
		if _, err := n.console(name, 120*time.Second); err != nil {
			t.Fatal(err)
		}
		marker = time.Since(created)
		if p := n.launcherOf(vmi.UID); p != nil {
			rss[0] = rssKiB(p.Pid())
		}
		rss[1] = rssKiB(qemuPid(n.ns + "_" + name))
		return running, marker, rss
	}
	halt := func(name string) {
		// No controller manager runs (no garbage collector): halt the VM
		// rather than delete it, so the VM controller deletes the VMI.
		patch := []byte(`{"spec":{"runStrategy":"Halted"}}`)
		if _, err := n.client.KubevirtV1().VirtualMachines(n.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	report := func(label string, running, marker []time.Duration, rss [][2]int64) {
		var l, q []int64
		for _, r := range rss {
			l, q = append(l, r[0]), append(q, r[1])
		}
		t.Logf("%s: %d VMs: create → Running p50 %v p95 %v; → marker p50 %v p95 %v; launcher RSS median %d KiB, QEMU RSS median %d KiB",
			label, len(running), pct(running, 50), pct(running, 95), pct(marker, 50), pct(marker, 95), median(l), median(q))
	}

	var running, marker []time.Duration
	var rss [][2]int64
	for i := range count {
		name := fmt.Sprintf("seq-%d-%s", i, rand.String(4))
		r, m, s := one(name)
		running, marker, rss = append(running, r), append(marker, m), append(rss, s)
		halt(name)
		n.waitVMI(name, 60*time.Second, "gone", func(vmi *v1.VirtualMachineInstance) bool { return vmi == nil })
	}
	report("sequential", running, marker, rss)

	running, marker, rss = nil, nil, nil
	var mu sync.Mutex
	for batch := 0; batch < count; batch += 5 {
		var wg sync.WaitGroup
		var names []string
		for i := batch; i < batch+5 && i < count; i++ {
			name := fmt.Sprintf("par-%d-%s", i, rand.String(4))
			names = append(names, name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, m, s := one(name)
				mu.Lock()
				running, marker, rss = append(running, r), append(marker, m), append(rss, s)
				mu.Unlock()
			}()
		}
		wg.Wait()
		for _, name := range names {
			halt(name)
		}
		for _, name := range names {
			n.waitVMI(name, 60*time.Second, "gone", func(vmi *v1.VirtualMachineInstance) bool { return vmi == nil })
		}
	}
	report("5 in parallel", running, marker, rss)
	t.Logf("this process (API clients, vmcontrol Manager, node agent, test kubelet): RSS %d KiB", rssKiB(os.Getpid()))
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i].Round(10 * time.Millisecond)
}

func median(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// rssKiB is a process's resident set size, 0 when unknown.
func rssKiB(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// qemuPid finds the QEMU process of a domain by its -name argument.
func qemuPid(domain string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "guest="+domain+",") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		return pid
	}
	return 0
}
