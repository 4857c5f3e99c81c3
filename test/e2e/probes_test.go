package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestProbes: VMI readiness and liveness probes, as KubeVirt's, on
// examples/vm-net.yaml's guest (it answers HTTP on port 80 and runs the
// QEMU guest agent). Five VMs at once:
//   - examples/vm-probes.yaml (an httpGet readiness probe on port 80, a
//     guestAgentPing liveness probe): the VMI becomes Ready, and so its VM,
//     and a Service's endpoint of it is ready;
//   - a tcpSocket readiness probe on closed port 81: the VMI runs but stays
//     not Ready with the pod's reason (ContainersNotReady), its endpoint
//     not ready;
//   - a guestAgentPing readiness probe and an exec liveness probe (a command
//     run in the guest by the agent, appending a line to a file the guest
//     serves): Ready, the command ran several times, and the liveness probe
//     does not restart it;
//   - an exec readiness probe whose command exits 1 in the guest: not Ready;
//   - a tcpSocket liveness probe on closed port 81: the kubelet stops the
//     launcher, the VMI fails (LauncherTerminated) and the VM, runStrategy
//     Always, starts a new one.
func TestProbes(t *testing.T) {
	c := suite.Need(t)
	probeVM := func(name string, readiness, liveness *v1.Probe) *v1.VirtualMachine {
		vm := framework.ExampleVM(t, "vm-net.yaml", name, v1.RunStrategyAlways)
		vm.Spec.Template.Spec.ReadinessProbe, vm.Spec.Template.Spec.LivenessProbe = readiness, liveness
		return vm
	}
	i32 := func(v int32) *int32 { return &v }
	closed := &corev1.TCPSocketAction{Port: intstr.FromInt32(81)}
	// examples/vm-probes.yaml: httpGet readiness on port 80, guestAgentPing liveness.
	httpReady := framework.ExampleVM(t, "vm-probes.yaml", "vm-probe-http", v1.RunStrategyAlways)
	closedReady := probeVM("vm-probe-closed", &v1.Probe{TCPSocket: closed, PeriodSeconds: i32(2), FailureThreshold: i32(1)}, nil)
	// A probe through the guest agent fails until the guest has booted and
	// its agent connected (as KubeVirt's), so a liveness probe must allow for
	// the boot, as users do with initialDelaySeconds: here 10 failures of
	// 3 s. With 2, a boot slowed down by the other packages' guests on a
	// loaded CI machine (agent up 25 s after the VMI's creation) had the
	// kubelet kill the launcher while the guest booted.
	const livePeriod, liveFailures = 3, 10
	agent := probeVM("vm-probe-agent", &v1.Probe{GuestAgentPing: &v1.GuestAgentPing{}, PeriodSeconds: i32(2), TimeoutSeconds: i32(5)},
		&v1.Probe{Exec: &corev1.ExecAction{Command: []string{"/bin/busybox", "sh", "-c", "echo alive >>/www/live"}},
			PeriodSeconds: i32(livePeriod), TimeoutSeconds: i32(5), FailureThreshold: i32(liveFailures)})
	execFails := probeVM("vm-probe-exec", &v1.Probe{Exec: &corev1.ExecAction{Command: []string{"/bin/busybox", "false"}}, PeriodSeconds: i32(2), TimeoutSeconds: i32(5)}, nil)
	live := probeVM("vm-probe-live", nil, &v1.Probe{TCPSocket: closed, PeriodSeconds: i32(2), FailureThreshold: i32(2)})

	for _, vm := range []*v1.VirtualMachine{httpReady, closedReady, agent, execFails, live} {
		framework.CreateVM(t, c, vm)
	}
	svcHTTP := expose(t, c, httpReady.Name, 8000, 80)
	svcAgent := expose(t, c, agent.Name, 8000, 80)
	expose(t, c, closedReady.Name, 8000, 80)

	readyCond := func(vmi *v1.VirtualMachineInstance) v1.VirtualMachineInstanceCondition {
		if cond := vmi.VMICondition(v1.VirtualMachineInstanceReady); cond != nil {
			return *cond
		}
		return v1.VirtualMachineInstanceCondition{}
	}
	isReady := func(vmi *v1.VirtualMachineInstance) bool {
		return running(vmi) && readyCond(vmi).Status == corev1.ConditionTrue
	}

	t.Run("HTTPGetReadiness", func(t *testing.T) {
		vmi := framework.WaitVMI(t, c, httpReady.Name, "Ready", isReady)
		t.Logf("%s: VMI created → Running %v → Ready %v (initial delay 10 s, then every 2 s)", httpReady.Name,
			phaseAt(vmi, v1.Running).Sub(vmi.CreationTimestamp.Time), readyCond(vmi).LastTransitionTime.Sub(vmi.CreationTimestamp.Time))
		pod := launcherPod(t, c, vmi)
		if p := pod.Spec.Containers[0].ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Port.IntVal != 80 || p.InitialDelaySeconds != 10 {
			t.Errorf("compute container's readiness probe %+v, want the VMI's httpGet on port 80 with initialDelaySeconds 10", p)
		}
		suite.WaitFor(t, "VM "+httpReady.Name+" status.ready", time.Minute, func() (bool, string) {
			vm, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), httpReady.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return vm.Status.Ready, fmt.Sprintf("ready %v, printableStatus %s", vm.Status.Ready, vm.Status.PrintableStatus)
		})
		waitEndpoint(t, c, httpReady.Name+"-http", pod.Status.PodIP, true)
		suite.HTTPGetUntil(t, framework.GuestURL(svcHTTP, 8000, "/"), "vmkit guest "+httpReady.Name, 30*time.Second)
	})

	t.Run("ClosedPortReadiness", func(t *testing.T) {
		vmi := framework.WaitVMI(t, c, closedReady.Name, "Running", running)
		// Past the 10 s initial delay and several 2 s periods, the VMI must
		// still not be Ready, with the pod's reason.
		until := time.Now().Add(25 * time.Second)
		for time.Now().Before(until) {
			got, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(t.Context(), closedReady.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cond := readyCond(got); cond.Status == corev1.ConditionTrue {
				t.Fatalf("VMI %s became Ready with a readiness probe on a closed port: %+v", closedReady.Name, cond)
			}
			vmi = got
			time.Sleep(time.Second)
		}
		cond := readyCond(vmi)
		if !running(vmi) || cond.Status != corev1.ConditionFalse || cond.Reason != "ContainersNotReady" || !strings.Contains(cond.Message, "compute") {
			t.Errorf("VMI %s: phase %s, Ready %+v; want Running, Ready False ContainersNotReady naming compute", closedReady.Name, vmi.Status.Phase, cond)
		}
		vm, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), closedReady.Name, metav1.GetOptions{})
		if err != nil || vm.Status.Ready {
			t.Errorf("VM %s: ready %v (err %v), want false", closedReady.Name, vm.Status.Ready, err)
		}
		waitEndpoint(t, c, closedReady.Name+"-http", launcherPod(t, c, vmi).Status.PodIP, false)
	})

	t.Run("GuestAgentReadinessExecLiveness", func(t *testing.T) {
		vmi := framework.WaitVMI(t, c, agent.Name, "Ready (guest-ping)", isReady)
		t.Logf("%s: VMI created → Running %v → Ready through guest-ping %v", agent.Name,
			phaseAt(vmi, v1.Running).Sub(vmi.CreationTimestamp.Time), readyCond(vmi).LastTransitionTime.Sub(vmi.CreationTimestamp.Time))
		pod := launcherPod(t, c, vmi)
		if p := pod.Spec.Containers[0].ReadinessProbe; p == nil || p.Exec == nil || !strings.Contains(strings.Join(p.Exec.Command, " "), "--probe readiness") {
			t.Errorf("compute container's readiness probe %+v, want virt-launcher --probe readiness", p)
		}
		// The exec liveness probe keeps passing: wait until a probe that
		// never passed would have had the launcher killed (the initial delay
		// and every allowed failure, from the compute container's start),
		// and at least 15 s of probes after Ready. Then: same VMI, the pod
		// Running, the container never restarted, still Ready, and the
		// command ran in the guest more than once.
		var started time.Time
		for _, st := range pod.Status.ContainerStatuses {
			if st.Name == "compute" && st.State.Running != nil {
				started = st.State.Running.StartedAt.Time
			}
		}
		if started.IsZero() {
			t.Fatalf("launcher pod %s: compute container not running: %+v", pod.Name, pod.Status.ContainerStatuses)
		}
		killBy := started.Add(time.Duration(v1.ProbeStartupDelay+livePeriod*liveFailures+5) * time.Second)
		time.Sleep(max(time.Until(killBy), 15*time.Second))
		got, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(t.Context(), agent.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		warnings := func() string { return events(t.Context(), c.Kube.CoreV1().Events("default")) }
		if got.UID != vmi.UID || !isReady(got) {
			t.Errorf("VMI %s %v after its compute container started, with exec liveness probes: uid %s (was %s), phase %s, Ready %+v; warnings: %s",
				agent.Name, time.Since(started).Round(time.Second), got.UID, vmi.UID, got.Status.Phase, readyCond(got), warnings())
		}
		p, err := c.Kube.CoreV1().Pods("default").Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			t.Fatalf("launcher pod %s: %v, err %v; want Running; warnings: %s", pod.Name, p.Status.Phase, err, warnings())
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.RestartCount != 0 {
				t.Errorf("launcher pod %s: container %s restarted %d times; warnings: %s", pod.Name, st.Name, st.RestartCount, warnings())
			}
		}
		body := suite.HTTPGetUntil(t, framework.GuestURL(svcAgent, 8000, "/live"), "alive", 30*time.Second)
		if n := strings.Count(body, "alive"); n < 3 {
			t.Errorf("the liveness command ran %d times in the guest of %s in %v, want 3 or more", n, agent.Name, time.Since(started).Round(time.Second))
		} else {
			t.Logf("%s: the exec liveness command ran %d times in the guest", agent.Name, n)
		}
	})

	t.Run("ExecReadinessFails", func(t *testing.T) {
		framework.WaitVMI(t, c, execFails.Name, "Running", running)
		time.Sleep(20 * time.Second)
		vmi, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(t.Context(), execFails.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cond := readyCond(vmi); !running(vmi) || cond.Status != corev1.ConditionFalse || cond.Reason != "ContainersNotReady" {
			t.Errorf("VMI %s with a readiness command exiting 1: phase %s, Ready %+v; want Running, not Ready", execFails.Name, vmi.Status.Phase, cond)
		}
	})

	t.Run("LivenessFails", func(t *testing.T) {
		first := framework.WaitVMI(t, c, live.Name, "Running", running)
		var sawFailed string
		next := framework.WaitVMI(t, c, live.Name, "replaced by a new VMI that runs", func(vmi *v1.VirtualMachineInstance) bool {
			if vmi.UID == first.UID && vmi.Status.Phase == v1.Failed {
				sawFailed = vmi.Status.Reason
			}
			return vmi.UID != first.UID && running(vmi)
		})
		reason, failedAt := failedEvent(t, c, first.UID)
		if sawFailed == "" {
			sawFailed = reason
		}
		t.Logf("%s: VMI %s Running at %s, failed (event) %v later, next VMI created %v and Running %v later", live.Name, first.UID,
			phaseAt(first, v1.Running).Format(time.TimeOnly), failedAt.Sub(phaseAt(first, v1.Running)),
			next.CreationTimestamp.Sub(phaseAt(first, v1.Running)), phaseAt(next, v1.Running).Sub(phaseAt(first, v1.Running)))
		if sawFailed != "LauncherTerminated" {
			t.Errorf("first VMI %s: failure reason %q, want LauncherTerminated", first.UID, sawFailed)
		}
		if next.UID == first.UID {
			t.Errorf("no new VMI")
		}
	})
}

