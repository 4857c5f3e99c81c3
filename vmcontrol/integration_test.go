package vmcontrol_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vmkit/vmkit/internal/delegatedauth"
	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/podtemplate"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol"
	"github.com/vmkit/vmkit/vmcontrol/vm"
)

const ns = "default"

type cluster struct {
	env    *testenv.Env
	client versioned.Interface
	kube   kubernetes.Interface
}

// startCluster starts an API server with vmkit's CRDs and the extra ones,
// and kube-controller-manager (garbage collection, service accounts).
func startCluster(t *testing.T, extra ...*apiextensionsv1.CustomResourceDefinition) *cluster {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{CRDs: append(all, extra...), WithControllerManager: true})
	client, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{env: env, client: client, kube: env.Kube}
	// Pods need the namespace's default ServiceAccount, which the controller manager creates.
	waitFor(t, 60*time.Second, "default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return c
}

// startManager runs a Manager until the test ends or stop is called.
func (c *cluster) startManager(t *testing.T, le vmcontrol.LeaderElection, mutate ...func(*vmcontrol.Options)) (m *vmcontrol.Manager, stop func()) {
	t.Helper()
	opts := vmcontrol.Options{Config: c.env.Config, HTTPAddr: "127.0.0.1:0", LeaderElection: le,
		PodTemplate: &podtemplate.Config{LauncherImage: "vmkit/virt-launcher:test", EmulationAllowed: true}}
	for _, f := range mutate {
		f(&opts)
	}
	m, err := vmcontrol.NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("manager: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("manager did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	return m, stop
}

// fakeKubelet stands in for a node: it binds launcher pods to node01, marks
// them running and ready (as a kubelet would once containers start), and
// finishes graceful deletions.
func (c *cluster) fakeKubelet(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtLauncherValue})
			if err == nil {
				for i := range pods.Items {
					c.kubeletStep(ctx, &pods.Items[i])
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

func (c *cluster) kubeletStep(ctx context.Context, pod *corev1.Pod) {
	switch {
	case pod.DeletionTimestamp != nil:
		zero := int64(0)
		_ = c.kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	case pod.Spec.NodeName == "":
		_ = c.kube.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "node01"},
		}, metav1.CreateOptions{})
	case pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending:
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		for _, ct := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: ct.Name, Ready: true, Image: ct.Image})
		}
		_, _ = c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// consistently checks for d, every 50 ms and once more at the end, that a
// controller does not do what it must not: check returns an error naming
// what it found, and the test fails at once. An action that never comes
// can only be looked for over a window; looking throughout it, rather than
// once after a sleep, also catches an action undone before the window ends.
func consistently(t *testing.T, d time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var found error
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		found = check(context.WithoutCancel(ctx))
		return found != nil, nil
	})
	if found == nil {
		found = check(context.Background())
	}
	if found != nil {
		t.Fatalf("%s: %v", what, found)
	}
}

func newVM(name string, strategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: v1.RunStrategyPtr(strategy),
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: v1.VirtualMachineInstanceSpec{
					Domain: v1.DomainSpec{
						Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
						Devices:   v1.Devices{Disks: []v1.Disk{{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}}},
					},
					Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "quay.io/kubevirt/cirros-container-disk-demo"}}}},
				},
			},
		},
	}
}

func (c *cluster) createVM(t *testing.T, vm *v1.VirtualMachine) {
	t.Helper()
	if _, err := c.client.KubevirtV1().VirtualMachines(ns).Create(context.Background(), vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) vmi(ctx context.Context, name string) (*v1.VirtualMachineInstance, error) {
	return c.client.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{})
}

func (c *cluster) waitVMIPhase(t *testing.T, name string, phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
	t.Helper()
	var got *v1.VirtualMachineInstance
	waitFor(t, 30*time.Second, fmt.Sprintf("VMI %s in phase %s", name, phase), func(ctx context.Context) (bool, error) {
		vmi, err := c.vmi(ctx, name)
		if err != nil {
			return false, nil
		}
		got = vmi
		return vmi.Status.Phase == phase, nil
	})
	return got
}

