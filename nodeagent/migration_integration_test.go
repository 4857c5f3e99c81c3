package nodeagent_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/nodeagent"
	"github.com/vmkit/vmkit/nodeagent/internal/podsim"
	"github.com/vmkit/vmkit/nodeagent/livemigration"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestAgentsMigrate runs two node agents (nodes mig-a and mig-b) against a
// real API server, each with launcher pods of its own (podsim: mount
// namespaces, non-root session libvirtds), and plays the migration
// controller's part by hand: the target label and status.migrationState.
// The agents do the rest: the target's proxy ports, the migration through
// their proxies over mutual TLS, the switch-over, the abort.
func TestAgentsMigrate(t *testing.T) {
	guest := podsim.Require(t)
	base, bin := podsim.Base(t)
	initrd := podsim.TickerInitramfs(t, guest.IdleInitramfs)
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{CRDs: all})
	client, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	for _, n := range []string{"mig-a", "mig-b"} {
		if _, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ns := "default"
	vmis := client.KubevirtV1().VirtualMachineInstances(ns)
	spec := podsim.VMI("")
	spec.UID = ""
	created, err := vmis.Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := created.UID
	vmi := created.DeepCopy()
	podA := podsim.Start(t, base, "a", bin, vmi, guest.Kernel, initrd)

	// The VMI controller's part: scheduled on mig-a.
	update(ctx, t, client, created.Name, func(v *v1.VirtualMachineInstance) {
		v.Labels = map[string]string{v1.NodeNameLabel: "mig-a"}
		v.Status.Phase, v.Status.NodeName = v1.Scheduled, "mig-a"
	})
	serverTLS, clientTLS := podsim.TLS(t)
	agentA := startAgent(ctx, t, client, env.Kube, "mig-a", filepath.Join(podA.Dir, "share"), serverTLS, clientTLS, 0)
	waitVMI(ctx, t, client, created.Name, 90*time.Second, "Running on mig-a", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.Phase == v1.Running
	})
	ticksA := podsim.WatchTicks(ctx, t, podA.Client)
	ticksA.WaitAbove(t, 2, time.Minute, "the guest ticking on mig-a")

	// Agent B finds the current target pod's sockets through a link: its
	// share directory itself (the agent follows no link below it).
	bShare := filepath.Join(base, "bshare")
	podB := podsim.Start(t, base, "b", bin, vmi, guest.Kernel, initrd)
	if err := os.Symlink(filepath.Join(podB.Dir, "share"), bShare); err != nil {
		t.Fatal(err)
	}
	// The node agent on mig-b as the source agent looks it up: a running
	// virt-handler pod at the migration address (this control plane runs no
	// controller that would make the namespace's service account).
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	handler, err := env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-handler-b", Labels: map[string]string{v1.AppLabel: v1.VirtHandlerValue}},
		Spec:       corev1.PodSpec{NodeName: "mig-b", Containers: []corev1.Container{{Name: "virt-handler", Image: "virt-handler"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	handler.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}}
	if _, err := env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, handler, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// startMigration creates the migration object, as a user does, and
	// writes what the migration controller would.
	startMigration := func(name string, cfg *v1.MigrationConfiguration) {
		m, err := client.KubevirtV1().VirtualMachineInstanceMigrations(ns).Create(ctx, &v1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: created.Name},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		update(ctx, t, client, created.Name, func(v *v1.VirtualMachineInstance) {
			v.Labels[v1.MigrationTargetNodeNameLabel] = "mig-b"
			v.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{
				MigrationUID: m.UID, SourceNode: "mig-a", TargetNode: "mig-b", TargetPod: "virt-launcher-b",
				MigrationConfiguration: cfg,
			}
		})
	}
	// 1 MiB/s (the KubeVirt CR's bandwidthPerMigration, as the controller
	// copies it): the transfer lasts long enough to abort it.
	slow := resource.MustParse("1Mi")
	startMigration("m-abort", &v1.MigrationConfiguration{BandwidthPerMigration: &slow})
	agentB := startAgent(ctx, t, client, env.Kube, "mig-b", bShare, serverTLS, clientTLS, 0)
	defer agentB.stop()

	t.Run("DeletingTheMigrationAbortsIt", func(t *testing.T) {
		v := waitVMI(ctx, t, client, created.Name, 90*time.Second, "the migration under way (1 MiB/s)", func(v *v1.VirtualMachineInstance) bool {
			ms := v.Status.MigrationState
			return ms != nil && ms.StartTimestamp != nil && ms.TargetNodeDomainDetected
		})
		if ms := v.Status.MigrationState; ms.TargetNodeAddress != "127.0.0.1" || len(ms.TargetDirectMigrationNodePorts) != 3 || ms.Mode != "PreCopy" {
			t.Errorf("migration state under way = %+v", ms)
		}
		// Each agent gave its launcher (uid 107) the pod's devices before
		// its QEMU started: the target's as the source's.
		for _, pod := range []*podsim.Pod{podA, podB} {
			if not := pod.DevicesNotGiven(); len(not) > 0 {
				t.Errorf("pod %s: devices not given to the launcher's user: %s", pod.Name, strings.Join(not, ", "))
			}
		}
		// What the migration controller does when the migration object
		// is deleted.
		update(ctx, t, client, created.Name, func(v *v1.VirtualMachineInstance) { v.Status.MigrationState.AbortRequested = true })
		v = waitVMI(ctx, t, client, created.Name, 90*time.Second, "the aborted migration failed", func(v *v1.VirtualMachineInstance) bool {
			ms := v.Status.MigrationState
			return ms.Failed && ms.EndTimestamp != nil
		})
		if ms := v.Status.MigrationState; !ms.Completed || !strings.Contains(ms.FailureReason, "aborted") {
			t.Errorf("aborted migration state: completed %v, failure reason %q", ms.Completed, ms.FailureReason)
		}
		if v.Status.NodeName != "mig-a" || v.Labels[v1.NodeNameLabel] != "mig-a" || v.Status.Phase != v1.Running {
			t.Errorf("after the abort: node %s, label %s, phase %s, migration %+v", v.Status.NodeName, v.Labels[v1.NodeNameLabel], v.Status.Phase, v.Status.MigrationState)
		}
		ticksA.WaitAbove(t, ticksA.Last()+2, 30*time.Second, "the guest ticking on mig-a after the abort")
		// The target agent stops its launcher and drops the target label.
		select {
		case <-podB.Done:
		case <-time.After(time.Minute):
			t.Fatalf("the target launcher was not stopped after the failed migration; log:\n%s", podB.Log())
		}
		waitVMI(ctx, t, client, created.Name, 30*time.Second, "the target label removed", func(v *v1.VirtualMachineInstance) bool {
			_, ok := v.Labels[v1.MigrationTargetNodeNameLabel]
			return !ok
		})
	})

	t.Run("MigrationMovesTheGuest", func(t *testing.T) {
		// A restarted agent on mig-a (it keeps nothing), and a new target pod.
		agentA.stop()
		agentA = startAgent(ctx, t, client, env.Kube, "mig-a", filepath.Join(podA.Dir, "share"), serverTLS, clientTLS, 0)
		defer agentA.stop()
		podB2 := podsim.Start(t, base, "b2", bin, vmi, guest.Kernel, initrd)
		if err := os.Remove(bShare); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(podB2.Dir, "share"), bShare); err != nil {
			t.Fatal(err)
		}
		last := ticksA.Last()
		start := time.Now()
		startMigration("m-2", nil)
		v := waitVMI(ctx, t, client, created.Name, 3*time.Minute, "the VMI switched over to mig-b", func(v *v1.VirtualMachineInstance) bool {
			return v.Status.MigrationState != nil && v.Status.MigrationState.Completed && v.Status.NodeName == "mig-b"
		})
		took := time.Since(start)
		ms := v.Status.MigrationState
		if v.UID != uid || v.Status.NodeName != "mig-b" || v.Labels[v1.NodeNameLabel] != "mig-b" || v.Status.Phase != v1.Running {
			t.Errorf("after the migration: uid %s (was %s), node %s, label %s, phase %s", v.UID, uid, v.Status.NodeName, v.Labels[v1.NodeNameLabel], v.Status.Phase)
		}
		if ms.Failed || ms.EndTimestamp == nil || ms.StartTimestamp == nil || !ms.TargetNodeDomainDetected || ms.TargetNodeDomainReadyTimestamp == nil {
			t.Errorf("migration state = %+v", ms)
		}
		t.Logf("migrated in %v (create of the migration state to completed written)", took)
		// The source launcher exits cleanly; the guest goes on on mig-b.
		select {
		case <-podA.Done:
			if podA.Err != nil {
				t.Errorf("source launcher: %v; log:\n%s", podA.Err, podA.Log())
			}
		case <-time.After(time.Minute):
			t.Errorf("the source launcher did not exit; log:\n%s", podA.Log())
		}
		ticksB := podsim.WatchTicks(ctx, t, podB2.Client)
		up := ticksB.WaitAbove(t, last+1, time.Minute, "the guest ticking on mig-b")
		t.Logf("the guest ticks on mig-b: uptime %.2f s (last on mig-a %.2f s)", up, last)
		if up > last+took.Seconds()+30 {
			t.Errorf("uptime %.2f s on mig-b is not the guest of mig-a (%.2f s)", up, last)
		}
		waitVMI(ctx, t, client, created.Name, 30*time.Second, "the target label removed", func(v *v1.VirtualMachineInstance) bool {
			_, ok := v.Labels[v1.MigrationTargetNodeNameLabel]
			return !ok
		})
		// Some seconds later the VMI is still Running on mig-b: neither agent
		// turned the source's end into a phase.
		time.Sleep(3 * time.Second)
		v, err := vmis.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil || v.Status.Phase != v1.Running || v.Status.NodeName != "mig-b" {
			t.Errorf("after the migration settled: %v %s %s", err, v.Status.Phase, v.Status.NodeName)
		}
		// Deleting the VMI stops the guest on mig-b.
		if err := vmis.Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-podB2.Done:
		case <-time.After(time.Minute):
			t.Errorf("the migrated guest's launcher did not stop after the VMI was deleted; log:\n%s", podB2.Log())
		}
	})
}

