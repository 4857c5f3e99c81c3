package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	"github.com/vmkit/vmkit/nodeagent/internal/guestagent"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// hostileInterfaces is a guest agent's answer as large as the launcher lets
// through (launcher.MaxGuestAgentAnswerBytes): many interfaces with long
// names and MACs and many addresses each, the VMI's own interface among
// the last.
func hostileInterfaces(t testing.TB, specMAC string) json.RawMessage {
	t.Helper()
	type addr struct {
		Address string `json:"ip-address"`
	}
	type iface struct {
		Name string `json:"name"`
		MAC  string `json:"hardware-address"`
		IPs  []addr `json:"ip-addresses"`
	}
	var ips []addr
	for i := range 200 {
		ips = append(ips, addr{fmt.Sprintf("fd00:%x::%x", i, i)})
	}
	var r []iface
	for i := range 100 {
		r = append(r, iface{Name: strings.Repeat("é", 2000) + strconv.Itoa(i), MAC: strings.Repeat("ab:", 300), IPs: ips})
	}
	r = append(r, iface{Name: "eth0", MAC: specMAC, IPs: ips})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > client.MaxGuestAgentAnswerBytes {
		t.Fatalf("the hostile answer has %d bytes, more than the launcher lets through", len(b))
	}
	return b
}