func (c *cluster) waitVMStatus(t *testing.T, name string, want v1.VirtualMachinePrintableStatus) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("VM %s status %s", name, want), func(ctx context.Context) (bool, error) {
		vm, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && vm.Status.PrintableStatus == want, nil
	})
}

func (c *cluster) waitNoVMI(t *testing.T, name string) {
	t.Helper()
	waitFor(t, 30*time.Second, "VMI "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := c.vmi(ctx, name)
		return apierrors.IsNotFound(err), nil
	})
}

// setVMIPhase plays the node agent's part: it moves the guest to a phase.
func (c *cluster) setVMIPhase(t *testing.T, name string, phase v1.VirtualMachineInstancePhase) {
	t.Helper()
	waitFor(t, 10*time.Second, "VMI status write", func(ctx context.Context) (bool, error) {
		vmi, err := c.vmi(ctx, name)
		if err != nil {
			return false, err
		}
		vmi.Status.Phase = phase
		vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
			v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: phase, PhaseTransitionTimestamp: metav1.Now()})
		_, err = c.client.KubevirtV1().VirtualMachineInstances(ns).Update(ctx, vmi, metav1.UpdateOptions{})
		return err == nil, nil // retry conflicts with the controller
	})
}

func (c *cluster) launcherPods(t *testing.T, vmi *v1.VirtualMachineInstance) []corev1.Pod {
	t.Helper()
	pods, err := c.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func TestControllers(t *testing.T) {
	c := startCluster(t)
	c.fakeKubelet(t)
	// The HTTP server as cmd/virt-controller runs it: TLS, and /metrics and
	// the profiles only to whom the API server authenticates and allows.
	serving, err := delegatedauth.SelfSignedTLS("virt-controller", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	guard, err := delegatedauth.New(t.Context(), delegatedauth.Config{Client: c.env.Config})
	if err != nil {
		t.Fatal(err)
	}
	m, stop := c.startManager(t, vmcontrol.LeaderElection{}, func(o *vmcontrol.Options) {
		o.HTTPTLS, o.HTTPGuard, o.Profiling = serving, guard.Handler, true
	})

	t.Run("AlwaysToScheduledAndRestart", func(t *testing.T) {
		c.createVM(t, newVM("always", v1.RunStrategyAlways))
		vmi := c.waitVMIPhase(t, "always", v1.Scheduled)
		if vmi.Status.NodeName != "node01" || len(vmi.Status.ActivePods) != 1 || vmi.Status.QOSClass == nil {
			t.Errorf("scheduled VMI status = %+v", vmi.Status)
		}
		waitFor(t, 10*time.Second, "nodeName label", func(ctx context.Context) (bool, error) {
			v, err := c.vmi(ctx, "always")
			return err == nil && v.Labels[v1.NodeNameLabel] == "node01", nil
		})
		pods := c.launcherPods(t, vmi)
		if len(pods) != 1 || metav1.GetControllerOf(&pods[0]).UID != vmi.UID || pods[0].Annotations[v1.DomainAnnotation] != "always" {
			t.Fatalf("launcher pods = %d, first %+v", len(pods), pods)
		}
		c.waitVMStatus(t, "always", v1.VirtualMachineStatusStarting)
		c.setVMIPhase(t, "always", v1.Running)
		c.waitVMStatus(t, "always", v1.VirtualMachineStatusRunning)

		// The guest shuts down: Always starts a new instance.
		c.setVMIPhase(t, "always", v1.Succeeded)
		waitFor(t, 30*time.Second, "a new VMI", func(ctx context.Context) (bool, error) {
			v, err := c.vmi(ctx, "always")
			return err == nil && v.UID != vmi.UID, nil
		})
		if got := c.launcherPods(t, vmi); len(got) != 0 {
			t.Errorf("the old VMI's pod survived: %d", len(got))
		}
	})

	t.Run("RerunOnFailure", func(t *testing.T) {
		c.createVM(t, newVM("rerun", v1.RunStrategyRerunOnFailure))
		first := c.waitVMIPhase(t, "rerun", v1.Scheduled)
		c.setVMIPhase(t, "rerun", v1.Running)
		c.setVMIPhase(t, "rerun", v1.Failed)
		waitFor(t, 30*time.Second, "a new VMI after failure", func(ctx context.Context) (bool, error) {
			v, err := c.vmi(ctx, "rerun")
			return err == nil && v.UID != first.UID, nil
		})
		second := c.waitVMIPhase(t, "rerun", v1.Scheduled)
		c.setVMIPhase(t, "rerun", v1.Running)
		c.setVMIPhase(t, "rerun", v1.Succeeded)
		// As KubeVirt: the succeeded VMI is removed and none replaces it.
		c.waitVMStatus(t, "rerun", v1.VirtualMachineStatusStopped)
		waitFor(t, 30*time.Second, "the succeeded VMI removed", func(ctx context.Context) (bool, error) {
			_, err := c.vmi(ctx, "rerun")
			return apierrors.IsNotFound(err), nil
		})
		consistently(t, 2*time.Second, "a RerunOnFailure VM whose guest shut down", func(ctx context.Context) error {
			if v, err := c.vmi(ctx, "rerun"); err == nil {
				return fmt.Errorf("started again: VMI %s (was %s)", v.UID, second.UID)
			} else if !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		})
	})

	t.Run("PodFailureFailsVMIAndBacksOff", func(t *testing.T) {
		c.createVM(t, newVM("crashy", v1.RunStrategyAlways))
		vmi := c.waitVMIPhase(t, "crashy", v1.Scheduled)
		pod := c.launcherPods(t, vmi)[0]
		pod.Status.Phase = corev1.PodFailed
		if _, err := c.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), &pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.waitVMStatus(t, "crashy", v1.VirtualMachineStatusCrashLoopBackOff)
		vm, _ := c.client.KubevirtV1().VirtualMachines(ns).Get(context.Background(), "crashy", metav1.GetOptions{})
		if vm.Status.StartFailure == nil || vm.Status.StartFailure.ConsecutiveFailCount != 1 || vm.Status.StartFailure.LastFailedVMIUID != vmi.UID {
			t.Fatalf("startFailure = %+v", vm.Status.StartFailure)
		}
	})

	t.Run("HaltedAndRunStrategyChange", func(t *testing.T) {
		c.createVM(t, newVM("halted", v1.RunStrategyHalted))
		c.waitVMStatus(t, "halted", v1.VirtualMachineStatusStopped)
		patchStrategy(t, c, "halted", v1.RunStrategyAlways)
		c.waitVMIPhase(t, "halted", v1.Scheduled)
		patchStrategy(t, c, "halted", v1.RunStrategyHalted)
		c.waitNoVMI(t, "halted")
		c.waitVMStatus(t, "halted", v1.VirtualMachineStatusStopped)
	})

	t.Run("ManualWithRequests", func(t *testing.T) {
		c.createVM(t, newVM("manual", v1.RunStrategyManual))
		c.waitVMStatus(t, "manual", v1.VirtualMachineStatusStopped)
		request(t, c, "manual", v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})
		vmi := c.waitVMIPhase(t, "manual", v1.Scheduled)
		waitFor(t, 10*time.Second, "start request cleared", func(ctx context.Context) (bool, error) {
			vm, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, "manual", metav1.GetOptions{})
			return err == nil && len(vm.Status.StateChangeRequests) == 0, nil
		})
		request(t, c, "manual", v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &vmi.UID})
		c.waitNoVMI(t, "manual")
	})

	t.Run("OnceNeverRestarts", func(t *testing.T) {
		c.createVM(t, newVM("once", v1.RunStrategyOnce))
		vmi := c.waitVMIPhase(t, "once", v1.Scheduled)
		c.setVMIPhase(t, "once", v1.Running)
		c.setVMIPhase(t, "once", v1.Failed)
		c.waitVMStatus(t, "once", v1.VirtualMachineStatusStopped)
		consistently(t, time.Second, "a Once VM whose VMI failed", func(ctx context.Context) error {
			v, err := c.vmi(ctx, "once")
			if err != nil || v.UID != vmi.UID || v.Status.Phase != v1.Failed {
				return fmt.Errorf("restarted or lost its VMI: %v %v", v, err)
			}
			return nil
		})
	})

	t.Run("AdoptsOrphanVMI", func(t *testing.T) {
		orphan, err := vm.NewVMI(newVM("orphan", v1.RunStrategyAlways))
		if err != nil {
			t.Fatal(err)
		}
		orphan.OwnerReferences = nil
		created, err := c.client.KubevirtV1().VirtualMachineInstances(ns).Create(context.Background(), orphan, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.createVM(t, newVM("orphan", v1.RunStrategyAlways))
		waitFor(t, 30*time.Second, "adoption", func(ctx context.Context) (bool, error) {
			v, err := c.vmi(ctx, "orphan")
			return err == nil && metav1.GetControllerOf(v) != nil && v.UID == created.UID, nil
		})
		c.waitVMIPhase(t, "orphan", v1.Scheduled)
	})

	t.Run("DeleteVMCollectsVMI", func(t *testing.T) {
		c.createVM(t, newVM("doomed", v1.RunStrategyAlways))
		vmi := c.waitVMIPhase(t, "doomed", v1.Scheduled)
		bg := metav1.DeletePropagationBackground
		if err := c.client.KubevirtV1().VirtualMachines(ns).Delete(context.Background(), "doomed", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Fatal(err)
		}
		c.waitNoVMI(t, "doomed")
		waitFor(t, 30*time.Second, "launcher pod gone", func(ctx context.Context) (bool, error) {
			return len(c.launcherPods(t, vmi)) == 0, nil
		})
	})

	t.Run("Metrics", func(t *testing.T) {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed
		defer client.CloseIdleConnections()
		get := func(path, token string) (int, string) {
			t.Helper()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+m.HTTPAddr()+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		// Without credentials: the probes' paths only (#35 N5: /metrics
		// lists every VMI's namespace, name, node and pod).
		for path, want := range map[string]int{"/metrics": http.StatusUnauthorized, "/debug/pprof/": http.StatusUnauthorized, "/healthz": http.StatusOK, "/readyz": http.StatusOK} {
			if code, body := get(path, ""); code != want {
				t.Errorf("GET %s without credentials: %d %q, want %d", path, code, body, want)
			}
		}
		code, body := get("/metrics", c.env.AdminToken)
		if code != http.StatusOK {
			t.Fatalf("GET /metrics as the admin: %d %q", code, body)
		}
		for _, want := range []string{
			`kubevirt_vmi_phase_transition_time_from_creation_seconds_bucket{phase="Scheduled",le="0.5"}`,
			`vmkit_controller_reconcile_total{controller="virtualmachine",result="success"}`,
			`workqueue_depth{name="virtualmachineinstance"}`,
			"kubevirt_virt_controller_leading_status 1",
			"kubevirt_virt_controller_ready_status 1",
			`kubevirt_vmi_info{evictable="true",`,
			`kubevirt_vmi_phase_count{`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})

	t.Run("APIServerRestart", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := c.env.RestartAPIServer(ctx, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		// Watches broke and must be re-established: a new VM still gets its VMI scheduled.
		c.createVM(t, newVM("after-restart", v1.RunStrategyAlways))
		c.waitVMIPhase(t, "after-restart", v1.Scheduled)
	})

	t.Run("RestartMakesNoDuplicates", func(t *testing.T) {
		for i := range 10 {
			c.createVM(t, newVM(fmt.Sprintf("restart-%d", i), v1.RunStrategyAlways))
		}
		// Stop the manager mid-flight: once it has made the first launcher pod.
		waitFor(t, 30*time.Second, "a launcher pod of the restart-N VMs", func(ctx context.Context) (bool, error) {
			pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtLauncherValue})
			if err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if strings.HasPrefix(p.Name, "virt-launcher-restart-") {
					return true, nil
				}
			}
			return false, nil
		})
		stop()
		_, _ = c.startManager(t, vmcontrol.LeaderElection{})
		for i := range 10 {
			vmi := c.waitVMIPhase(t, fmt.Sprintf("restart-%d", i), v1.Scheduled)
			if n := len(c.launcherPods(t, vmi)); n != 1 {
				t.Errorf("VMI %s has %d launcher pods, want 1", vmi.Name, n)
			}
		}
	})
}

