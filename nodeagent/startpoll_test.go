package nodeagent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestStartingLauncherPolledSooner: while a scheduled VMI's launcher does
// not serve yet, the agent looks again after StartPollInterval, not the
// running domains' PollInterval; once the launcher serves, the same sync
// starts the domain.
func TestStartingLauncherPolledSooner(t *testing.T) {
	dir := agenttest.ShortTempDir(t)
	share := filepath.Join(dir, "share")
	vmi := orphanVMI("vm1", "0d4a0f4e-1111-4222-8333-944455550001")
	vmi.Labels = map[string]string{v1.NodeNameLabel: "node01"}
	vmi.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "node01"}
	a, err := New(Config{NodeName: "node01", Client: vmfake.NewSimpleClientset(vmi.DeepCopy()), Kube: fake.NewClientset(), ShareDir: share,
		KubeletPodsDir: filepath.Join(dir, "pods"), Recorder: record.NewFakeRecorder(100), PollInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.informer.GetIndexer().Add(vmi); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	requeue, err := a.sync(ctx, "ns/vm1")
	if err != nil {
		t.Fatal(err)
	}
	if want := 200 * time.Millisecond; requeue != want {
		t.Fatalf("sync of a VMI whose launcher does not serve yet: requeue after %v, want the start poll's %v", requeue, want)
	}

	h := hvfake.New()
	agenttest.RunLauncher(t, dir, share, h, vmi)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := a.sync(ctx, "ns/vm1"); err != nil {
			t.Fatal(err)
		}
		if doms, _ := h.List(ctx, ""); len(doms) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the domain did not start once the launcher served")
		}
		time.Sleep(50 * time.Millisecond)
	}

	if a2, err := New(Config{NodeName: "node01", Client: vmfake.NewSimpleClientset(), Kube: fake.NewClientset(), ShareDir: share,
		Recorder: record.NewFakeRecorder(1), PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	} else if a2.cfg.StartPollInterval != 100*time.Millisecond {
		t.Errorf("StartPollInterval with a PollInterval of 100ms is %v, want at most the PollInterval", a2.cfg.StartPollInterval)
	}
}