// waitEndpoint waits until the Service's EndpointSlices hold ip with the
// given readiness.
func waitEndpoint(t testing.TB, c *cluster.Cluster, service, ip string, ready bool) {
	t.Helper()
	suite.WaitFor(t, fmt.Sprintf("endpoint %s of Service %s with ready=%v", ip, service, ready), time.Minute, func() (bool, string) {
		slices, err := c.Kube.DiscoveryV1().EndpointSlices("default").List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				r := e.Conditions.Ready != nil && *e.Conditions.Ready
				seen = append(seen, fmt.Sprintf("%v ready=%v", e.Addresses, r))
				for _, a := range e.Addresses {
					if a == ip && r == ready {
						return true, ""
					}
				}
			}
		}
		return false, strings.Join(seen, ", ")
	})
}

// phaseAt is when the VMI entered phase p (zero if it did not).
func phaseAt(vmi *v1.VirtualMachineInstance, p v1.VirtualMachineInstancePhase) time.Time {
	for _, ts := range vmi.Status.PhaseTransitionTimestamps {
		if ts.Phase == p {
			return ts.PhaseTransitionTimestamp.Time
		}
	}
	return time.Time{}
}

// failedEvent is the failure reason and time of the node agent's Warning
// event Stopped ("The VirtualMachineInstance crashed. <reason>: ...") on
// the VMI of uid, or "".
func failedEvent(t testing.TB, c *cluster.Cluster, uid types.UID) (string, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := c.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid)})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if rest, ok := strings.CutPrefix(e.Message, "The VirtualMachineInstance crashed. "); ok && e.Reason == "Stopped" && e.Type == corev1.EventTypeWarning {
			at := e.LastTimestamp.Time
			if at.IsZero() {
				at = e.EventTime.Time
			}
			reason, _, _ := strings.Cut(rest, ":")
			return reason, at
		}
	}
	return "", time.Time{}
}