func TestLeaderElection(t *testing.T) {
	c := startCluster(t)
	c.fakeKubelet(t)
	le := func(id string) vmcontrol.LeaderElection {
		return vmcontrol.LeaderElection{Enabled: true, Namespace: ns, Identity: id,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
	}
	a, stopA := c.startManager(t, le("a"))
	b, stopB := c.startManager(t, le("b"))
	waitFor(t, 20*time.Second, "a leader", func(context.Context) (bool, error) { return a.Leading() || b.Leading(), nil })
	consistently(t, time.Second, "leader election", func(context.Context) error {
		if a.Leading() && b.Leading() {
			return errors.New("both managers lead")
		}
		return nil
	})
	if a.Leading() == b.Leading() {
		t.Fatalf("exactly one manager must lead: a=%v b=%v", a.Leading(), b.Leading())
	}
	for i := range 5 {
		c.createVM(t, newVM(fmt.Sprintf("le-%d", i), v1.RunStrategyAlways))
	}
	for i := range 5 {
		vmi := c.waitVMIPhase(t, fmt.Sprintf("le-%d", i), v1.Scheduled)
		if n := len(c.launcherPods(t, vmi)); n != 1 {
			t.Errorf("%s: %d pods", vmi.Name, n)
		}
	}
	leader, stopLeader, standby := a, stopA, b
	if b.Leading() {
		leader, stopLeader, standby = b, stopB, a
	}
	// KubeVirt's leader metrics; only the leader, which runs the
	// controllers, exports the VMIs (so they are not counted twice).
	for _, tc := range []struct {
		who                   string
		m                     *vmcontrol.Manager
		leading, ready, infos float64
	}{{"leader", leader, 1, 1, 5}, {"standby", standby, 0, 1, 0}} {
		got := map[string]float64{}
		mfs, err := tc.m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				got[mf.GetName()] += m.GetGauge().GetValue()
			}
		}
		if got["kubevirt_virt_controller_leading_status"] != tc.leading || got["kubevirt_virt_controller_ready_status"] != tc.ready || got["kubevirt_vmi_info"] != tc.infos {
			t.Errorf("%s: leading_status %v, ready_status %v, %v kubevirt_vmi_info series; want %v, %v, %v", tc.who,
				got["kubevirt_virt_controller_leading_status"], got["kubevirt_virt_controller_ready_status"], got["kubevirt_vmi_info"], tc.leading, tc.ready, tc.infos)
		}
	}
	stopLeader()
	if leader.Leading() {
		t.Fatal("a stopped manager still reports leading")
	}
	waitFor(t, 20*time.Second, "failover to the standby", func(context.Context) (bool, error) { return standby.Leading(), nil })
	c.createVM(t, newVM("after-failover", v1.RunStrategyAlways))
	c.waitVMIPhase(t, "after-failover", v1.Scheduled)
}

