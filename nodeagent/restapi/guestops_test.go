package restapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/internal/agenttest"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// restFixture is a REST API that serves ns/vm1, Running on node01 with a
// real launcher on the fake hypervisor (domain ns_vm1), and ns/elsewhere,
// Running on node02.
type restFixture struct {
	t      *testing.T
	h      *hvfake.Hypervisor
	client *vmfake.Clientset
	rec    *record.FakeRecorder
	b      *fakeBackend
	s      *server
	url    string // the API server's URL
}

func newRESTFixture(t *testing.T) *restFixture {
	t.Helper()
	// Not t.TempDir: the launcher's socket path must fit sun_path.
	dir, err := os.MkdirTemp("", "nrest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	share := filepath.Join(dir, "share")
	vmi := agenttest.VMI("vm1", "0d4a0f4e-1111-4222-8333-944455556666")
	f := &restFixture{t: t, h: hvfake.New(), rec: record.NewFakeRecorder(100)}
	agenttest.RunGuest(t, dir, share, f.h, vmi)
	vmi.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01"}
	elsewhere := agenttest.VMI("elsewhere", "0d4a0f4e-2222-4222-8333-944455556666")
	elsewhere.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node02"}
	f.client = vmfake.NewSimpleClientset(vmi, elsewhere)
	f.b = &fakeBackend{node: "node01", client: f.client, share: share, rec: f.rec}
	f.s = &server{b: f.b}
	srv := httptest.NewServer(f.s.routes())
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// update changes ns/vm1 on the API server (the backend's cache does not
// hold it: the REST API reads the API server when its cache says no).
func (f *restFixture) update(mutate func(*v1.VirtualMachineInstance)) {
	f.t.Helper()
	ctx := context.Background()
	vmi, err := f.client.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm1", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	mutate(vmi)
	if _, err := f.client.KubevirtV1().VirtualMachineInstances("ns").Update(ctx, vmi, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// do sends a request for a VMI's subresource and returns the status code
// and body.
func (f *restFixture) do(method, vmi, subresource, body string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url+"/v1/namespaces/ns/virtualmachineinstances/"+vmi+"/"+subresource, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func setAgentConnected(connected bool) func(*v1.VirtualMachineInstance) {
	return func(vmi *v1.VirtualMachineInstance) {
		vmi.Status.Conditions = nil
		if connected {
			vmi.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue}}
		}
	}
}

// recordingAgent is a guest agent that records the commands it gets and
// answers them with replies (see hvfake.GuestAgentReplies).
type recordingAgent struct {
	mu       sync.Mutex
	commands []string
	answer   hvfake.GuestAgentFunc
}

func (r *recordingAgent) run(cmd string) (string, error) {
	r.mu.Lock()
	r.commands = append(r.commands, cmd)
	r.mu.Unlock()
	return r.answer(cmd)
}

func (r *recordingAgent) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.commands...)
}

// TestSoftReboot: the REST API reboots through the guest agent while
// AgentConnected is True, with ACPI otherwise, and refuses a paused VMI
// and one with neither, with KubeVirt's messages.
func TestSoftReboot(t *testing.T) {
	f := newRESTFixture(t)
	reboots := func() int { return strings.Count(strings.Join(f.h.Calls(), ","), "Reboot ns_vm1") }

	// No guest agent: ACPI.
	if code, body := f.do("PUT", "vm1", "softreboot", ""); code != http.StatusOK {
		t.Fatalf("softreboot with ACPI: %d %s", code, body)
	}
	if n := reboots(); n != 1 {
		t.Errorf("%d reboots, want 1: %v", n, f.h.Calls())
	}
	select {
	case e := <-f.rec.Events:
		if !strings.Contains(e, "Normal SoftRebooted") || !strings.Contains(e, "ACPI") {
			t.Errorf("event %q, want SoftRebooted with ACPI", e)
		}
	default:
		t.Error("no SoftRebooted event")
	}

	// The guest agent is connected: through it.
	agent := &recordingAgent{answer: hvfake.GuestAgentReplies(map[string]string{"guest-shutdown": "{}"})}
	f.h.SetGuestAgent("ns_vm1", agent.run)
	f.update(setAgentConnected(true))
	if code, body := f.do("PUT", "vm1", "softreboot", ""); code != http.StatusOK {
		t.Fatalf("softreboot through the guest agent: %d %s", code, body)
	}
	if got := agent.got(); len(got) != 1 || !strings.Contains(got[0], `"guest-shutdown","arguments":{"mode":"reboot"}`) {
		t.Errorf("the guest agent got %q, want guest-shutdown with mode reboot", got)
	}

	for _, tc := range []struct {
		name     string
		vmi      string
		setup    func()
		wantCode int
		wantMsg  string
	}{
		{"the agent stopped answering", "vm1", func() { f.h.SetGuestAgent("ns_vm1", nil) }, http.StatusConflict, errNoGuestAgent},
		{"no agent, ACPI disabled", "vm1", func() {
			f.update(func(vmi *v1.VirtualMachineInstance) {
				setAgentConnected(false)(vmi)
				vmi.Spec.Domain.Features = &v1.Features{ACPI: v1.FeatureState{Enabled: v1.BoolPtr(false)}}
			})
		}, http.StatusConflict, errNoAgentNorACPI},
		{"paused", "vm1", func() {
			f.update(func(vmi *v1.VirtualMachineInstance) {
				vmi.Spec.Domain.Features = nil
				vmi.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue}}
			})
		}, http.StatusConflict, errPaused},
		{"on another node", "elsewhere", func() {}, http.StatusNotFound, "does not run on node node01"},
		{"unknown", "nope", func() {}, http.StatusNotFound, "does not run on node node01"},
	} {
		tc.setup()
		before := reboots()
		code, body := f.do("PUT", tc.vmi, "softreboot", "")
		var e apiError
		if err := json.Unmarshal([]byte(body), &e); err != nil || code != tc.wantCode || !strings.Contains(e.Message, tc.wantMsg) || e.Code != code {
			t.Errorf("%s: %d %s, want %d %q", tc.name, code, body, tc.wantCode, tc.wantMsg)
		}
		if tc.name != "the agent stopped answering" && reboots() != before {
			t.Errorf("%s: the hypervisor was asked to reboot", tc.name)
		}
	}
}

