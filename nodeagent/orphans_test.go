package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestWantsLauncher(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		vmi  v1.VirtualMachineInstance
		want bool
	}{
		{"running here", v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01"}}, true},
		{"scheduling, not placed yet", v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduling}}, true},
		{"pending", v1.VirtualMachineInstance{}, true},
		{"on another node", v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node02"}}, false},
		{"succeeded", v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Succeeded, NodeName: "node01"}}, false},
		{"failed", v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Failed, NodeName: "node01"}}, false},
		{"being deleted", v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
			Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01"}}, false},
	} {
		if got := wantsLauncher(&tc.vmi, "node01"); got != tc.want {
			t.Errorf("%s: wantsLauncher = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWantsLauncherOfMigrationTarget(t *testing.T) {
	end := metav1.Now()
	migrating := &v1.VirtualMachineInstanceMigrationState{SourceNode: "node02", TargetNode: "node01"}
	done := &v1.VirtualMachineInstanceMigrationState{SourceNode: "node02", TargetNode: "node01", Failed: true, Completed: true, EndTimestamp: &end}
	for _, tc := range []struct {
		name string
		ms   *v1.VirtualMachineInstanceMigrationState
		want bool
	}{
		{"migrating here", migrating, true},
		{"the migration here failed", done, false},
		{"no migration", nil, false},
	} {
		vmi := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node02", MigrationState: tc.ms}}
		if got := wantsLauncher(vmi, "node01"); got != tc.want {
			t.Errorf("%s: wantsLauncher = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// orphanVMI is a VMI the launcher can run on the fake hypervisor.
func orphanVMI(name, uid string) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		}},
	}
}

func exited(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// CounterValue is the value of the agent's counter metric name (exported
// for the package's external tests too).
func CounterValue(t *testing.T, a *Agent, name string) float64 {
	t.Helper()
	mfs, err := a.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// An agent that starts finds the launchers whose VMI was deleted or moved
// to another node while it was away, stops their guests and cleans up
// after them; launchers of VMIs that still want them (one the informer
// has, one created a moment ago and not placed yet) are left alone. Later
// orphans are found by the periodic sweep.
func TestOrphanLaunchersStopped(t *testing.T) {
	dir, err := os.MkdirTemp("", "ngo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	share, pods := filepath.Join(dir, "share"), filepath.Join(dir, "pods")
	h := hvfake.New()

	// live: Scheduled here, in the informer.
	live := orphanVMI("live", "11111111-0000-4000-8000-000000000001")
	live.Labels = map[string]string{v1.NodeNameLabel: "node01"}
	live.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "node01"}
	// fresh: just created, its launcher pod started before the VMI is
	// Scheduled: not in the informer, but in the API server.
	fresh := orphanVMI("fresh", "11111111-0000-4000-8000-000000000002")
	fresh.Status.Phase = v1.Scheduling
	// moved: placed on another node while the agent was away.
	moved := orphanVMI("moved", "11111111-0000-4000-8000-000000000003")
	moved.Labels = map[string]string{v1.NodeNameLabel: "node02"}
	moved.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node02"}
	// deleted: gone from the API server.
	deleted := orphanVMI("deleted", "11111111-0000-4000-8000-000000000004")
	// later: deleted after the agent started, without it seeing an event.
	later := orphanVMI("later", "11111111-0000-4000-8000-000000000005")
	// final: Succeeded, its launcher in a launcher pod's volume (short
	// UIDs: the socket path must fit a socket address).
	final := orphanVMI("final", "u7")
	final.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Succeeded, NodeName: "node01"}
	finalShare := filepath.Join(pods, "p7", "volumes", "kubernetes.io~empty-dir")
	// foreign: a launcher in a pod's volume whose VMI this API server does
	// not know (another cluster's kubelet on the machine): left alone.
	const foreign = "22222222-0000-4000-8000-000000000008"
	foreignSocket := filepath.Join(podSocketDir(pods, "33333333-cccc-4ccc-8ccc-cccccccccccc", foreign), client.SocketFile)
	fakeLauncher(t, listenUnix(t, foreignSocket), client.Status{UID: foreign, Domain: "default_vm-boot", Defined: true, Started: true,
		State: hypervisor.StateRunning})

	vmClient := vmfake.NewSimpleClientset(live.DeepCopy(), fresh.DeepCopy(), moved.DeepCopy(), final.DeepCopy())
	done := map[string]<-chan struct{}{}
	for _, vmi := range []*v1.VirtualMachineInstance{live, fresh, moved, deleted} {
		done[vmi.Name] = agenttest.RunLauncher(t, dir, share, h, vmi)
	}
	done[final.Name] = agenttest.RunLauncher(t, dir, finalShare, h, final)
	for _, vmi := range []*v1.VirtualMachineInstance{moved, deleted} {
		agenttest.StartGuest(t, share, vmi)
	}
	agenttest.StartGuest(t, finalShare, final)
	// A launcher that died long ago: its final state in the agent's
	// directory, and a dead socket in a launcher pod's volume.
	const dead = "11111111-0000-4000-8000-000000000006"
	deadDir := client.SocketDir(share, dead)
	if err := os.MkdirAll(deadDir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(client.Status{UID: dead, Final: true})
	if err := os.WriteFile(filepath.Join(deadDir, client.FinalFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	deadPodSocket := filepath.Join(podSocketDir(pods, "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb", dead), client.SocketFile)
	listenUnix(t, deadPodSocket).Close()

	if n := len(launcherCandidates(share, pods)); n != 7 {
		t.Errorf("launcherCandidates found %d launchers, want 7", n)
	}

	a, err := New(Config{NodeName: "node01", Client: vmClient, Kube: fake.NewClientset(), ShareDir: share, KubeletPodsDir: pods,
		Recorder: record.NewFakeRecorder(100), PollInterval: 20 * time.Millisecond, OrphanSweepInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-agentDone; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	gone := func(vmi *v1.VirtualMachineInstance) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		select {
		case <-done[vmi.Name]:
		case <-deadline:
			t.Fatalf("the launcher of %s still runs", vmi.Name)
		}
		waitFor(t, func() bool {
			_, err := os.Stat(client.SocketDir(share, string(vmi.UID)))
			return errors.Is(err, os.ErrNotExist)
		})
		if doms, err := h.List(context.Background(), string(vmi.UID)); err != nil || len(doms) != 0 {
			t.Errorf("domains of %s: %+v, %v; want none", vmi.Name, doms, err)
		}
	}
	gone(moved)
	gone(deleted)
	gone(final)
	if _, err := os.Stat(client.SocketDir(finalShare, string(final.UID))); err != nil {
		t.Errorf("the agent removed a socket directory from a pod's volume: %v", err)
	}
	waitFor(t, func() bool { _, err := os.Stat(deadDir); return errors.Is(err, os.ErrNotExist) })
	if _, err := os.Lstat(deadPodSocket); err != nil {
		t.Errorf("the agent removed a dead launcher's socket from a pod's volume: %v", err)
	}

	// The live VMI runs; the fresh one's launcher still waits for it.
	waitFor(t, func() bool {
		got, err := vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "live", metav1.GetOptions{})
		return err == nil && got.Status.Phase == v1.Running
	})

	// A VMI deleted while the agent runs, without an event (as if the
	// watch missed it): the next sweep stops its launcher.
	done[later.Name] = agenttest.RunLauncher(t, dir, share, h, later)
	agenttest.StartGuest(t, share, later)
	gone(later)

	time.Sleep(500 * time.Millisecond) // more sweeps
	for _, vmi := range []*v1.VirtualMachineInstance{live, fresh} {
		if exited(done[vmi.Name]) {
			t.Errorf("the launcher of %s, whose VMI wants it, was stopped", vmi.Name)
		}
		st, err := client.New(client.SocketPath(share, string(vmi.UID))).State(ctx)
		if err != nil || st.StopRequested || st.Final {
			t.Errorf("launcher of %s: %+v, %v; want it untouched", vmi.Name, st, err)
		}
	}
	if _, err := client.New(foreignSocket).Ping(ctx); err != nil {
		t.Errorf("the launcher of a VMI this API server does not know, in a pod's volume: %v; want it left alone", err)
	}
	if got := CounterValue(t, a, "vmkit_nodeagent_orphan_launchers_total"); got != 4 {
		t.Errorf("vmkit_nodeagent_orphan_launchers_total = %v, want 4 (moved, deleted, final, later)", got)
	}
}