func patchStrategy(t *testing.T, c *cluster, name string, s v1.VirtualMachineRunStrategy) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"runStrategy": s}})
	if _, err := c.client.KubevirtV1().VirtualMachines(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func request(t *testing.T, c *cluster, name string, r v1.VirtualMachineStateChangeRequest) {
	t.Helper()
	waitFor(t, 10*time.Second, "state change request", func(ctx context.Context) (bool, error) {
		vm, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, r)
		_, err = c.client.KubevirtV1().VirtualMachines(ns).UpdateStatus(ctx, vm, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// TestVMIWaitsForClaim: a VMI whose claim does not exist gets no launcher pod
// but Synchronized=False/FailedPvcNotFound; once the (Block) claim exists the
// pod is created with the claim attached as a device.
func TestVMIWaitsForClaim(t *testing.T) {
	c := startCluster(t)
	c.startManager(t, vmcontrol.LeaderElection{})
	ctx := context.Background()

	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "waits", Namespace: ns},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
				Devices:   v1.Devices{Disks: []v1.Disk{{Name: "disk1", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}}},
			},
			Volumes: []v1.Volume{{Name: "disk1", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "foo"}}}}},
		},
	}
	if _, err := c.client.KubevirtV1().VirtualMachineInstances(ns).Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `spec.volumes[0] "disk1": PersistentVolumeClaim default/foo not found`
	waitFor(t, 30*time.Second, "Synchronized=False/FailedPvcNotFound", func(ctx context.Context) (bool, error) {
		got, err := c.vmi(ctx, "waits")
		if err != nil {
			return false, nil
		}
		cond := got.VMICondition(v1.VirtualMachineInstanceSynchronized)
		return cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == "FailedPvcNotFound" && cond.Message == want, nil
	})
	got, err := c.vmi(ctx, "waits")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.Pending {
		t.Errorf("phase %q while the claim is missing, want Pending", got.Status.Phase)
	}
	if pods := c.launcherPods(t, got); len(pods) != 0 {
		t.Fatalf("%d launcher pods while the claim is missing", len(pods))
	}

	block := corev1.PersistentVolumeBlock
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  &block,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := c.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	waitFor(t, 30*time.Second, "the launcher pod once the claim exists", func(ctx context.Context) (bool, error) {
		pods := c.launcherPods(t, got)
		if len(pods) == 0 {
			return false, nil
		}
		pod = pods[0]
		return true, nil
	})
	var devices []string
	for _, ct := range pod.Spec.Containers {
		for _, d := range ct.VolumeDevices {
			devices = append(devices, ct.Name+":"+d.Name)
		}
	}
	if len(devices) != 1 || devices[0] != "compute:disk1" {
		t.Errorf("volumeDevices %v, want the Block claim on compute", devices)
	}
	waitFor(t, 30*time.Second, "Synchronized condition cleared", func(ctx context.Context) (bool, error) {
		got, err := c.vmi(ctx, "waits")
		return err == nil && got.VMICondition(v1.VirtualMachineInstanceSynchronized) == nil, nil
	})
}

