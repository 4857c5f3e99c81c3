package libvirt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	golibvirt "libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/internal/testenv/libvirtenv"
	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

const testURI = "test:///default"

// newTestHypervisor connects to uri and closes the connection when the test
// ends.
func newTestHypervisor(t *testing.T, uri string) *Hypervisor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := New(ctx, Options{URI: uri})
	if err != nil {
		t.Fatalf("New(%s): %v", uri, err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func randomUUID(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var (
	nameRE       = regexp.MustCompile(`<name>[^<]*</name>`)
	uuidRE       = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	domainTypeRE = regexp.MustCompile(`^<domain type="[a-z]+">`)
	uidRE        = regexp.MustCompile(`<uid>[^<]*</uid>`)
	tcgRE        = regexp.MustCompile(`(?s)\s*<tcg>.*?</tcg>`)
)

// goldenDomains returns domainxml's golden domain XML files by name.
func goldenDomains(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "domainxml", "testdata", "*.xml"))
	if err != nil || len(files) < 6 {
		t.Fatalf("want at least 6 golden domains in domainxml/testdata, found %d (%v)", len(files), err)
	}
	out := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".xml")] = string(data)
	}
	return out
}

// rename gives a golden domain a fresh name, UUID and VMI UID, so runs
// never collide with each other or with leftovers, and optionally another
// domain type.
func rename(t *testing.T, xml, name, domainType string) (out, uid string) {
	t.Helper()
	uid = randomUUID(t)
	// Only the first <name>: the one in the metadata is the VMI's.
	loc := nameRE.FindStringIndex(xml)
	if loc == nil {
		t.Fatalf("no <name> in\n%s", xml)
	}
	out = xml[:loc[0]] + "<name>" + name + "</name>" + xml[loc[1]:]
	out = uuidRE.ReplaceAllLiteralString(out, randomUUID(t))
	out = uidRE.ReplaceAllLiteralString(out, "<uid>"+uid+"</uid>")
	if domainType != "" {
		out = domainTypeRE.ReplaceAllLiteralString(out, `<domain type="`+domainType+`">`)
	}
	if domainType == "kvm" {
		// The goldens are rendered for emulation; under KVM the launcher
		// renders no TCG features, which libvirt refuses with type kvm.
		out = tcgRE.ReplaceAllLiteralString(out, "")
	}
	return out, uid
}

// TestGoldenDomainsDefine defines every golden domain in libvirt's test
// driver and in the real QEMU driver (which checks devices against what
// QEMU supports), finds it again by its VMI UID and undefines it. In the
// QEMU driver the domain type is what the launcher would choose: kvm where
// the domain capabilities offer it, qemu (TCG) on a node without KVM.
func TestGoldenDomainsDefine(t *testing.T) {
	goldens := goldenDomains(t)
	qemuURI := libvirtenv.RequireLibvirt(t)
	qemuType := "qemu"
	if kvm, err := newTestHypervisor(t, qemuURI).KVMSupported(context.Background(), "x86_64"); err != nil {
		t.Fatal(err)
	} else if kvm {
		qemuType = "kvm"
	}
	for _, tc := range []struct{ uri, domainType string }{
		{testURI, "test"}, // the test driver only knows its own domain type
		{qemuURI, qemuType},
	} {
		h := newTestHypervisor(t, tc.uri)
		for golden, xml := range goldens {
			t.Run(tc.uri+"/"+golden, func(t *testing.T) {
				ctx := context.Background()
				name := "vmkit-define-" + golden + "-" + randomSuffix(t)
				xml, uid := rename(t, xml, name, tc.domainType)
				d, err := h.Define(ctx, xml)
				if err != nil {
					t.Fatalf("Define: %v\n%s", err, xml)
				}
				t.Cleanup(func() {
					if err := h.Undefine(context.Background(), name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
						t.Errorf("cleanup: %v", err)
					}
				})
				if d.Name != name || d.VMI.UID != uid || d.State.State != hypervisor.StateShutoff {
					t.Errorf("Define returned %+v, want name %s, VMI UID %s, shut off", d, name, uid)
				}
				listed, err := h.List(ctx, uid)
				if err != nil {
					t.Fatalf("List: %v", err)
				}
				if len(listed) != 1 || listed[0].Name != name || listed[0].UUID != d.UUID {
					t.Errorf("List(%s) = %+v, want only %s", uid, listed, name)
				}
				if err := h.Undefine(ctx, name); err != nil {
					t.Fatalf("Undefine: %v", err)
				}
				if _, err := h.State(ctx, name); !errors.Is(err, hypervisor.ErrNotFound) {
					t.Errorf("State after Undefine: %v, want ErrNotFound", err)
				}
			})
		}
	}
}

