package nodeagent

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/internal/guestagent"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The QEMU guest agent. While a VMI runs, the agent asks its launcher every
// Config.AgentPollInterval (10 s, KubeVirt's interval for the agent's
// user list) whether the guest agent answers (guest-ping) and, when it
// does, for the guest's OS (guest-get-osinfo) and network interfaces
// (guest-network-get-interfaces); until the guest agent first answers, every
// PollInterval during the VMI's first two minutes of Running, so
// AgentConnected appears soon after the guest agent starts. The polls run
// beside the sync loop, never in it: sync reads the last result.

// InfoSourceGuestAgent marks interfaces in status.interfaces that the guest
// agent reported, as KubeVirt does.
const InfoSourceGuestAgent = guestagent.InfoSource

// fastAgentPollWindow is how long after the VMI started running the agent
// polls a guest agent that has not answered yet every PollInterval.
const fastAgentPollWindow = 2 * time.Minute

// guestAgentInfo is what the last poll learned about a VMI's guest agent.
type guestAgentInfo struct {
	// connected: the guest agent answered guest-ping.
	connected bool
	// os is the guest's OS as guest-get-osinfo reported it (zero when the
	// agent never reported it).
	os v1.VirtualMachineInstanceGuestOSInfo
	// interfaces are the guest's interfaces with their addresses; nil when
	// the agent never reported them.
	interfaces []v1.VirtualMachineInstanceNetworkInterface
}

// agentPoll is the poll state of one VMI's guest agent.
type agentPoll struct {
	info    *guestAgentInfo // nil until a poll ended
	next    time.Time       // when the next poll is due
	running bool            // a poll is under way
}

// guestAgent returns what the last poll of the VMI's guest agent found (nil
// before the first poll ended) and, when poll is true and a poll is due,
// starts one in the background; its result enqueues the VMI when it
// changed something.
func (a *Agent) guestAgent(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, c *client.Client, poll bool) *guestAgentInfo {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.agentPolls[vmi.UID]
	if !ok {
		p = &agentPoll{}
		a.agentPolls[vmi.UID] = p
	}
	info := p.info
	if !poll || p.running || now.Before(p.next) {
		return info
	}
	p.running = true
	interval := a.cfg.AgentPollInterval
	if (info == nil || !info.connected) && now.Sub(runningSince(vmi, now)) < fastAgentPollWindow {
		interval = a.cfg.PollInterval
	}
	specIfaces := vmi.Spec.Domain.Devices.Interfaces
	go func() {
		got := pollGuestAgent(ctx, c, specIfaces, info)
		a.mu.Lock()
		if cur, ok := a.agentPolls[vmi.UID]; ok && cur == p {
			p.running = false
			p.next = a.now().Add(interval)
			if got != nil {
				p.info = got
			}
		}
		a.mu.Unlock()
		if got != nil && (info == nil || !equalAgentInfo(*info, *got)) {
			klog.FromContext(ctx).V(2).Info("guest agent", "vmi", key, "connected", got.connected)
			a.queue.Add(key)
		}
	}()
	return info
}

// forgetGuestAgent drops the poll state of a VMI whose launcher is gone.
func (a *Agent) forgetGuestAgent(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.agentPolls, uid)
}

func equalAgentInfo(x, y guestAgentInfo) bool {
	return x.connected == y.connected && x.os == y.os && equality.Semantic.DeepEqual(x.interfaces, y.interfaces)
}

// runningSince is when the VMI entered Running, now when it did not record it.
func runningSince(vmi *v1.VirtualMachineInstance, now time.Time) time.Time {
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == v1.Running {
			return t.PhaseTransitionTimestamp.Time
		}
	}
	return now
}

// pollGuestAgent asks the launcher whether the guest agent answers and,
// if it does, for the guest's OS and interfaces; what a command could not
// tell is kept from prev. It returns nil when the launcher could not be
// asked (gone, timed out): that says nothing about the guest agent.
func pollGuestAgent(ctx context.Context, c *client.Client, spec []v1.Interface, prev *guestAgentInfo) *guestAgentInfo {
	var info guestAgentInfo
	if prev != nil {
		info = *prev
	}
	ctx, cancel := context.WithTimeout(ctx, 3*client.DefaultGuestAgentTimeout)
	defer cancel()
	if _, err := c.GuestAgentCommand(ctx, "guest-ping"); err != nil {
		if guestagent.Unavailable(err) {
			info.connected = false
			return &info
		}
		klog.FromContext(ctx).V(3).Info("guest agent poll failed", "error", err)
		return nil
	}
	info.connected = true
	if raw, err := c.GuestAgentCommand(ctx, "guest-get-osinfo"); err == nil {
		if os, err := guestagent.OSInfo(raw); err == nil {
			info.os = os
		}
	}
	if raw, err := c.GuestAgentCommand(ctx, "guest-network-get-interfaces"); err == nil {
		if ifaces, err := guestagent.Interfaces(raw, spec); err == nil {
			info.interfaces = ifaces
		}
	}
	return &info
}
