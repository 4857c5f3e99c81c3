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

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// scrape GETs a component's /metrics the way Prometheus does: the scheme
// and port its pod's prometheus.io annotations name, a certificate not
// verified (virt-handler's is signed by the installation's own CA,
// virt-controller's and virt-operator's are self-signed) and a service
// account's token (see metricsToken).
func scrape(ctx context.Context, pod corev1.Pod, token string) (string, error) {
	code, body, err := get(ctx, pod, token)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET /metrics of %s: %d %s", pod.Name, code, body)
	}
	return body, nil
}

// get is scrape's request: the answer's status and body.
func get(ctx context.Context, pod corev1.Pod, token string) (int, string, error) {
	a := pod.Annotations
	if a[installstrategy.AnnotationPrometheusScrape] != "true" {
		return 0, "", fmt.Errorf("pod %s is not annotated for scraping: %v", pod.Name, a)
	}
	u := fmt.Sprintf("%s://%s%s", a[installstrategy.AnnotationPrometheusScheme],
		net.JoinHostPort(pod.Status.PodIP, a[installstrategy.AnnotationPrometheusPort]), a[installstrategy.AnnotationPrometheusPath])
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metricsToken is a token of a new service account in default, bound to
// the strategy's metrics reader ClusterRole when reader is true: what
// Prometheus presents.
func metricsToken(t *testing.T, c *cluster.Cluster, name string, reader bool) string {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Kube.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().ServiceAccounts("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if reader {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: installstrategy.MetricsReaderClusterRoleName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}},
		}
		if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		})
	}
	tr, err := c.Kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// runningPods are the running pods of a component.
func runningPods(t *testing.T, c *cluster.Cluster, component string) []corev1.Pod {
	t.Helper()
	list, err := c.Kube.CoreV1().Pods(cluster.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + component})
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

// TestMetricsNeedAuthorization: the components' /metrics, which name every
// VMI's namespace, node and pod, answer only a scraper the API server
// authenticates and allows get on /metrics (#35 N5, N15): 401 without a
// token, 403 with a token of a service account without the metrics
// reader role, the metrics with one. The ServiceMonitor and the pods'
// annotations point Prometheus at the same scheme and port.
func TestMetricsNeedAuthorization(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	stranger := metricsToken(t, c, "metrics-stranger", false)
	reader := metricsToken(t, c, "metrics-reader", true)
	for _, component := range []string{v1.VirtControllerValue, v1.VirtHandlerValue, v1.VirtOperatorValue} {
		pod := runningPods(t, c, component)[0]
		for _, tc := range []struct {
			who   string
			token string
			want  int
		}{{"no token", "", http.StatusUnauthorized}, {"a service account without the role", stranger, http.StatusForbidden}, {"the metrics reader", reader, http.StatusOK}} {
			// The binding may take a moment to reach the authorizer's cache.
			suite.WaitFor(t, fmt.Sprintf("%s's /metrics to answer %s with %d", pod.Name, tc.who, tc.want), 30*time.Second, func() (bool, string) {
				code, body, err := get(ctx, pod, tc.token)
				if err != nil {
					return false, err.Error()
				}
				if code != tc.want {
					return false, fmt.Sprintf("%d %.200s", code, body)
				}
				// Any metric: virt-handler exports KubeVirt's per-VMI
				// ones only while a VMI runs on its node.
				if code == http.StatusOK && !strings.Contains(body, "# TYPE ") {
					return false, "no metric in " + body[:min(len(body), 200)]
				}
				return true, ""
			})
		}
	}
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

	pods := func(component string) []corev1.Pod { return runningPods(t, c, component) }
	token := metricsToken(t, c, "metrics-scraper", true)
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
		if body, err = scrape(ctx, handler, token); err != nil {
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
		body, err := scrape(ctx, p, token)
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
