package e2e2node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/evacuation"
)

// TestDrain: `kubectl drain` of the node a LiveMigrate VM runs on does not
// kill it. virt-api refuses the launcher's eviction and marks the VMI for
// evacuation, the evacuation controller creates a migration, the guest moves
// to the other node (same UID, answering HTTP on its new pod IP), the source
// launcher completes and the drain ends.
func TestDrain(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	vm := netVM(t, "vm-drain", c.Env.Nodes[0].Name)
	vm.Spec.Template.Spec.NodeSelector = nil // it must be free to move
	live := v1.EvictionStrategyLiveMigrate
	vm.Spec.Template.Spec.EvictionStrategy = &live
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running with an IP", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == v1.Running && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	uid, source, ip := vmi.UID, vmi.Status.NodeName, vmi.Status.Interfaces[0].IP
	suite.HTTPGetUntil(t, guestURL(ip, "/"), "vmkit guest "+vm.Name, 90*time.Second)

	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "kubectl")); err != nil {
		t.Fatalf("kubectl is not in %s (%v): run hack/setup-k8s.sh (make test-deps)", bin, err)
	}
	kubectl := func(ctx context.Context, args ...string) ([]byte, error) {
		args = append([]string{"--kubeconfig", c.Env.KubeconfigPath}, args...)
		return exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), args...).CombinedOutput()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := kubectl(ctx, "uncordon", source); err != nil {
			t.Errorf("kubectl uncordon %s: %v\n%s", source, err, out)
		}
	})
	began := time.Now()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// Only the launchers: the drain of vmkit's own pods is not under test.
	out, err := kubectl(dctx, "drain", source, "--pod-selector=kubevirt.io=virt-launcher",
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout=4m")
	if err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s\n%s", source, err, out, framework.ComponentLogs(c))
	}
	took := time.Since(began)
	t.Logf("kubectl drain %s: %v\n%s", source, took.Round(time.Millisecond), out)

	v := framework.WaitVMI(t, c, vm.Name, "Running on the other node", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.Phase == v1.Running && v.Status.NodeName != source && v.Status.NodeName != ""
	})
	if v.UID != uid {
		t.Errorf("after the drain the VMI has UID %s, was %s: it was restarted, not migrated", v.UID, uid)
	}
	if v.Status.EvacuationNodeName != "" {
		t.Errorf("evacuationNodeName = %q after the guest moved, want it cleared", v.Status.EvacuationNodeName)
	}
	migs, err := c.Client.KubevirtV1().VirtualMachineInstanceMigrations("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var evacuations []string
	for _, m := range migs.Items {
		if m.Spec.VMIName == vm.Name && m.Annotations[evacuation.MigrationAnnotation] == source {
			evacuations = append(evacuations, fmt.Sprintf("%s (%s)", m.Name, m.Status.Phase))
			if m.Status.Phase != v1.MigrationSucceeded {
				t.Errorf("evacuation migration %s: phase %s, want Succeeded", m.Name, m.Status.Phase)
			}
		}
	}
	if len(evacuations) != 1 {
		t.Errorf("evacuation migrations of %s from %s: %v, want one", vm.Name, source, evacuations)
	}
	v = framework.WaitVMI(t, c, vm.Name, "with its new pod's IP", func(v *v1.VirtualMachineInstance) bool {
		return len(v.Status.Interfaces) > 0 && v.Status.Interfaces[0].IP != "" && v.Status.Interfaces[0].IP != ip
	})
	suite.HTTPGetUntil(t, guestURL(v.Status.Interfaces[0].IP, "/"), "vmkit guest "+vm.Name, 90*time.Second)
	// The source launcher pod completed (then the drain removed it): none
	// of the VMI's pods is left running on the drained node.
	pods, err := c.Env.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(uid)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == source && p.Status.Phase == corev1.PodRunning {
			t.Errorf("launcher pod %s still Running on the drained node %s", p.Name, source)
		}
	}
	t.Logf("drained %s: the guest moved to %s by %v", source, v.Status.NodeName, evacuations)
}