// TestReset: the REST API resets the guest whatever its guest agent and
// ACPI, running or paused, with KubeVirt's Normal event Reset; the
// hypervisor's failure is a 500 naming the VMI, and VMIs that are not
// running, or not on this node, are refused before the launcher is asked.
func TestReset(t *testing.T) {
	f := newRESTFixture(t)
	resets := func() int { return strings.Count(strings.Join(f.h.Calls(), ","), "Reset ns_vm1") }
	state := func() hypervisor.State {
		st, err := f.h.State(context.Background(), "ns_vm1")
		if err != nil {
			t.Fatal(err)
		}
		return st.State
	}

	// ACPI off and no agent do not matter: the guest is not asked.
	f.update(func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Features = &v1.Features{ACPI: v1.FeatureState{Enabled: v1.BoolPtr(false)}}
	})
	if code, body := f.do("PUT", "vm1", "reset", ""); code != http.StatusOK {
		t.Fatalf("reset: %d %s", code, body)
	}
	if n, st := resets(), state(); n != 1 || st != hypervisor.StateRunning {
		t.Errorf("after the reset: %d resets, domain %s; want 1, Running: %v", n, st, f.h.Calls())
	}
	wantEvent := func(step string) {
		t.Helper()
		select {
		case e := <-f.rec.Events:
			if e != "Normal Reset VirtualMachineInstance reset" {
				t.Errorf("%s: event %q, want KubeVirt's Normal Reset", step, e)
			}
		default:
			t.Errorf("%s: no Reset event", step)
		}
	}
	wantEvent("reset")

	// A paused guest is reset and stays paused, as in KubeVirt.
	if code, body := f.do("PUT", "vm1", "pause", ""); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	if enqueued, _ := f.b.reported(); !slices.Equal(enqueued, []string{"ns/vm1"}) {
		t.Errorf("after the pause, the API asked the agent to sync %q, want ns/vm1", enqueued)
	}
	f.update(func(vmi *v1.VirtualMachineInstance) {
		vmi.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue}}
	})
	if code, body := f.do("PUT", "vm1", "reset", ""); code != http.StatusOK {
		t.Fatalf("reset of the paused VMI: %d %s", code, body)
	}
	if n, st := resets(), state(); n != 2 || st != hypervisor.StatePaused {
		t.Errorf("after the paused reset: %d resets, domain %s; want 2, Paused", n, st)
	}
	wantEvent("paused reset")

	for _, tc := range []struct {
		name     string
		vmi      string
		setup    func()
		wantCode int
		wantMsg  string
		asked    bool // the hypervisor was asked to reset
	}{
		{"the hypervisor fails", "vm1", func() { f.h.FailNext("Reset", errors.New("QEMU is wedged")) },
			http.StatusInternalServerError, "reset VMI ns/vm1: QEMU is wedged", true},
		{"on another node", "elsewhere", func() {}, http.StatusNotFound, "does not run on node node01", false},
		{"unknown", "nope", func() {}, http.StatusNotFound, "does not run on node node01", false},
		{"not running", "vm1", func() {
			f.update(func(vmi *v1.VirtualMachineInstance) { vmi.Status.Phase = v1.Succeeded })
		}, http.StatusConflict, "VirtualMachineInstance ns/vm1 is not running (phase Succeeded)", false},
	} {
		tc.setup()
		before := resets()
		code, body := f.do("PUT", tc.vmi, "reset", "")
		var e apiError
		if err := json.Unmarshal([]byte(body), &e); err != nil || code != tc.wantCode || !strings.Contains(e.Message, tc.wantMsg) || e.Code != code {
			t.Errorf("%s: %d %s, want %d %q", tc.name, code, body, tc.wantCode, tc.wantMsg)
		}
		if asked := resets() != before; asked != tc.asked {
			t.Errorf("%s: the hypervisor was asked to reset: %v, want %v", tc.name, asked, tc.asked)
		}
	}
	select {
	case e := <-f.rec.Events:
		t.Errorf("event %q after the refused resets, want none", e)
	default:
	}
	if _, errs := f.b.reported(); !maps.Equal(errs, map[string]int{"reset": 1}) {
		t.Errorf("launcher errors %v, want the one failed reset", errs)
	}
}

