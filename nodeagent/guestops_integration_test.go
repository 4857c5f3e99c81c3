package nodeagent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The REST API's guest agent operations on a real guest (TestGuestAgent's,
// with qemu-ga): freeze and unfreeze, and a soft reboot; and a reset, which
// needs no agent.

// request sends a request for the VMI's subresource through the agent's
// REST API and returns the status code and body.
func (n *testNode) request(t *testing.T, method, name, subresource, body string) (int, string) {
	t.Helper()
	url := n.agentServer.URL + fmt.Sprintf("/v1/namespaces/%s/virtualmachineinstances/%s/%s", n.ns, name, subresource)
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// fsFreezeStatus is what guestosinfo reports of the guest's file systems.
func (n *testNode) fsFreezeStatus(t *testing.T, name string) string {
	t.Helper()
	code, body := n.request(t, "GET", name, "guestosinfo", "")
	var info v1.VirtualMachineInstanceGuestAgentInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil || code != http.StatusOK {
		t.Fatalf("GET guestosinfo: %d %s", code, body)
	}
	return info.FSFreezeStatus
}

// testFreeze freezes and thaws the guest's file systems through qemu-ga.
// The test guest runs from its initramfs and has no file system that can
// be frozen (FIFREEZE needs a block device's): qemu-ga freezes none and
// reports the guest thawed again at once, so this proves the round trip
// through the launcher and qemu-ga, not the frozen state (the fake guest
// agent's unit tests do: nodeagent/restapi's TestFreezeUnfreeze).
func (n *testNode) testFreeze(t *testing.T, name string) {
	if got := n.fsFreezeStatus(t, name); got != "thawed" {
		t.Fatalf("fsFreezeStatus before the freeze: %q, want thawed", got)
	}
	for _, tc := range []struct{ method, subresource, body string }{
		{"PUT", "freeze", ""},
		{"PUT", "unfreeze", ""},
		{"PUT", "freeze", `{"unfreezeTimeout":"1m"}`},
		{"PUT", "unfreeze", ""},
	} {
		if code, body := n.request(t, tc.method, name, tc.subresource, tc.body); code != http.StatusOK {
			t.Fatalf("%s %s %s: %d %s", tc.method, tc.subresource, tc.body, code, body)
		}
	}
	if code, body := n.request(t, "PUT", name, "freeze", `{"unfreezeTimeout":"-1m"}`); code != http.StatusBadRequest {
		t.Errorf("PUT freeze with a negative unfreeze timeout: %d %s, want 400", code, body)
	}
	if got := n.fsFreezeStatus(t, name); got != "thawed" {
		t.Errorf("fsFreezeStatus after the unfreeze: %q, want thawed", got)
	}
}

// testSoftReboot soft-reboots the guest through qemu-ga and waits for it
// to boot again. qemu-ga reboots by running /sbin/shutdown -r, which the
// busybox test guest lacks: the test gives it one first (through libvirt's
// guest agent access, which the launcher's read-only list does not offer),
// as a distribution has.
func (n *testNode) testSoftReboot(t *testing.T, name string) {
	domain := n.ns + "_" + name
	ctx := context.Background()
	script := "/bin/busybox mkdir -p /sbin && " +
		`printf '#!/bin/busybox sh\ncase " $* " in *" -r "*) exec /bin/busybox reboot -f ;; esac\nexec /bin/busybox poweroff -f\n' >/sbin/shutdown && ` +
		"/bin/busybox chmod 755 /sbin/shutdown"
	cmd, _ := json.Marshal(map[string]any{"execute": "guest-exec", "arguments": map[string]any{
		"path": "/bin/busybox", "arg": []string{"sh", "-c", script}}})
	if _, err := n.hv.GuestAgentCommand(ctx, domain, string(cmd)); err != nil {
		t.Fatalf("giving the guest /sbin/shutdown: %v", err)
	}
	// The script is quick; guest-exec does not wait for it.
	time.Sleep(time.Second)

	url := strings.Replace(n.agentServer.URL, "http://", "ws://", 1) +
		fmt.Sprintf("/v1/namespaces/%s/virtualmachineinstances/%s/console", n.ns, name)
	ws, err := websocket.Dial(url, "", "http://localhost/")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	rebooted := time.Now()
	if code, body := n.request(t, "PUT", name, "softreboot", ""); code != http.StatusOK {
		t.Fatalf("PUT softreboot: %d %s", code, body)
	}
	_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	var out []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(out, []byte(guestMarker)) {
		k, err := ws.Read(buf)
		out = append(out, buf[:k]...)
		if err != nil {
			t.Fatalf("console after the soft reboot: %v; read: %q", err, out)
		}
	}
	t.Logf("PUT softreboot → %s on the console again in %v", guestMarker, time.Since(rebooted).Round(time.Millisecond))
}

// testReset resets the guest through the REST API and waits for it to
// boot again on the console; the VMI stays Running, the same instance.
func (n *testNode) testReset(t *testing.T, name string) {
	ctx := context.Background()
	before, err := n.client.KubevirtV1().VirtualMachineInstances(n.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(n.agentServer.URL, "http://", "ws://", 1) +
		fmt.Sprintf("/v1/namespaces/%s/virtualmachineinstances/%s/console", n.ns, name)
	ws, err := websocket.Dial(url, "", "http://localhost/")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	reset := time.Now()
	if code, body := n.request(t, "PUT", name, "reset", ""); code != http.StatusOK {
		t.Fatalf("PUT reset: %d %s", code, body)
	}
	_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	var out []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(out, []byte(guestMarker)) {
		k, err := ws.Read(buf)
		out = append(out, buf[:k]...)
		if err != nil {
			t.Fatalf("console after the reset: %v; read: %q", err, out)
		}
	}
	t.Logf("PUT reset → %s on the console again in %v", guestMarker, time.Since(reset).Round(time.Millisecond))
	after, err := n.client.KubevirtV1().VirtualMachineInstances(n.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID || after.Status.Phase != v1.Running {
		t.Errorf("after the reset: VMI %s %s, want %s still Running", after.UID, after.Status.Phase, before.UID)
	}
}
