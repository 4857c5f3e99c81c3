package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmctl"
)

const subresourcesPrefix = "/apis/subresources.kubevirt.io/v1"

// put sends PUT path (under the subresource API) through kube-apiserver's
// aggregation layer with the plain REST client, and returns the HTTP code
// and the error's message.
func put(t testing.TB, cfg *rest.Config, path, body string) (int, string) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var code int
	res := kube.Discovery().RESTClient().Put().AbsPath(subresourcesPrefix+path).
		SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(t.Context()).StatusCode(&code)
	if err := res.Error(); err != nil {
		return code, err.Error()
	}
	return code, ""
}

// impersonate returns the admin's configuration acting as user (with the
// group every authenticated user has).
func impersonate(c *cluster.Cluster, user string) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return cfg
}

// bind gives user the cluster role in the default namespace until the test ends.
func bind(t testing.TB, c *cluster.Cluster, user, role string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + user + "-" + role, Namespace: "default"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := c.Kube.RbacV1().RoleBindings("default").Create(t.Context(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.RbacV1().RoleBindings("default").Delete(context.Background(), rb.Name, metav1.DeleteOptions{})
	})
}

// readStream reads conn until want appears or the deadline passes and
// returns what it read.
func readStream(conn net.Conn, want string, timeout time.Duration) (string, error) {
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	var got bytes.Buffer
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), want) {
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			return got.String(), err
		}
	}
	return got.String(), nil
}