// TestLifecycleTestDriver walks a domain through every state change on
// libvirt's test driver and checks the state and reason after each.
func TestLifecycleTestDriver(t *testing.T) {
	h := newTestHypervisor(t, testURI)
	ctx := context.Background()
	xml, uid := rename(t, goldenDomains(t)["minimal-containerdisk"], "vmkit-lifecycle", "test")
	if _, err := h.Define(ctx, xml); err != nil {
		t.Fatalf("Define: %v", err)
	}
	t.Cleanup(func() {
		_ = h.Destroy(context.Background(), "vmkit-lifecycle")
		_ = h.Undefine(context.Background(), "vmkit-lifecycle")
	})
	want := func(step string, st hypervisor.State, reason hypervisor.Reason) {
		t.Helper()
		got, err := h.State(ctx, "vmkit-lifecycle")
		if err != nil {
			t.Fatalf("%s: State: %v", step, err)
		}
		if got.State != st || got.Reason != reason {
			t.Errorf("after %s: state %v, want %s (%s)", step, got, st, reason)
		}
	}
	want("Define", hypervisor.StateShutoff, hypervisor.ReasonUnknown)
	if err := h.Pause(ctx, "vmkit-lifecycle"); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("Pause of a shut-off domain: %v, want ErrInvalidState", err)
	}
	// The test driver cannot start paused; the boot test covers that.
	if err := h.Start(ctx, "vmkit-lifecycle", hypervisor.StartOptions{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	want("Start", hypervisor.StateRunning, hypervisor.ReasonBooted)
	if err := h.Pause(ctx, "vmkit-lifecycle"); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	want("Pause", hypervisor.StatePaused, hypervisor.ReasonUser)
	if err := h.Reboot(ctx, "vmkit-lifecycle", hypervisor.RebootACPI); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("Reboot of a paused domain: %v, want ErrInvalidState", err)
	}
	if err := h.Start(ctx, "vmkit-lifecycle", hypervisor.StartOptions{}); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("Start of a started domain: %v, want ErrInvalidState", err)
	}
	if err := h.Resume(ctx, "vmkit-lifecycle"); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	want("Resume", hypervisor.StateRunning, hypervisor.ReasonUnpaused)
	if err := h.Pause(ctx, "vmkit-lifecycle"); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	want("Pause", hypervisor.StatePaused, hypervisor.ReasonUser)
	if err := h.Resume(ctx, "vmkit-lifecycle"); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := h.Undefine(ctx, "vmkit-lifecycle"); !errors.Is(err, hypervisor.ErrInvalidState) {
		t.Errorf("Undefine of a running domain: %v, want ErrInvalidState", err)
	}
	destroyed, err := hypervisor.StopGracefully(ctx, h, "vmkit-lifecycle", 5*time.Second, 20*time.Millisecond)
	if err != nil {
		t.Fatalf("StopGracefully: %v", err)
	}
	if destroyed {
		t.Errorf("StopGracefully destroyed the domain; the test driver shuts down at once")
	}
	want("StopGracefully", hypervisor.StateShutoff, hypervisor.ReasonShutdown)
	if err := h.Destroy(ctx, "vmkit-lifecycle"); err != nil {
		t.Errorf("Destroy of a shut-off domain: %v, want nil", err)
	}
	if err := h.Start(ctx, "vmkit-lifecycle", hypervisor.StartOptions{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	want("Start", hypervisor.StateRunning, hypervisor.ReasonBooted)
	if err := h.Destroy(ctx, "vmkit-lifecycle"); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	want("Destroy", hypervisor.StateShutoff, hypervisor.ReasonDestroyed)
	if got, err := h.List(ctx, uid); err != nil || len(got) != 1 {
		t.Errorf("List(%s) = %v, %v; want the domain", uid, got, err)
	}
	if err := h.Undefine(ctx, "vmkit-lifecycle"); err != nil {
		t.Fatalf("Undefine: %v", err)
	}
	if _, err := h.State(ctx, "vmkit-lifecycle"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("State of an undefined domain: %v, want ErrNotFound", err)
	}
	if got, err := h.List(ctx, uid); err != nil || len(got) != 0 {
		t.Errorf("List(%s) after Undefine = %v, %v; want nothing", uid, got, err)
	}
}

// TestReconnect closes the connection under the hypervisor, as a libvirtd
// restart does, and checks that the next calls reconnect.
func TestReconnect(t *testing.T) {
	h := newTestHypervisor(t, testURI)
	ctx := context.Background()
	// The test driver's built-in domain.
	if _, err := h.State(ctx, "test"); err != nil {
		t.Fatalf("State: %v", err)
	}
	h.mu.Lock()
	old := h.conn
	if _, err := old.Close(); err != nil {
		t.Fatalf("closing the connection: %v", err)
	}
	h.mu.Unlock()

	for i := 0; i < 2; i++ {
		st, err := h.State(ctx, "test")
		if err != nil {
			t.Fatalf("State after the connection closed (call %d): %v", i+1, err)
		}
		if st.State != hypervisor.StateRunning {
			t.Errorf("State = %v, want Running", st)
		}
	}
	h.mu.Lock()
	reconnected := h.conn != nil && h.conn != old
	h.mu.Unlock()
	if !reconnected {
		t.Error("the hypervisor did not open a new connection")
	}
}

// TestRetryAfterConnectionLoss makes the first attempt of a call fail the
// way calls fail when libvirtd goes away mid-call (the connection dies under
// it) and checks that the call reconnects and succeeds on the second try.
func TestRetryAfterConnectionLoss(t *testing.T) {
	h := newTestHypervisor(t, testURI)
	attempts := 0
	err := h.call(context.Background(), "probe", "test", func(c *golibvirt.Connect) error {
		attempts++
		if attempts == 1 {
			if _, err := c.Close(); err != nil {
				t.Errorf("closing the connection: %v", err)
			}
			return errors.New("client socket is closed")
		}
		dom, err := c.LookupDomainByName("test")
		if err != nil {
			return err
		}
		return dom.Free()
	})
	if err != nil || attempts != 2 {
		t.Fatalf("call = %v after %d attempts, want success on the second", err, attempts)
	}
	// An error on a live connection is returned, not retried.
	attempts = 0
	err = h.call(context.Background(), "probe", "test", func(*golibvirt.Connect) error {
		attempts++
		return errors.New("plain failure")
	})
	if err == nil || attempts != 1 {
		t.Errorf("call = %v after %d attempts, want the error after one", err, attempts)
	}
}

// TestCallTimeout checks that calls honour their context.
func TestCallTimeout(t *testing.T) {
	h := newTestHypervisor(t, testURI)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.State(ctx, "test"); !errors.Is(err, context.Canceled) {
		t.Errorf("State with a cancelled context: %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := h.List(ctx, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("List past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if _, err := New(ctx, Options{URI: testURI}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("New past its deadline: %v, want context.DeadlineExceeded", err)
	}
}

// TestErrors checks the mapping of libvirt's errors.
func TestErrors(t *testing.T) {
	h := newTestHypervisor(t, testURI)
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"State":    func() error { _, err := h.State(ctx, "no-such-domain"); return err },
		"Start":    func() error { return h.Start(ctx, "no-such-domain", hypervisor.StartOptions{}) },
		"Destroy":  func() error { return h.Destroy(ctx, "no-such-domain") },
		"Undefine": func() error { return h.Undefine(ctx, "no-such-domain") },
		"Console":  func() error { _, err := h.Console(ctx, "no-such-domain"); return err },
		"GuestAgentCommand": func() error {
			_, err := h.GuestAgentCommand(ctx, "no-such-domain", `{"execute":"guest-ping"}`)
			return err
		},
	} {
		if err := call(); !errors.Is(err, hypervisor.ErrNotFound) || !strings.Contains(err.Error(), "no-such-domain") {
			t.Errorf("%s of a missing domain: %v, want ErrNotFound naming the domain", name, err)
		}
	}
	if _, err := h.Define(ctx, "<domain"); err == nil {
		t.Error("Define of malformed XML succeeded")
	}
	h2 := newTestHypervisor(t, testURI)
	if err := h2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.State(ctx, "test"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("State after Close: %v, want an error saying the hypervisor is closed", err)
	}
}

// TestListIgnoresForeignDomains checks that List skips domains without
// vmkit metadata, like the test driver's built-in one.
func TestListIgnoresForeignDomains(t *testing.T) {
	h := newTestHypervisor(t, testURI)
	got, err := h.List(context.Background(), "")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, d := range got {
		if d.Name == "test" {
			t.Errorf("List returned the test driver's own domain %+v", d)
		}
	}
}

// TestKVMSupported: the domain capabilities' answer agrees with the host
// capabilities' list of domain types for the architecture, an architecture
// without an emulator has no KVM, and the test driver has none.
func TestKVMSupported(t *testing.T) {
	qemuURI := libvirtenv.RequireLibvirt(t)
	ctx := context.Background()
	h := newTestHypervisor(t, qemuURI)
	got, err := h.KVMSupported(ctx, "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := golibvirt.NewConnect(qemuURI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	capsXML, err := conn.GetCapabilities()
	if err != nil {
		t.Fatal(err)
	}
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(capsXML); err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, g := range caps.Guests {
		if g.Arch.Name != "x86_64" {
			continue
		}
		for _, d := range g.Arch.Domains {
			listed = listed || d.Type == "kvm"
		}
	}
	if got != listed {
		t.Errorf("KVMSupported(x86_64) = %v, but the host capabilities list domain type kvm: %v", got, listed)
	}
	t.Logf("KVM usable on this host: %v", got)
	if kvm, err := h.KVMSupported(ctx, "s390x"); err != nil || kvm {
		t.Errorf("KVMSupported(s390x) = %v, %v; want false (no emulator)", kvm, err)
	}
	if kvm, err := newTestHypervisor(t, testURI).KVMSupported(ctx, "x86_64"); err != nil || kvm {
		t.Errorf("test driver: KVMSupported = %v, %v; want false", kvm, err)
	}
}

// TestUnavailableNamesLibvirt: with no libvirtd behind the URI, calls fail
// with an error that names libvirt and matches hypervisor.ErrUnavailable,
// which the launcher waits out (nodeagent/launcher's unavailable.go).
func TestUnavailableNamesLibvirt(t *testing.T) {
	uri := "qemu+unix:///session?socket=" + filepath.Join(t.TempDir(), "libvirt-sock")
	_, err := New(context.Background(), Options{URI: uri})
	if !errors.Is(err, hypervisor.ErrUnavailable) || !strings.Contains(err.Error(), "libvirt at "+uri+" is unavailable") {
		t.Errorf("New without a daemon: %v, want an ErrUnavailable naming libvirt at %s", err, uri)
	}
}
