package launcher

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/accesscred"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/launchertest"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// recordingAgent plays a guest agent that knows users "vmkit" and "root"
// and records the commands it was sent.
type recordingAgent struct {
	mu       sync.Mutex
	commands []string
	fail     string // the error class and text of guest-ssh-add-authorized-keys, when set
}

func (a *recordingAgent) reply(cmd string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.commands = append(a.commands, cmd)
	var c struct {
		Execute   string         `json:"execute"`
		Arguments map[string]any `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(cmd), &c); err != nil {
		return `{"error":{"class":"GenericError","desc":"bad JSON"}}`, nil
	}
	switch c.Execute {
	case "guest-ping":
		return `{"return":{}}`, nil
	case "guest-ssh-add-authorized-keys", "guest-set-user-password":
		if u := c.Arguments["username"]; u != "vmkit" && u != "root" {
			return `{"error":{"class":"GenericError","desc":"failed to get passwd entry for '` + u.(string) + `'"}}`, nil
		}
		if a.fail != "" && c.Execute == "guest-ssh-add-authorized-keys" {
			return `{"error":{"class":"GenericError","desc":"` + a.fail + `"}}`, nil
		}
		return `{"return":{}}`, nil
	}
	return `{"error":{"class":"CommandNotFound","desc":"The command ` + c.Execute + ` has not been found"}}`, nil
}

// sent returns the commands sent since the last call, without pings.
func (a *recordingAgent) sent() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, c := range a.commands {
		if !strings.Contains(c, "guest-ping") {
			out = append(out, c)
		}
	}
	a.commands = nil
	return out
}

// TestGuestAgentAccessCredentials: with credentials propagated by the
// guest agent the launcher replaces each listed user's authorized_keys with
// the keys of all its credentials (guest-ssh-add-authorized-keys, reset)
// and sets each password of a userPassword Secret (guest-set-user-password,
// base64), reports Succeeded in its status, writes them again when the
// kubelet swaps a Secret's files, and reports a failure naming the field,
// the Secret and the user.
func TestGuestAgentAccessCredentials(t *testing.T) {
	f := startWith(t, func(c *Config) { c.AccessCredentialInterval = 20 * time.Millisecond })
	ctx := context.Background()
	k1, k2, k3 := launchertest.SSHPublicKey(t, "one"), launchertest.SSHPublicKey(t, "two"), launchertest.SSHPublicKey(t, "three")
	launchertest.WriteCredentialSecret(t, f.cfg.PrivateDir, "keys", map[string]string{"a": k1, "b": k2 + "\n"})
	launchertest.WriteCredentialSecret(t, f.cfg.PrivateDir, "more", map[string]string{"k": k3})
	launchertest.WriteCredentialSecret(t, f.cfg.PrivateDir, "pw", map[string]string{"vmkit": "s3cret\n", "nobody": ""})
	agent := &recordingAgent{}
	f.h.SetGuestAgent("ns_vm1", agent.reply)

	vmi := testVMI()
	vmi.Spec.AccessCredentials = []v1.AccessCredential{
		launchertest.SSHCred("keys", launchertest.ByAgent("vmkit", "root")),
		launchertest.SSHCred("more", launchertest.ByAgent("vmkit")),
		{UserPassword: &v1.UserPasswordAccessCredential{
			Source:            v1.UserPasswordAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: "pw"}},
			PropagationMethod: v1.UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}},
		}},
	}
	if _, err := f.c.Sync(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	waitCreds := func(ok bool, msg string) client.AccessCredentialsStatus {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			st, err := f.c.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c := st.AccessCredentials; c != nil && c.Succeeded == ok && strings.Contains(c.Message, msg) {
				return *c
			}
			if time.Now().After(deadline) {
				t.Fatalf("status.accessCredentials %+v, want succeeded=%v with a message holding %q", st.AccessCredentials, ok, msg)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCreds(true, "")
	cmd := func(execute string, args map[string]any) string {
		b, _ := json.Marshal(map[string]any{"execute": execute, "arguments": args})
		return string(b)
	}
	norm := func(cmds []string) []string {
		out := make([]string, len(cmds))
		for i, c := range cmds {
			var v any
			_ = json.Unmarshal([]byte(c), &v)
			b, _ := json.Marshal(v)
			out[i] = string(b)
		}
		return out
	}
	want := []string{
		cmd("guest-ssh-add-authorized-keys", map[string]any{"username": "vmkit", "keys": []string{k1, k2, k3}, "reset": true}),
		cmd("guest-ssh-add-authorized-keys", map[string]any{"username": "root", "keys": []string{k1, k2}, "reset": true}),
		cmd("guest-set-user-password", map[string]any{"username": "vmkit", "password": "czNjcmV0", "crypted": false}),
	}
	if got := norm(agent.sent()); !slices.Equal(got, want) {
		t.Errorf("guest agent commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Unchanged Secrets are not written again; a swapped one is.
	time.Sleep(100 * time.Millisecond)
	if got := agent.sent(); len(got) != 0 {
		t.Errorf("commands while nothing changed: %q", got)
	}
	k4 := launchertest.SSHPublicKey(t, "four")
	launchertest.WriteCredentialSecret(t, f.cfg.PrivateDir, "more", map[string]string{"k": k4})
	deadline := time.Now().Add(5 * time.Second)
	for !slices.ContainsFunc(agent.sent(), func(c string) bool { return strings.Contains(c, k4) && strings.Contains(c, `"vmkit"`) }) {
		if time.Now().After(deadline) {
			t.Fatal("the updated Secret's key never reached the guest agent")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A user the guest does not have fails the sync, naming where it came from.
	agent.mu.Lock()
	agent.fail = "failed to open file '/root/.ssh/authorized_keys': Permission denied"
	agent.mu.Unlock()
	launchertest.WriteCredentialSecret(t, f.cfg.PrivateDir, "keys", map[string]string{"a": k2})
	c := waitCreds(false, `spec.accessCredentials[0].sshPublicKey (Secret "keys"): writing the authorized keys of user "root"`)
	if !strings.Contains(c.Message, "Permission denied") {
		t.Errorf("message %q does not say what the guest agent answered", c.Message)
	}
	agent.mu.Lock()
	agent.fail = ""
	agent.mu.Unlock()
	waitCreds(true, "") // retried until it works

	// The guest agent gone: KubeVirt's message.
	f.h.SetGuestAgent("ns_vm1", nil)
	launchertest.WriteCredentialSecret(t, f.cfg.PrivateDir, "keys", map[string]string{"a": k1})
	waitCreds(false, accesscred.AgentOffline)
	// A bad key: the field, the Secret and the key.
	launchertest.WriteCredentialSecret(t, f.cfg.PrivateDir, "keys", map[string]string{"a": "not a key"})
	waitCreds(false, `spec.accessCredentials[0].sshPublicKey: Secret "keys", key "a", line 1: not an SSH public key`)
}

// TestMigrationTargetKeepsAccessCredentials: the launcher a guest migrated
// to takes over its guest-agent access credentials once it adopts the
// domain.
func TestMigrationTargetKeepsAccessCredentials(t *testing.T) {
	f := startMigratable(t)
	ctx := context.Background()
	key := launchertest.SSHPublicKey(t, "migrated")
	launchertest.WriteCredentialSecret(t, f.cfg.PrivateDir, "keys", map[string]string{"a": key})
	vmi := testVMI()
	vmi.Spec.AccessCredentials = []v1.AccessCredential{launchertest.SSHCred("keys", launchertest.ByAgent("vmkit"))}
	if _, err := f.c.PrepareMigrationTarget(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	xml := `<domain type="qemu"><name>ns_vm1</name><memory>65536</memory><os><type>hvm</type></os></domain>`
	if _, err := f.h.Incoming(ctx, xml); err != nil {
		t.Fatal(err)
	}
	agent := &recordingAgent{}
	f.h.SetGuestAgent("ns_vm1", agent.reply)
	if err := f.h.Resume(ctx, "ns_vm1"); err != nil {
		t.Fatal(err)
	}
	var st client.Status
	waitFor(t, func() bool {
		st, _ = f.c.State(ctx)
		return st.Started && st.AccessCredentials != nil && st.AccessCredentials.Succeeded
	})
	if got := agent.sent(); len(got) != 1 || !strings.Contains(got[0], key) || !strings.Contains(got[0], "guest-ssh-add-authorized-keys") {
		t.Errorf("guest agent commands after the adoption: %q, want vmkit's authorized keys set", got)
	}
}
