package accesscred

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// fakeAgent records the calls a Syncer makes; ping fails while offline.
type fakeAgent struct {
	mu      sync.Mutex
	offline bool
	calls   []string
}

func (a *fakeAgent) Ping(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.offline {
		return errors.New("no agent")
	}
	return nil
}

func (a *fakeAgent) Call(_ context.Context, command string, args any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := args.(map[string]any)
	a.calls = append(a.calls, command+" "+m["username"].(string))
	return nil
}

// TestSyncerReportsAndWrites: a Syncer writes each user's keys, then the
// passwords, reports success, and reports KubeVirt's message while the
// agent is offline.
func TestSyncerReportsAndWrites(t *testing.T) {
	priv := t.TempDir()
	for secret, files := range map[string]map[string]string{
		"keys": {"a": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl one"},
		"pw":   {"vmkit": "s3cret\n"},
	} {
		dir := filepath.Join(priv, "secret", secret+dirSuffix)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range files {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	vmi := &v1.VirtualMachineInstance{}
	vmi.Spec.AccessCredentials = []v1.AccessCredential{
		{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
			Source:            v1.SSHPublicKeyAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: "keys"}},
			PropagationMethod: v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: []string{"root", "vmkit"}}},
		}},
		{UserPassword: &v1.UserPasswordAccessCredential{
			Source:            v1.UserPasswordAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: "pw"}},
			PropagationMethod: v1.UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}},
		}},
	}
	if !ForGuestAgent(vmi) {
		t.Fatal("ForGuestAgent = false for credentials propagated by the guest agent")
	}
	for _, tc := range []struct {
		name      string
		offline   bool
		wantOK    bool
		wantMsg   string
		wantCalls []string
	}{
		{name: "agent answers", wantOK: true, wantCalls: []string{"guest-ssh-add-authorized-keys root", "guest-ssh-add-authorized-keys vmkit", "guest-set-user-password vmkit"}},
		{name: "agent offline", offline: true, wantMsg: AgentOffline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := &fakeAgent{offline: tc.offline}
			type outcome struct {
				ok  bool
				msg string
			}
			reports := make(chan outcome, 1)
			s := Syncer{PrivateDir: priv, Interval: time.Hour, Agent: agent, Report: func(ok bool, msg string) {
				select {
				case reports <- outcome{ok, msg}:
				default:
				}
			}}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { s.Run(ctx, vmi, nil); close(done) }()
			got := <-reports
			cancel()
			<-done
			if got.ok != tc.wantOK || !strings.HasPrefix(got.msg, tc.wantMsg) {
				t.Errorf("report %+v, want ok %v with a message starting %q", got, tc.wantOK, tc.wantMsg)
			}
			if diff := cmp.Diff(tc.wantCalls, agent.calls); diff != "" {
				t.Errorf("agent calls (-want +got):\n%s", diff)
			}
		})
	}
}