// A guest agent's answers cannot grow the VMI's status towards etcd's
// limit (review N13): from an answer of MiBs, the status keeps the VMI's
// own interface, at most guestagent.MaxInterfaces others, guestagent.MaxIPs addresses
// each and bounded strings, and encodes to less than 64 KiB.
func TestGuestAgentRepliesAreBounded(t *testing.T) {
	const mac = "52:54:00:12:34:56"
	raw := hostileInterfaces(t, mac)
	ifaces, err := guestagent.Interfaces(raw, []v1.Interface{{Name: "default", MacAddress: mac}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ifaces) != guestagent.MaxInterfaces+1 {
		t.Errorf("%d interfaces kept, want %d", len(ifaces), guestagent.MaxInterfaces+1)
	}
	if last := ifaces[len(ifaces)-1]; last.Name != "default" || last.InterfaceName != "eth0" {
		t.Errorf("the VMI's own interface, listed last by the guest, was not kept: %+v", last)
	}
	for _, i := range ifaces {
		if len(i.IPs) > guestagent.MaxIPs || len(i.InterfaceName) > guestagent.MaxString || len(i.MAC) > guestagent.MaxMAC || !utf8.ValidString(i.InterfaceName) {
			t.Fatalf("interface %q: %d addresses, name of %d bytes, MAC of %d bytes (valid UTF-8: %v)",
				i.InterfaceName[:16], len(i.IPs), len(i.InterfaceName), len(i.MAC), utf8.ValidString(i.InterfaceName))
		}
	}
	long := strings.Repeat("x", 256<<10)
	osRaw, _ := json.Marshal(map[string]string{"name": long, "kernel-release": long, "version": long, "pretty-name": long,
		"version-id": long, "kernel-version": long, "machine": long, "id": long})
	os, err := guestagent.OSInfo(osRaw)
	if err != nil {
		t.Fatal(err)
	}
	var st v1.VirtualMachineInstanceStatus
	applyGuestAgent(&st, &guestAgentInfo{connected: true, os: os, interfaces: ifaces}, metav1.Now())
	encoded, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest answers of %d KiB (interfaces) and %d KiB (OS) give a status of %d KiB", len(raw)>>10, len(osRaw)>>10, len(encoded)>>10)
	if len(encoded) > 64<<10 {
		t.Errorf("the status encodes to %d KiB, want under 64 KiB", len(encoded)>>10)
	}
	if len(os.KernelVersion) != guestagent.MaxString {
		t.Errorf("kernel version of %d bytes, want %d", len(os.KernelVersion), guestagent.MaxString)
	}
}

// TestGuestAgentStatusAndREST runs the agent against a real launcher on the
// fake hypervisor: no guest agent, then one that answers, then one that
// stops; the VMI's AgentConnected, guestOSInfo and interfaces follow, the
// REST API answers with KubeVirt's shapes or 409, and idle syncs write
// nothing.
func TestGuestAgentStatusAndREST(t *testing.T) {
	dir, err := os.MkdirTemp("", "nga")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	share := filepath.Join(dir, "share")
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1", UID: "0d4a0f4e-1111-4222-8333-944455556666",
			Labels: map[string]string{v1.NodeNameLabel: "node01"}},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
			// No interface: the agent would wire it, and the launcher runs in
			// the test's own network namespace, where wiring is refused. The
			// guest agent's interfaces are reported as it reports them
			// (guestagent.Interfaces names them after the spec's by MAC,
			// checked above).
		}},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "node01"},
	}
	h := hvfake.New()
	agenttest.RunLauncher(t, dir, share, h, vmi)
	ctx := context.Background()

	vmClient := vmfake.NewSimpleClientset(vmi.DeepCopy())
	a, err := New(Config{NodeName: "node01", Client: vmClient, Kube: fake.NewClientset(), ShareDir: share,
		KubeletPodsDir: filepath.Join(dir, "pods"), Recorder: record.NewFakeRecorder(100),
		PollInterval: 20 * time.Millisecond, AgentPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	base := srv.URL + "/v1/namespaces/ns/virtualmachineinstances/vm1/"

	// sync refreshes the informer's copy, syncs once and returns the VMI.
	sync := func() *v1.VirtualMachineInstance {
		t.Helper()
		got, err := vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.informer.GetIndexer().Update(got); err != nil {
			t.Fatal(err)
		}
		if _, err := a.sync(ctx, "ns/vm1"); err != nil {
			t.Fatalf("sync: %v", err)
		}
		got, _ = vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm1", metav1.GetOptions{})
		if err := a.informer.GetIndexer().Update(got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	syncUntil := func(what string, cond func(*v1.VirtualMachineInstance) bool) *v1.VirtualMachineInstance {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := sync()
			if cond(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; status %+v", what, got.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	waitFor(t, func() bool { _, err := a.client(vmi.UID).Ping(ctx); return err == nil })
	syncUntil("Running", func(v *v1.VirtualMachineInstance) bool { return v.Status.Phase == v1.Running })

	// No guest agent: polls end, nothing appears, the REST API says 409.
	time.Sleep(100 * time.Millisecond)
	got := sync()
	if agentConnected(got) || got.Status.GuestOSInfo != (v1.VirtualMachineInstanceGuestOSInfo{}) {
		t.Errorf("without a guest agent: status %+v", got.Status)
	}
	for _, q := range []string{"guestosinfo", "userlist", "filesystemlist"} {
		if code, body := get(q); code != http.StatusConflict || !strings.Contains(body, "VMI does not have a guest agent connected") {
			t.Errorf("GET %s without a guest agent: %d %s, want 409", q, code, body)
		}
	}

	// The guest agent starts.
	h.SetGuestAgent("ns_vm1", hvfake.GuestAgentReplies(agenttest.QEMUGA()))
	syncUntil("AgentConnected", agentConnected)
	got = syncUntil("guestOSInfo", func(v *v1.VirtualMachineInstance) bool { return v.Status.GuestOSInfo.Name != "" })
	wantOSInfo := agenttest.QEMUGAOSInfo()
	if diff := cmp.Diff(wantOSInfo, got.Status.GuestOSInfo); diff != "" {
		t.Errorf("guestOSInfo (-want +got):\n%s", diff)
	}
	wantIfaces := agenttest.QEMUGAInterfaces()
	wantIfaces[0].Name = "" // no spec interface to name it after
	if diff := cmp.Diff(wantIfaces, got.Status.Interfaces); diff != "" {
		t.Errorf("interfaces (-want +got):\n%s", diff)
	}

	// The REST API, with KubeVirt's JSON.
	code, body := get("guestosinfo")
	var info v1.VirtualMachineInstanceGuestAgentInfo
	if code != http.StatusOK || json.Unmarshal([]byte(body), &info) != nil {
		t.Fatalf("GET guestosinfo: %d %s", code, body)
	}
	wantInfo := v1.VirtualMachineInstanceGuestAgentInfo{
		GAVersion:         "7.2.22",
		SupportedCommands: []v1.GuestAgentCommandInfo{{Name: "guest-get-osinfo", Enabled: true}, {Name: "guest-exec"}},
		Hostname:          "vmkit-guest", OS: wantOSInfo, Timezone: "UTC, 0",
		UserList: []v1.VirtualMachineInstanceGuestOSUser{{UserName: "fedora", LoginTime: 1700000000.25}},
		FSInfo: v1.VirtualMachineInstanceFileSystemInfo{Filesystems: []v1.VirtualMachineInstanceFileSystem{{DiskName: "vda1", MountPoint: "/",
			FileSystemType: "ext4", UsedBytes: 1048576, TotalBytes: 4194304, Disk: []v1.VirtualMachineInstanceFileSystemDisk{{Serial: "root-disk", BusType: "virtio"}}}}},
	}
	if diff := cmp.Diff(wantInfo, info); diff != "" {
		t.Errorf("guestosinfo (-want +got):\n%s", diff)
	}
	for _, key := range []string{`"guestAgentVersion":"7.2.22"`, `"supportedCommands":[`, `"os":{"name":"vmkit test guest"`, `"kernelRelease":"6.1.0-56-amd64"`,
		`"timezone":"UTC, 0"`, `"userList":[{"userName":"fedora","loginTime":1700000000.25}]`, `"fsInfo":{"disks":[{"diskName":"vda1","mountPoint":"/","fileSystemType":"ext4"`} {
		if !strings.Contains(body, key) {
			t.Errorf("guestosinfo lacks %s: %s", key, body)
		}
	}
	if code, body := get("userlist"); code != http.StatusOK || strings.TrimSpace(body) != `{"metadata":{},"items":[{"userName":"fedora","loginTime":1700000000.25}]}` {
		t.Errorf("GET userlist: %d %s", code, body)
	}
	if code, body := get("filesystemlist"); code != http.StatusOK ||
		strings.TrimSpace(body) != `{"metadata":{},"items":[{"diskName":"vda1","mountPoint":"/","fileSystemType":"ext4","usedBytes":1048576,"totalBytes":4194304,"disk":[{"serial":"root-disk","busType":"virtio"}]}]}` {
		t.Errorf("GET filesystemlist: %d %s", code, body)
	}

	// The agent's cache lags its own write of AgentConnected (a client
	// that saw the condition through the API server asks at once): the
	// REST API reads the VMI again instead of answering 409.
	stale := got.DeepCopy()
	stale.Status.Conditions = nil
	if err := a.informer.GetIndexer().Update(stale); err != nil {
		t.Fatal(err)
	}
	if code, body := get("guestosinfo"); code != http.StatusOK {
		t.Errorf("GET guestosinfo while the cache lags AgentConnected: %d %s, want 200", code, body)
	}
	if err := a.informer.GetIndexer().Update(got); err != nil {
		t.Fatal(err)
	}

	// Nothing changes: syncs and polls write nothing.
	time.Sleep(150 * time.Millisecond)
	sync()
	writes := func() int {
		n := 0
		for _, act := range vmClient.Actions() {
			if _, ok := act.(k8stesting.UpdateAction); ok {
				n++
			}
		}
		return n
	}
	before := writes()
	for range 5 {
		sync()
		time.Sleep(60 * time.Millisecond)
	}
	if n := writes() - before; n != 0 {
		t.Errorf("%d status writes while nothing changed", n)
	}

	// The guest agent stops: AgentConnected goes, the REST API says 409.
	h.SetGuestAgent("ns_vm1", nil)
	got = syncUntil("AgentConnected removed", func(v *v1.VirtualMachineInstance) bool { return !agentConnected(v) })
	if got.Status.GuestOSInfo != wantOSInfo {
		t.Errorf("guestOSInfo after the agent stopped: %+v, want the last report kept", got.Status.GuestOSInfo)
	}
	if code, body := get("guestosinfo"); code != http.StatusConflict {
		t.Errorf("GET guestosinfo after the agent stopped: %d %s, want 409", code, body)
	}
}

// agentConnected reports whether the VMI's AgentConnected condition is True.
func agentConnected(vmi *v1.VirtualMachineInstance) bool {
	c := vmi.VMICondition(v1.VirtualMachineInstanceAgentConnected)
	return c != nil && c.Status == corev1.ConditionTrue
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
