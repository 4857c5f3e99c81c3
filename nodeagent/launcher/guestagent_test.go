package launcher

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

func TestLauncherGuestAgent(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	var le *client.Error

	// Before the domain starts.
	if _, err := f.c.GuestAgentCommand(ctx, "guest-ping"); !errors.As(err, &le) || le.Code != 409 || errors.Is(err, hypervisor.ErrAgentUnavailable) {
		t.Errorf("guest-ping before the domain started: %v, want a 409 that is not AgentUnavailable", err)
	}
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	// No agent in the guest.
	if _, err := f.c.GuestAgentCommand(ctx, "guest-ping"); !errors.Is(err, hypervisor.ErrAgentUnavailable) || !errors.As(err, &le) || le.Code != 409 {
		t.Errorf("guest-ping without an agent: %v, want 409 AgentUnavailable", err)
	}

	f.h.SetGuestAgent("ns_vm1", hvfake.GuestAgentReplies(map[string]string{
		"guest-ping":       `{}`,
		"guest-get-osinfo": `{"name":"Fedora Linux","kernel-release":"6.5.6-300.fc39.x86_64"}`,
		"guest-get-users":  `[{"user":"fedora","login-time":1700000000.5}]`,
	}))
	for _, tc := range []struct{ command, want string }{
		{"guest-ping", `{}`},
		{"guest-get-osinfo", `{"name":"Fedora Linux","kernel-release":"6.5.6-300.fc39.x86_64"}`},
		{"guest-get-users", `[{"user":"fedora","login-time":1700000000.5}]`},
	} {
		got, err := f.c.GuestAgentCommand(ctx, tc.command)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s = %s, %v; want %s", tc.command, got, err, tc.want)
		}
	}
	// The agent's own error (a command it does not know) is no "not connected".
	if _, err := f.c.GuestAgentCommand(ctx, "guest-get-fsinfo"); err == nil || errors.Is(err, hypervisor.ErrAgentUnavailable) || !strings.Contains(err.Error(), "has not been found") {
		t.Errorf("guest-get-fsinfo unknown to the agent: %v, want the agent's error", err)
	}
	// Commands that change the guest are refused before the agent sees them.
	for _, cmd := range []string{"guest-exec", "guest-file-open", "guest-set-user-password", "guest-shutdown", `guest-ping","arguments":{"x":1}`} {
		if _, err := f.c.GuestAgentCommand(ctx, cmd); !errors.As(err, &le) || le.Code != 400 {
			t.Errorf("%s: %v, want a 400", cmd, err)
		}
	}
	for _, c := range f.h.Calls() {
		if strings.Contains(c, "exec") || strings.Contains(c, "file") {
			t.Errorf("a refused command reached the hypervisor: %s", c)
		}
	}

	// An agent that hangs is reported as not connected when the time is up.
	hang := make(chan struct{})
	defer close(hang)
	f.h.SetGuestAgent("ns_vm1", func(string) (string, error) { <-hang; return "", errors.New("released") })
	begin := time.Now()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := f.l.GuestAgentCommand(short, "guest-ping")
	if !errors.Is(err, hypervisor.ErrAgentUnavailable) || time.Since(begin) > 2*time.Second {
		t.Errorf("a hanging agent: %v after %v, want ErrAgentUnavailable after 100ms", err, time.Since(begin))
	}
}
