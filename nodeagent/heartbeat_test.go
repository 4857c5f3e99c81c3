package nodeagent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestStartKeepsNodeSchedulable: a (re)starting agent never labels its
// node kubevirt.io/schedulable=false. Launcher pods select the label, and a
// kubelet restarting while it is false kills every VM on the node
// (KubeVirt's bug #11843); the agent's first heartbeat writes true.
func TestStartKeepsNodeSchedulable(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node01", Labels: map[string]string{v1.NodeSchedulable: "true"}}}
	kube := fake.NewClientset(node)
	var labels []string
	kube.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		var p struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(action.(k8stesting.PatchAction).GetPatch(), &p)
		labels = append(labels, p.Metadata.Labels[v1.NodeSchedulable])
		return false, nil, nil
	})
	dir := t.TempDir()
	a, err := New(Config{NodeName: "node01", Client: vmfake.NewSimpleClientset(), Kube: kube,
		ShareDir: filepath.Join(dir, "share"), KubeletPodsDir: filepath.Join(dir, "pods"), OrphanSweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := kube.CoreV1().Nodes().Get(ctx, "node01", metav1.GetOptions{})
		if err == nil && got.Annotations[v1.VirtHandlerHeartbeat] != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	for i, l := range labels {
		if l != "true" {
			t.Fatalf("node patch %d set %s=%q (all: %q); a starting agent must never mark its node unschedulable", i, v1.NodeSchedulable, l, labels)
		}
	}
}

// TestHeartbeatCPUManagerLabel: the heartbeat labels the node
// kubevirt.io/cpumanager (and KubeVirt's older cpumanager) from the
// kubelet's CPU manager checkpoint: true for the static policy, false for
// none, a missing file or one that is not JSON.
func TestHeartbeatCPUManagerLabel(t *testing.T) {
	for _, tc := range []struct {
		name, state string // state "" leaves no file
		want        string
	}{
		{"static", `{"policyName":"static","defaultCpuSet":"0-1","checksum":1}`, "true"},
		{"none", `{"policyName":"none","defaultCpuSet":"","checksum":2}`, "false"},
		{"no file", "", "false"},
		{"not JSON", "{", "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "cpu_manager_state")
			if tc.state != "" {
				if err := os.WriteFile(state, []byte(tc.state), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node01"}})
			a, err := New(Config{NodeName: "node01", Client: vmfake.NewSimpleClientset(), Kube: kube,
				ShareDir: filepath.Join(dir, "share"), CPUManagerStateFile: state})
			if err != nil {
				t.Fatal(err)
			}
			a.heartbeat(context.Background())
			node, err := kube.CoreV1().Nodes().Get(context.Background(), "node01", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{v1.CPUManager, v1.DeprecatedCPUManager} {
				if got := node.Labels[key]; got != tc.want {
					t.Errorf("label %s = %q, want %q (labels %v)", key, got, tc.want, node.Labels)
				}
			}
		})
	}
}