// TestVirtAPI: KubeVirt's subresource API through kube-apiserver's
// aggregation layer, as virtctl and vmctl use it: discovery, version,
// start/stop/restart with KubeVirt's semantics, pause/unpause, the guest
// agent, console, VNC and port-forward streams, and RBAC through the
// aggregated kubevirt.io:view and kubevirt.io:edit roles.
func TestVirtAPI(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	sub, err := vmctl.NewSubresources(c.Config)
	if err != nil {
		t.Fatal(err)
	}

	resources, err := c.Kube.Discovery().ServerResourcesForGroupVersion("subresources.kubevirt.io/v1")
	if err != nil {
		t.Fatalf("discovery of subresources.kubevirt.io/v1: %v", err)
	}
	var names []string
	for _, r := range resources.APIResources {
		names = append(names, r.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "virtualmachines/start") {
		t.Errorf("discovery lists %v, no virtualmachines/start", names)
	}
	ver, err := sub.Version(ctx)
	if err != nil || ver.GoVersion == "" {
		t.Errorf("version: %+v, %v", ver, err)
	}

	const name = "vm-api"
	vm := framework.ExampleVM(t, "vm-net.yaml", name, v1.RunStrategyHalted)
	framework.CreateVM(t, c, vm)

	// start on Halted sets Always; a second start is a conflict.
	began := time.Now()
	if code, msg := put(t, c.Config, "/namespaces/default/virtualmachines/"+name+"/start", "{}"); code != http.StatusAccepted {
		t.Fatalf("PUT start: %d %s", code, msg)
	}
	vmi := framework.WaitVMI(t, c, name, "Running", running)
	startToRunning := time.Since(began)
	got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := got.RunStrategy(); s != v1.RunStrategyAlways {
		t.Errorf("after start: run strategy %s, want Always", s)
	}
	if code, msg := put(t, c.Config, "/namespaces/default/virtualmachines/"+name+"/start", ""); code != http.StatusConflict || !strings.Contains(msg, "VM is already running") {
		t.Errorf("second start: %d %q, want 409 VM is already running", code, msg)
	}

	// VNC answers with an RFB handshake.
	vnc, err := sub.Stream(ctx, "default", name, "vnc")
	if err != nil {
		t.Fatalf("vnc: %v", err)
	}
	if out, err := readStream(vnc, "\n", 20*time.Second); err != nil || !strings.HasPrefix(out, "RFB 003.") {
		t.Errorf("vnc: read %q, %v; want an RFB protocol version", out, err)
	}
	vnc.Close()

	// A soft reboot (through the guest agent) shows the guest booting again
	// on the console, read through virt-api.
	agentConnected := func(vmi *v1.VirtualMachineInstance) bool {
		cond := vmi.VMICondition(v1.VirtualMachineInstanceAgentConnected)
		return cond != nil && cond.Status == corev1.ConditionTrue
	}
	framework.WaitVMI(t, c, name, "AgentConnected", agentConnected)
	conn, err := sub.Stream(ctx, "default", name, "console")
	if err != nil {
		t.Fatalf("console: %v", err)
	}
	if err := sub.SoftReboot(ctx, "default", name); err != nil {
		t.Fatalf("softreboot: %v", err)
	}
	if out, err := readStream(conn, guestMarker, 90*time.Second); err != nil {
		t.Errorf("console after a soft reboot: %v (read %q)", err, out)
	}
	conn.Close()

	// The guest agent's view, through virt-api.
	framework.WaitVMI(t, c, name, "AgentConnected", agentConnected)
	info, err := sub.GuestOSInfo(ctx, "default", name)
	if err != nil || info.OS.ID != "vmkit-test-guest" {
		t.Errorf("guestosinfo: %+v, %v", info, err)
	}
	if _, err := sub.UserList(ctx, "default", name); err != nil {
		t.Errorf("userlist: %v", err)
	}
	// The tiny guest runs from its initramfs: qemu-ga reports no file
	// system, and freezes none.
	if _, err := sub.FileSystemList(ctx, "default", name); err != nil {
		t.Errorf("filesystemlist: %v", err)
	}
	if err := sub.Freeze(ctx, "default", name, time.Minute); err != nil {
		t.Errorf("freeze: %v", err)
	}
	if err := sub.Unfreeze(ctx, "default", name); err != nil {
		t.Errorf("unfreeze: %v", err)
	}
	if got, err := sub.ExpandSpec(ctx, "default", name); err != nil || got.Name != name || got.Spec.Template == nil {
		t.Errorf("expand-spec: %v", err)
	}
	// migrate records a VirtualMachineInstanceMigration (moving the guest
	// is the migration controller's job, not in vmkit yet).
	if err := sub.Migrate(ctx, "default", name, v1.MigrateOptions{}); err != nil {
		t.Errorf("migrate: %v", err)
	} else {
		migrations, err := c.Client.KubevirtV1().VirtualMachineInstanceMigrations("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(migrations.Items) == 0 || migrations.Items[0].Spec.VMIName != name {
			t.Errorf("after migrate: migrations %v, %v", migrations, err)
		}
		for _, m := range migrations.Items {
			_ = c.Client.KubevirtV1().VirtualMachineInstanceMigrations("default").Delete(context.Background(), m.Name, metav1.DeleteOptions{})
		}
	}

	// Port-forward to the guest's web server.
	pf, err := sub.Stream(ctx, "default", name, vmctl.PortForwardPath(80, ""))
	if err != nil {
		t.Fatalf("portforward: %v", err)
	}
	fmt.Fprintf(pf, "GET / HTTP/1.0\r\nHost: guest\r\n\r\n")
	_ = pf.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(pf), nil)
	if err != nil {
		t.Errorf("portforward: reading the guest's HTTP answer: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "vmkit guest") {
			t.Errorf("portforward: guest answered %d %q", resp.StatusCode, body)
		}
	}
	pf.Close()

	// pause / unpause; a second pause is a conflict.
	if err := sub.Pause(ctx, "default", name, v1.PauseOptions{}); err != nil {
		t.Fatalf("pause: %v", err)
	}
	framework.WaitVMI(t, c, name, "Paused", func(vmi *v1.VirtualMachineInstance) bool {
		cond := vmi.VMICondition(v1.VirtualMachineInstancePaused)
		return cond != nil && cond.Status == corev1.ConditionTrue
	})
	if err := sub.Pause(ctx, "default", name, v1.PauseOptions{}); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "VMI is already paused") {
		t.Errorf("second pause: %v, want a conflict: VMI is already paused", err)
	}
	if err := sub.Unpause(ctx, "default", name, v1.UnpauseOptions{}); err != nil {
		t.Fatalf("unpause: %v", err)
	}
	framework.WaitVMI(t, c, name, "not Paused", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.VMICondition(v1.VirtualMachineInstancePaused) == nil
	})

	// restart: a new instance.
	if err := sub.Restart(ctx, "default", name, v1.RestartOptions{}); err != nil {
		t.Fatalf("restart: %v", err)
	}
	restarted := framework.WaitVMI(t, c, name, "restarted and Running", func(v *v1.VirtualMachineInstance) bool {
		return v.UID != vmi.UID && running(v)
	})
	t.Logf("restart: new VMI %s Running", restarted.UID)

	// RBAC: a viewer reads but may not stop; an editor stops.
	bind(t, c, "e2e-viewer", "view")
	bind(t, c, "e2e-editor", "edit")
	viewer, err := vmctl.NewSubresources(impersonate(c, "e2e-viewer"))
	if err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, name, "AgentConnected", agentConnected)
	if _, err := viewer.GuestOSInfo(ctx, "default", name); err != nil {
		t.Errorf("viewer: guestosinfo: %v", err)
	}
	if code, msg := put(t, impersonate(c, "e2e-viewer"), "/namespaces/default/virtualmachines/"+name+"/stop", ""); code != http.StatusForbidden {
		t.Errorf("viewer: stop answered %d %q, want 403", code, msg)
	}
	began = time.Now()
	if code, msg := put(t, impersonate(c, "e2e-editor"), "/namespaces/default/virtualmachines/"+name+"/stop", ""); code != http.StatusAccepted {
		t.Fatalf("editor: stop answered %d %q, want 202", code, msg)
	}
	waitNoVMI(t, c, name)
	stopToGone := time.Since(began)
	got, err = c.Client.KubevirtV1().VirtualMachines("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := got.RunStrategy(); s != v1.RunStrategyHalted {
		t.Errorf("after stop: run strategy %s, want Halted", s)
	}
	if err := sub.Stop(ctx, "default", name, v1.StopOptions{}); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "VM is not running") {
		t.Errorf("stop of a stopped VM: %v, want a conflict: VM is not running", err)
	}
	b, _ := json.Marshal(map[string]string{"startToRunning": startToRunning.Round(time.Millisecond).String(), "stopToGone": stopToGone.Round(time.Millisecond).String()})
	t.Logf("virt-api timings: %s", b)
}

