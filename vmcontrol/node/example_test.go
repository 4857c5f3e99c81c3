package node_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/node"
)

// Unresponsive decides from the node agent's heartbeat annotation and the
// schedulable label whether a node's VMIs are stranded, and when a healthy
// node's heartbeat expires.
func ExampleUnresponsive() {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	agentNode := func(heartbeat time.Time) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        "node01",
			Labels:      map[string]string{v1.NodeSchedulable: "true"},
			Annotations: map[string]string{v1.VirtHandlerHeartbeat: heartbeat.Format(time.RFC3339)},
		}}
	}
	for _, tc := range []struct {
		what string
		node *corev1.Node
	}{
		{"heartbeat a minute ago", agentNode(now.Add(-time.Minute))},
		{"heartbeat ten minutes ago", agentNode(now.Add(-10 * time.Minute))},
		{"no agent", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node02"}}},
		{"deleted", nil},
	} {
		unresponsive, recheck := node.Unresponsive(tc.node, node.DefaultHeartbeatTimeout, now)
		fmt.Printf("%s: unresponsive=%v recheck=%v\n", tc.what, unresponsive, recheck)
	}
	// Output:
	// heartbeat a minute ago: unresponsive=false recheck=4m0s
	// heartbeat ten minutes ago: unresponsive=true recheck=0s
	// no agent: unresponsive=false recheck=0s
	// deleted: unresponsive=true recheck=0s
}
