package nodeagent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Three launchers that accept and never answer do not take the agent's
// three workers for good: every call has a deadline, so a healthy VMI
// still reaches Running within 10 s and each hung one gets a
// LauncherUnresponsive event within 10 s.
func TestHungLaunchersDoNotStopTheAgent(t *testing.T) {
	dir := t.TempDir()
	share, pods := filepath.Join(dir, "share"), filepath.Join(dir, "pods")
	podUID := func(i int) string { return fmt.Sprintf("22222222-bbbb-4bbb-8bbb-bbbbbbbbbbb%d", i) }
	vmi := func(i int) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("vm%d", i),
				UID:    types.UID(fmt.Sprintf("0d4a0f4e-1111-4222-8333-94445555000%d", i)),
				Labels: map[string]string{v1.NodeNameLabel: "node01"}},
			Status: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "node01",
				ActivePods: map[types.UID]string{types.UID(podUID(i)): "node01"}},
		}
	}
	var vmis []*v1.VirtualMachineInstance
	for i := range 4 {
		vmis = append(vmis, vmi(i))
	}
	vmClient := vmfake.NewSimpleClientset(vmis[0], vmis[1], vmis[2], vmis[3])
	recorder := record.NewFakeRecorder(1000)
	a, err := New(Config{NodeName: "node01", Client: vmClient, Kube: fake.NewClientset(), ShareDir: share, KubeletPodsDir: pods,
		Recorder: recorder, Workers: 3, OrphanSweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vmis {
		sock := filepath.Join(podSocketDir(pods, podUID(i), string(v.UID)), client.SocketFile)
		if i < 3 {
			agenttest.HungLauncher(t, listenUnix(t, sock))
			continue
		}
		fakeLauncher(t, listenUnix(t, sock), client.Status{UID: string(v.UID), Domain: "ns_vm3", Defined: true, Started: true,
			State: hypervisor.StateRunning, Reason: hypervisor.ReasonUnpaused})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	began := time.Now()
	deadline := began.Add(10 * time.Second)
	var events []string
	unresponsive := func() map[string]bool {
		for drained := false; !drained; {
			select {
			case e := <-recorder.Events:
				events = append(events, e)
			default:
				drained = true
			}
		}
		got := map[string]bool{}
		for _, e := range events {
			for _, v := range vmis[:3] {
				if strings.Contains(e, ReasonLauncherUnresponsive) && strings.Contains(e, string(v.UID)) {
					got[v.Name] = true
				}
			}
		}
		return got
	}
	for {
		healthy, err := vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm3", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := unresponsive()
		if healthy.Status.Phase == v1.Running && len(got) == 3 {
			t.Logf("healthy VMI Running and 3 LauncherUnresponsive events after %v", time.Since(began).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: healthy VMI phase %q, LauncherUnresponsive events for %v; events: %q", healthy.Status.Phase, got, events)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