// fsFreezeAgent plays qemu-ga's freeze commands.
func fsFreezeAgent(frozen *bool, mu *sync.Mutex) hvfake.GuestAgentFunc {
	return func(cmd string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.Contains(cmd, `"guest-fsfreeze-status"`):
			if *frozen {
				return `{"return":"frozen"}`, nil
			}
			return `{"return":"thawed"}`, nil
		case strings.Contains(cmd, `"guest-fsfreeze-freeze"`):
			*frozen = true
			return `{"return":1}`, nil
		case strings.Contains(cmd, `"guest-fsfreeze-thaw"`):
			*frozen = false
			return `{"return":1}`, nil
		}
		return `{"error":{"class":"CommandNotFound","desc":"not supported by this test's agent"}}`, nil
	}
}

// TestFreezeUnfreeze: freeze and unfreeze go to the guest agent, the
// unfreeze timeout thaws the guest, guestosinfo reports the freeze, and a
// VMI without its agent is refused with KubeVirt's message.
func TestFreezeUnfreeze(t *testing.T) {
	f := newRESTFixture(t)
	for _, op := range []string{"freeze", "unfreeze"} {
		if code, body := f.do("PUT", "vm1", op, ""); code != http.StatusConflict || !strings.Contains(body, errNoGuestAgent) {
			t.Errorf("%s without AgentConnected: %d %s, want 409 %q", op, code, body, errNoGuestAgent)
		}
	}
	f.update(setAgentConnected(true))
	if code, body := f.do("PUT", "vm1", "freeze", ""); code != http.StatusConflict || !strings.Contains(body, errNoGuestAgent) {
		t.Errorf("freeze with AgentConnected but no agent answering: %d %s, want 409 %q", code, body, errNoGuestAgent)
	}

	var (
		mu     sync.Mutex
		frozen bool
	)
	isFrozen := func() bool { mu.Lock(); defer mu.Unlock(); return frozen }
	f.h.SetGuestAgent("ns_vm1", fsFreezeAgent(&frozen, &mu))
	if code, body := f.do("PUT", "vm1", "freeze", ""); code != http.StatusOK || !isFrozen() {
		t.Fatalf("freeze: %d %s, frozen %v", code, body, isFrozen())
	}
	code, body := f.do("GET", "vm1", "guestosinfo", "")
	var info v1.VirtualMachineInstanceGuestAgentInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil || code != http.StatusOK || info.FSFreezeStatus != "frozen" {
		t.Errorf("guestosinfo while frozen: %d %s, want fsFreezeStatus frozen", code, body)
	}
	if code, body := f.do("PUT", "vm1", "unfreeze", ""); code != http.StatusOK || isFrozen() {
		t.Fatalf("unfreeze: %d %s, frozen %v", code, body, isFrozen())
	}

	if code, body := f.do("PUT", "vm1", "freeze", `{"unfreezeTimeout":"100ms"}`); code != http.StatusOK || !isFrozen() {
		t.Fatalf("freeze with an unfreeze timeout: %d %s, frozen %v", code, body, isFrozen())
	}
	waitFor(t, func() bool { return !isFrozen() })

	for _, body := range []string{`{"unfreezeTimeout":"-1m"}`, `{"unfreezeTimeout":5}`, `{`} {
		if code, resp := f.do("PUT", "vm1", "freeze", body); code != http.StatusBadRequest {
			t.Errorf("freeze with %s: %d %s, want 400", body, code, resp)
		}
	}
	if isFrozen() {
		t.Error("a refused freeze froze the guest")
	}
	if code, body := f.do("PUT", "elsewhere", "freeze", ""); code != http.StatusNotFound {
		t.Errorf("freeze of a VMI on another node: %d %s, want 404", code, body)
	}
	// The guest agent routes stay read-only for GET: a GET freeze is no route.
	if code, _ := f.do("GET", "vm1", "freeze", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET freeze: %d, want 405", code)
	}
}