type runningAgent struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (r *runningAgent) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

func startAgent(ctx context.Context, t *testing.T, client versioned.Interface, kube kubernetes.Interface, node, share string, serverTLS, clientTLS *tls.Config, bandwidth uint64) *runningAgent {
	t.Helper()
	pods := filepath.Join(share, "..", "no-kubelet")
	a, err := nodeagent.New(nodeagent.Config{
		NodeName: node, Client: client, Kube: kube, ShareDir: share, KubeletPodsDir: pods,
		PollInterval: 200 * time.Millisecond, OrphanSweepInterval: -1,
		Migration: &livemigration.Config{Address: "127.0.0.1", ServerTLS: serverTLS, ClientTLS: clientTLS, HandlerNamespace: "default", BandwidthMiB: bandwidth},
	})
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	r := &runningAgent{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := a.Run(actx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("agent %s: %v", node, err)
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func update(ctx context.Context, t *testing.T, client versioned.Interface, name string, change func(*v1.VirtualMachineInstance)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, err := client.KubevirtV1().VirtualMachineInstances("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(v)
		_, err = client.KubevirtV1().VirtualMachineInstances("default").Update(ctx, v, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func waitVMI(ctx context.Context, t *testing.T, client versioned.Interface, name string, timeout time.Duration, what string, cond func(*v1.VirtualMachineInstance) bool) *v1.VirtualMachineInstance {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *v1.VirtualMachineInstance
	for time.Now().Before(deadline) {
		v, err := client.KubevirtV1().VirtualMachineInstances("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = v
			if cond(v) {
				return v
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("waiting %v for %s: phase %s node %s labels %v migration %+v", timeout, what, last.Status.Phase, last.Status.NodeName, last.Labels, last.Status.MigrationState)
	}
	t.Fatalf("waiting %v for %s", timeout, what)
	return nil
}
