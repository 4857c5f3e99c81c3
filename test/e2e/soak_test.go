package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// soakFilled is the line the soak guest prints once its memory is full.
const soakFilled = "VMKIT-SOAK-FILLED"

// BenchmarkLauncherSoak runs the cloud guest (examples/vm-cloud.yaml) with
// 512 MiB of memory and a memory limit, so that its launcher's compute
// container has one too (the limit plus vmkit's overhead), fills the
// guest's memory (a tmpfs file of all but 160 MiB, which Debian and
// cloud-init use, read again every 20 s) and watches the launcher pod for
// VMKIT_SOAK (default 30m). It fails on
// an OOM kill or a restart of any container, and reports the compute
// container's peak working set, what it uses beyond the guest's memory,
// and the overhead the pod asked for beyond it (docs/performance.md, "A
// smaller launcher"):
//
//	VMKIT_SOAK=30m go test -run '^$' -bench LauncherSoak -benchtime 1x -timeout 60m ./test/e2e/
func BenchmarkLauncherSoak(b *testing.B) {
	c := suite.Need(b)
	soak := 30 * time.Minute
	if s := os.Getenv("VMKIT_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("VMKIT_SOAK=%q: %v", s, err)
		}
		soak = d
	}
	const guestMiB = 512
	for b.Loop() {
		vm := framework.ExampleVM(b, "vm-cloud.yaml", "soak-cloud", v1.RunStrategyAlways)
		spec := &vm.Spec.Template.Spec
		mem := resource.MustParse(fmt.Sprintf("%dMi", guestMiB))
		spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: mem}
		spec.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: mem}
		vol := volumeNamed(b, spec, "cloudinitdisk")
		vol.CloudInitNoCloud.UserData = strings.Replace(vol.CloudInitNoCloud.UserData, "runcmd:\n", fmt.Sprintf(`runcmd:
- mount -o remount,size=100%% /dev/shm
- head -c $(( ($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 160) * 1048576 )) /dev/zero >/dev/shm/fill
- echo "%s $(du -m /dev/shm/fill | cut -f1) MiB"
- sh -c 'while sleep 20; do cat /dev/shm/fill >/dev/null; done' >/dev/null 2>&1 &
`, soakFilled), 1)
		framework.CreateVM(b, c, vm)
		waitVMReady(b, c, vm.Name)
		ctx, cancel := context.WithTimeout(b.Context(), 6*time.Minute)
		lines, err := c.Console(ctx, "default", vm.Name, soakFilled)
		cancel()
		if err != nil {
			b.Fatalf("%s: %v (last console lines: %q); launcher: %s", vm.Name, err, lines[max(len(lines)-5, 0):], launcherState(b, c, vm.Name))
		}
		b.Logf("%s: %s", vm.Name, lines[len(lines)-1])
		vmi, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(b.Context(), vm.Name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pod := launcherPod(b, c, vmi)
		var compute *corev1.Container
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == "compute" {
				compute = &pod.Spec.Containers[i]
			}
		}
		if compute == nil {
			b.Fatalf("launcher pod %s has no compute container", pod.Name)
		}
		limitMiB := float64(compute.Resources.Limits.Memory().Value()) / (1 << 20)
		requestMiB := float64(compute.Resources.Requests.Memory().Value()) / (1 << 20)
		peak, peakOthers := 0.0, 0.0
		end := time.Now().Add(soak)
		for time.Now().Before(end) {
			p, err := c.Kube.CoreV1().Pods(pod.Namespace).Get(b.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				b.Fatalf("launcher pod %s: %v", pod.Name, err)
			}
			for _, st := range p.Status.ContainerStatuses {
				if st.RestartCount > 0 || (st.LastTerminationState.Terminated != nil && st.LastTerminationState.Terminated.Reason == "OOMKilled") {
					b.Fatalf("launcher pod %s: container %s restarted %d times (last: %+v)", p.Name, st.Name, st.RestartCount, st.LastTerminationState.Terminated)
				}
			}
			others := 0.0
			for name, ws := range workingSets(p) {
				if name == "compute" {
					peak = max(peak, ws)
				} else {
					others += ws
				}
			}
			peakOthers = max(peakOthers, others)
			select {
			case <-b.Context().Done():
				b.Fatal(b.Context().Err())
			case <-time.After(15 * time.Second):
			}
		}
		b.Logf("%s after %v: compute working set peak %.0f MiB (limit %.0f MiB, request %.0f MiB), helpers %.1f MiB, no restart or OOM kill",
			vm.Name, soak, peak, limitMiB, requestMiB, peakOthers)
		b.ReportMetric(peak, "peak-MiB")
		b.ReportMetric(peak-guestMiB, "used-overhead-MiB")
		b.ReportMetric(limitMiB-guestMiB, "asked-overhead-MiB")
		b.ReportMetric(peakOthers, "helpers-MiB")
	}
	b.ReportMetric(0, "ns/op")
}

// launcherState says how the launcher pods of VM name stand: each
// container's state, restarts and last termination (an OOM kill shows).
func launcherState(b *testing.B, c *cluster.Cluster, name string) string {
	pods, err := c.Kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "kubevirt.io/vm=" + name})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			out = append(out, fmt.Sprintf("%s/%s: state %+v, restarts %d, last %+v", p.Name, st.Name, st.State, st.RestartCount, st.LastTerminationState))
		}
	}
	vmi, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(context.Background(), name, metav1.GetOptions{})
	if err == nil {
		out = append(out, fmt.Sprintf("VMI phase %s reason %q", vmi.Status.Phase, vmi.Status.Reason))
	}
	return strings.Join(out, "; ")
}