// BenchmarkVirtAPIStartStop measures what a virtctl user waits for: PUT
// start through the aggregation layer until the VMI is Running, and PUT stop
// until the VMI is gone, on one VM started and stopped b.N times.
func BenchmarkVirtAPIStartStop(b *testing.B) {
	c := suite.Need(b)
	const name = "bench-api"
	vm := framework.ExampleVM(b, "vm-net.yaml", name, v1.RunStrategyHalted)
	framework.CreateVM(b, c, vm)
	var toRunning, toGone []time.Duration
	for range b.N {
		began := time.Now()
		if code, msg := put(b, c.Config, "/namespaces/default/virtualmachines/"+name+"/start", ""); code != http.StatusAccepted {
			b.Fatalf("start: %d %s", code, msg)
		}
		framework.WaitVMI(b, c, name, "Running", running)
		toRunning = append(toRunning, time.Since(began))
		began = time.Now()
		if code, msg := put(b, c.Config, "/namespaces/default/virtualmachines/"+name+"/stop", ""); code != http.StatusAccepted {
			b.Fatalf("stop: %d %s", code, msg)
		}
		waitNoVMI(b, c, name)
		toGone = append(toGone, time.Since(began))
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"start-running", toRunning}, {"stop-gone", toGone}} {
		reportPercentiles(b, m.name, m.d)
	}
	b.ReportMetric(0, "ns/op")
}
