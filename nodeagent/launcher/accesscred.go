package launcher

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/accesscred"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// DefaultAccessCredentialInterval is how often the launcher reads the
// Secrets of guest-agent access credentials unless
// Config.AccessCredentialInterval says otherwise.
const DefaultAccessCredentialInterval = accesscred.DefaultInterval

// syncAccessCredentials keeps the guest-agent credentials of vmi in the
// guest while the domain runs (package accesscred), recording the outcome
// for Status.
func (l *Launcher) syncAccessCredentials(ctx context.Context, vmi *v1.VirtualMachineInstance) {
	s := accesscred.Syncer{
		PrivateDir: l.cfg.PrivateDir,
		Interval:   l.cfg.AccessCredentialInterval,
		Agent:      credentialAgent{l},
		Report:     l.setAccessCredentials,
	}
	s.Run(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("vmi", l.key())), vmi, l.done)
}

// setAccessCredentials records the outcome for Status.
func (l *Launcher) setAccessCredentials(ok bool, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.accessCreds = &client.AccessCredentialsStatus{Succeeded: ok, Message: msg}
}

// credentialAgent is the domain's guest agent, as access credentials use it.
type credentialAgent struct{ l *Launcher }

func (a credentialAgent) Ping(ctx context.Context) error {
	_, err := a.l.agentCommand(ctx, "guest-ping", a.l.agentTimeout())
	return err
}

func (a credentialAgent) Call(ctx context.Context, command string, args any) error {
	return a.l.agentCall(ctx, command, args)
}
