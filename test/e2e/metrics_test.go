package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// scrape GETs a component's /metrics the way Prometheus does: the scheme
// and port its pod's prometheus.io annotations name, a certificate not
// verified (virt-handler's is signed by the installation's own CA).
func scrape(ctx context.Context, pod corev1.Pod) (string, error) {
	a := pod.Annotations
	if a[installstrategy.AnnotationPrometheusScrape] != "true" {
		return "", fmt.Errorf("pod %s is not annotated for scraping: %v", pod.Name, a)
	}
	u := fmt.Sprintf("%s://%s%s", a[installstrategy.AnnotationPrometheusScheme],
		net.JoinHostPort(pod.Status.PodIP, a[installstrategy.AnnotationPrometheusPort]), a[installstrategy.AnnotationPrometheusPath])
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return string(body), err
}

// sample returns the value of the first sample of family whose labels
// include every one of want (`name="value"` pairs), or false.
func sample(body, family string, want ...string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, family)
		if !ok {
			continue
		}
		var labels, value string
		switch {
		case strings.HasPrefix(rest, "{"):
			if labels, value, ok = strings.Cut(rest[1:], "} "); !ok {
				continue
			}
		case strings.HasPrefix(rest, " "):
			value = rest[1:]
		default:
			continue
		}
		all := true
		for _, w := range want {
			all = all && strings.Contains(labels+",", w+",")
		}
		if all {
			v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestMetrics scrapes the installed components as a Prometheus reading
// their pods' annotations would: virt-handler exports KubeVirt's per-VMI
// metrics of a running VM (vCPU and CPU time that grow, its memory, the
// bytes its disk read and its interface carried, labelled with its node,
// namespace and name), virt-controller its kubevirt_vmi_info and
// kubevirt_vmi_phase_count and which replica leads. The VM is
// examples/vm-disk.yaml's: it boots from its disk (storage reads) and
// answers HTTP on the pod network (network traffic).
func TestMetrics(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	name := "metrics"
	framework.CreateVM(t, c, framework.ExampleVM(t, "vm-disk.yaml", name, v1.RunStrategyAlways))
	vmi := framework.WaitVMI(t, c, name, "status.interfaces[0].ipAddress", func(vmi *v1.VirtualMachineInstance) bool {
		return running(vmi) && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	suite.HTTPGetUntil(t, framework.GuestURL(vmi.Status.Interfaces[0].IP, 80, "/"), "vmkit guest "+name, 3*time.Minute)
	disk := vmi.Spec.Domain.Devices.Disks[0].Name
	iface := vmi.Spec.Domain.Devices.Interfaces[0].Name

	pods := func(component string) []corev1.Pod {
		t.Helper()
		list, err := c.Kube.CoreV1().Pods(cluster.Namespace).List(ctx, metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + component})
		if err != nil {
			t.Fatal(err)
		}
		var out []corev1.Pod
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		if len(out) == 0 {
			t.Fatalf("no running %s pod", component)
		}
		return out
	}
	var handler corev1.Pod
	for _, p := range pods(v1.VirtHandlerValue) {
		if p.Spec.NodeName == vmi.Status.NodeName {
			handler = p
		}
	}
	labels := []string{`node="` + vmi.Status.NodeName + `"`, `namespace="default"`, `name="` + name + `"`}
	var first, body string
	suite.WaitFor(t, "virt-handler's metrics of the VMI", time.Minute, func() (bool, string) {
		var err error
		if body, err = scrape(ctx, handler); err != nil {
			return false, err.Error()
		}
		if _, ok := sample(body, "kubevirt_vmi_vcpu_seconds_total", append(labels, `id="0"`)...); !ok {
			return false, "no kubevirt_vmi_vcpu_seconds_total of the VMI"
		}
		if first == "" {
			first = body
			return false, "a second scrape to come"
		}
		return true, ""
	})
	active := []struct {
		family string
		label  string // the device's label, if the family has one
	}{
		{"kubevirt_vmi_vcpu_seconds_total", ""}, {"kubevirt_vmi_cpu_usage_seconds_total", ""},
		{"kubevirt_vmi_memory_resident_bytes", ""}, {"kubevirt_vmi_memory_domain_bytes", ""},
		{"kubevirt_vmi_storage_read_traffic_bytes_total", `drive="` + disk + `"`},
		{"kubevirt_vmi_storage_iops_read_total", `drive="` + disk + `"`},
		{"kubevirt_vmi_network_receive_bytes_total", `interface="` + iface + `"`},
		{"kubevirt_vmi_network_transmit_bytes_total", `interface="` + iface + `"`},
		{"kubevirt_vmi_network_receive_packets_total", `interface="` + iface + `"`},
	}
	for _, a := range active {
		want := labels
		if a.label != "" {
			want = append(slices.Clone(labels), a.label)
		}
		v, ok := sample(body, a.family, want...)
		if !ok || v <= 0 {
			t.Errorf("virt-handler: %s{%s} of the running VMI = %v (found %v), want > 0", a.family, strings.Join(want, ","), v, ok)
		}
	}
	for _, family := range []string{"kubevirt_vmi_storage_write_traffic_bytes_total", "kubevirt_vmi_network_receive_errors_total", "kubevirt_vmi_network_transmit_packets_dropped_total"} {
		if _, ok := sample(body, family, labels...); !ok {
			t.Errorf("virt-handler: no %s of the running VMI", family)
		}
	}
	vcpu, _ := sample(body, "kubevirt_vmi_vcpu_seconds_total", labels...)
	rss, _ := sample(body, "kubevirt_vmi_memory_resident_bytes", labels...)
	t.Logf("virt-handler on %s: kubevirt_vmi_vcpu_seconds_total %v, kubevirt_vmi_memory_resident_bytes %v", handler.Spec.NodeName, vcpu, rss)
	if before, _ := sample(first, "kubevirt_vmi_cpu_usage_seconds_total", labels...); before <= 0 {
		t.Errorf("first scrape: kubevirt_vmi_cpu_usage_seconds_total = %v", before)
	} else if after, _ := sample(body, "kubevirt_vmi_cpu_usage_seconds_total", labels...); after < before {
		t.Errorf("kubevirt_vmi_cpu_usage_seconds_total went down: %v then %v", before, after)
	}

	var leading, infos int
	for _, p := range pods(v1.VirtControllerValue) {
		body, err := scrape(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := sample(body, "kubevirt_virt_controller_leading_status"); v == 1 {
			leading++
		}
		if v, ok := sample(body, "kubevirt_vmi_info", `namespace="default"`, `name="`+name+`"`, `phase="running"`, `vmi_pod="`+launcherPod(t, c, vmi).Name+`"`); ok && v == 1 {
			infos++
		}
		if v, ok := sample(body, "kubevirt_vmi_phase_count", `phase="running"`, `node="`+vmi.Status.NodeName+`"`); ok && v < 1 {
			t.Errorf("%s: kubevirt_vmi_phase_count of running VMIs on %s = %v", p.Name, vmi.Status.NodeName, v)
		}
	}
	if leading != 1 || infos != 1 {
		t.Errorf("virt-controller replicas: %d leading, %d exporting kubevirt_vmi_info of the VMI (running, with its launcher pod); want 1 and 1", leading, infos)
	}
}