// dataVolumeCRD is a stand-in for CDI's DataVolume CRD: the same group,
// version, names and status subresource, with an open schema. The test plays
// CDI's part (it moves DataVolumes through their phases).
func dataVolumeCRD() *apiextensionsv1.CustomResourceDefinition {
	open := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "datavolumes.cdi.kubevirt.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "cdi.kubevirt.io",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "datavolumes", Singular: "datavolume", Kind: "DataVolume", ListKind: "DataVolumeList", ShortNames: []string{"dv"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1beta1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &open}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// vmWithDataVolume is a VM whose disk is a DataVolume made from its template.
func vmWithDataVolume(name string) *v1.VirtualMachine {
	vm := newVM(name, v1.RunStrategyAlways)
	dv := name + "-disk"
	vm.Spec.DataVolumeTemplates = []v1.DataVolumeTemplateSpec{{
		ObjectMeta: metav1.ObjectMeta{Name: dv},
		Spec:       runtime.RawExtension{Raw: []byte(`{"source":{"blank":{}},"storage":{"resources":{"requests":{"storage":"1Gi"}}}}`)},
	}}
	vm.Spec.Template.Spec.Volumes[0].VolumeSource = v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: dv}}
	return vm
}

// setDataVolumePhase plays CDI: it moves a DataVolume to a phase.
func setDataVolumePhase(t *testing.T, dyn dynamic.Interface, name, phase string) {
	t.Helper()
	waitFor(t, 10*time.Second, "DataVolume status write", func(ctx context.Context) (bool, error) {
		dv, err := dyn.Resource(vm.DataVolumeResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		_ = unstructured.SetNestedField(dv.Object, phase, "status", "phase")
		_, err = dyn.Resource(vm.DataVolumeResource).Namespace(ns).UpdateStatus(ctx, dv, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// TestDataVolumes: with CDI's API served, a VM's dataVolumeTemplates become
// DataVolumes it controls; the VM starts once they are populated, shows
// DataVolumeError when CDI fails, and its DataVolumes go with it.
func TestDataVolumes(t *testing.T) {
	c := startCluster(t, dataVolumeCRD())
	c.startManager(t, vmcontrol.LeaderElection{})
	c.fakeKubelet(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dvs := dyn.Resource(vm.DataVolumeResource).Namespace(ns)

	t.Run("the VM starts once its DataVolume is populated", func(t *testing.T) {
		c.createVM(t, vmWithDataVolume("dv-ok"))
		var dv *unstructured.Unstructured
		waitFor(t, 30*time.Second, "DataVolume dv-ok-disk", func(ctx context.Context) (bool, error) {
			dv, err = dvs.Get(ctx, "dv-ok-disk", metav1.GetOptions{})
			return err == nil, nil
		})
		vmObj, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, "dv-ok", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ref := metav1.GetControllerOf(dv); ref == nil || ref.UID != vmObj.UID || ref.Kind != "VirtualMachine" {
			t.Errorf("DataVolume controller %+v, want VirtualMachine dv-ok", ref)
		}
		if size, _, _ := unstructured.NestedString(dv.Object, "spec", "storage", "resources", "requests", "storage"); size != "1Gi" {
			t.Errorf("DataVolume spec not taken from the template: %v", dv.Object["spec"])
		}
		c.waitVMStatus(t, "dv-ok", v1.VirtualMachineStatusProvisioning)
		if _, err := c.vmi(ctx, "dv-ok"); !apierrors.IsNotFound(err) {
			t.Fatalf("a VMI exists before the DataVolume is populated (err %v)", err)
		}
		// CDI populates it: the claim exists, the DataVolume succeeds.
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "dv-ok-disk", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if _, err := c.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setDataVolumePhase(t, dyn, "dv-ok-disk", "Succeeded")
		c.waitVMIPhase(t, "dv-ok", v1.Scheduled)
		// No provisioner binds the claim in this cluster: KubeVirt's
		// WaitingForVolumeBinding (#43).
		c.waitVMStatus(t, "dv-ok", v1.VirtualMachineStatusWaitingForVolumeBinding)

		// Deleting the VM (background propagation) takes its DataVolume.
		bg := metav1.DeletePropagationBackground
		if err := c.client.KubevirtV1().VirtualMachines(ns).Delete(ctx, "dv-ok", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "the garbage collector to delete DataVolume dv-ok-disk", func(ctx context.Context) (bool, error) {
			_, err := dvs.Get(ctx, "dv-ok-disk", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})

	t.Run("a VMI's pod waits until its DataVolume is populated", func(t *testing.T) {
		dv := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"source": map[string]any{"blank": map[string]any{}}}}}
		dv.SetAPIVersion("cdi.kubevirt.io/v1beta1")
		dv.SetKind("DataVolume")
		dv.SetName("standalone-disk")
		if _, err := dvs.Create(ctx, dv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setDataVolumePhase(t, dyn, "standalone-disk", "ImportInProgress")
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "standalone-disk", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if _, err := c.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tmpl := vmWithDataVolume("standalone").Spec.Template
		tmpl.Spec.Volumes[0].VolumeSource = v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "standalone-disk"}}
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "standalone", Namespace: ns}, Spec: tmpl.Spec}
		if _, err := c.client.KubevirtV1().VirtualMachineInstances(ns).Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "Synchronized=False/DataVolumeNotReady", func(ctx context.Context) (bool, error) {
			got, err := c.vmi(ctx, "standalone")
			if err != nil {
				return false, nil
			}
			cond := got.VMICondition(v1.VirtualMachineInstanceSynchronized)
			return cond != nil && cond.Reason == "DataVolumeNotReady" && strings.Contains(cond.Message, "standalone-disk is ImportInProgress"), nil
		})
		got, err := c.vmi(ctx, "standalone")
		if err != nil {
			t.Fatal(err)
		}
		if pods := c.launcherPods(t, got); len(pods) != 0 {
			t.Fatalf("%d launcher pods while the DataVolume imports", len(pods))
		}
		setDataVolumePhase(t, dyn, "standalone-disk", "Succeeded")
		c.waitVMIPhase(t, "standalone", v1.Scheduled)
	})

	t.Run("a failed DataVolume shows DataVolumeError", func(t *testing.T) {
		c.createVM(t, vmWithDataVolume("dv-bad"))
		waitFor(t, 30*time.Second, "DataVolume dv-bad-disk", func(ctx context.Context) (bool, error) {
			_, err := dvs.Get(ctx, "dv-bad-disk", metav1.GetOptions{})
			return err == nil, nil
		})
		setDataVolumePhase(t, dyn, "dv-bad-disk", "Failed")
		c.waitVMStatus(t, "dv-bad", v1.VirtualMachineStatusDataVolumeError)
		got, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, "dv-bad", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var failure *v1.VirtualMachineCondition
		for i := range got.Status.Conditions {
			if got.Status.Conditions[i].Type == v1.VirtualMachineFailure {
				failure = &got.Status.Conditions[i]
			}
		}
		if failure == nil || failure.Reason != vm.ReasonDataVolumeError || !strings.Contains(failure.Message, "dv-bad-disk") {
			t.Errorf("Failure condition %+v, want reason %s naming dv-bad-disk", failure, vm.ReasonDataVolumeError)
		}
		if _, err := c.vmi(ctx, "dv-bad"); !apierrors.IsNotFound(err) {
			t.Errorf("a VMI exists although the DataVolume failed (err %v)", err)
		}
	})
}

// TestDataVolumesWithoutCDI: without CDI's API, a VM with dataVolumeTemplates
// does not start and says why; once CDI's API is served, the Manager notices
// and its DataVolume is created.
func TestDataVolumesWithoutCDI(t *testing.T) {
	c := startCluster(t)
	c.startManager(t, vmcontrol.LeaderElection{}, func(o *vmcontrol.Options) { o.DiscoveryInterval = 500 * time.Millisecond })
	c.createVM(t, vmWithDataVolume("no-cdi"))
	c.waitVMStatus(t, "no-cdi", v1.VirtualMachineStatusProvisioning)
	waitFor(t, 30*time.Second, "Failure condition DataVolumesUnavailable", func(ctx context.Context) (bool, error) {
		got, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, "no-cdi", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.VirtualMachineFailure && cond.Reason == vm.ReasonDataVolumesUnavailable &&
				strings.Contains(cond.Message, "spec.dataVolumeTemplates") && strings.Contains(cond.Message, "default/no-cdi") {
				return true, nil
			}
		}
		return false, nil
	})
	if _, err := c.vmi(context.Background(), "no-cdi"); !apierrors.IsNotFound(err) {
		t.Errorf("a VMI exists without CDI (err %v)", err)
	}

	// CDI is installed: the controllers restart with a DataVolume informer.
	ctx := context.Background()
	if err := c.env.InstallCRDs(ctx, dataVolumeCRD()); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "DataVolume no-cdi-disk once CDI is served", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(vm.DataVolumeResource).Namespace(ns).Get(ctx, "no-cdi-disk", metav1.GetOptions{})
		return err == nil, nil
	})
	waitFor(t, 30*time.Second, "the Failure condition to clear", func(ctx context.Context) (bool, error) {
		got, err := c.client.KubevirtV1().VirtualMachines(ns).Get(ctx, "no-cdi", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.VirtualMachineFailure {
				return false, nil
			}
		}
		return got.Status.PrintableStatus == v1.VirtualMachineStatusProvisioning, nil
	})
}
