package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher"
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
const InfoSourceGuestAgent = "guest-agent"

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
func (a *Agent) guestAgent(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, c *launcher.Client, poll bool) *guestAgentInfo {
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
func pollGuestAgent(ctx context.Context, c *launcher.Client, spec []v1.Interface, prev *guestAgentInfo) *guestAgentInfo {
	var info guestAgentInfo
	if prev != nil {
		info = *prev
	}
	ctx, cancel := context.WithTimeout(ctx, 3*launcher.DefaultGuestAgentTimeout)
	defer cancel()
	if _, err := c.GuestAgentCommand(ctx, "guest-ping"); err != nil {
		if agentUnavailable(err) {
			info.connected = false
			return &info
		}
		klog.FromContext(ctx).V(3).Info("guest agent poll failed", "error", err)
		return nil
	}
	info.connected = true
	if raw, err := c.GuestAgentCommand(ctx, "guest-get-osinfo"); err == nil {
		if os, err := guestOSInfo(raw); err == nil {
			info.os = os
		}
	}
	if raw, err := c.GuestAgentCommand(ctx, "guest-network-get-interfaces"); err == nil {
		if ifaces, err := guestInterfaces(raw, spec); err == nil {
			info.interfaces = ifaces
		}
	}
	return &info
}

// agentUnavailable reports whether err says that the guest agent does not
// answer, or that the domain is not in a state to ask it.
func agentUnavailable(err error) bool {
	var le *launcher.Error
	return errors.Is(err, hypervisor.ErrAgentUnavailable) || (errors.As(err, &le) && le.Code == 409)
}

// agentConnected reports whether the VMI's AgentConnected condition is True.
func agentConnected(vmi *v1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceAgentConnected {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// guestOSInfo converts guest-get-osinfo's return value.
func guestOSInfo(raw json.RawMessage) (v1.VirtualMachineInstanceGuestOSInfo, error) {
	var r struct {
		Name          string `json:"name"`
		KernelRelease string `json:"kernel-release"`
		Version       string `json:"version"`
		PrettyName    string `json:"pretty-name"`
		VersionID     string `json:"version-id"`
		KernelVersion string `json:"kernel-version"`
		Machine       string `json:"machine"`
		ID            string `json:"id"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return v1.VirtualMachineInstanceGuestOSInfo{}, fmt.Errorf("guest-get-osinfo: %w", err)
	}
	c := func(s string) string { return truncate(s, maxGuestString) }
	return v1.VirtualMachineInstanceGuestOSInfo{
		Name: c(r.Name), KernelRelease: c(r.KernelRelease), Version: c(r.Version), PrettyName: c(r.PrettyName),
		VersionID: c(r.VersionID), KernelVersion: c(r.KernelVersion), Machine: c(r.Machine), ID: c(r.ID),
	}, nil
}

// Bounds on what a guest agent's answers put in the VMI's status
// (status.interfaces, status.guestOSInfo). The guest writes those answers
// (up to launcher.MaxGuestAgentAnswerBytes each): kept whole, they could
// push the VMI towards etcd's object size limit, past which every write of
// its status fails (review N13).
const (
	// maxGuestInterfaces is how many interfaces are kept besides those
	// matching an interface of the VMI's spec, which are always kept.
	maxGuestInterfaces = 32
	// maxGuestIPs is how many addresses are kept per interface.
	maxGuestIPs = 16
	// maxGuestString bounds a name, in bytes; maxGuestMAC a hardware
	// address (an InfiniBand one takes 59).
	maxGuestString = 256
	maxGuestMAC    = 64
)

// truncate cuts s to at most n bytes, at a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// guestInterfaces converts guest-network-get-interfaces' return value to
// status interfaces: one per guest interface except the loopback, named
// after the spec interface with the same MAC address when there is one,
// with the addresses the guest holds (IPv6 link-local ones left out) and
// the first of them as the primary address. It keeps, in the guest's
// order, every interface matching the spec and at most maxGuestInterfaces
// others, at most maxGuestIPs addresses of each, and names and MACs cut to
// maxGuestString and maxGuestMAC bytes.
func guestInterfaces(raw json.RawMessage, spec []v1.Interface) ([]v1.VirtualMachineInstanceNetworkInterface, error) {
	var r []struct {
		Name        string `json:"name"`
		HardwareAdr string `json:"hardware-address"`
		IPAddresses []struct {
			Address string `json:"ip-address"`
		} `json:"ip-addresses"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("guest-network-get-interfaces: %w", err)
	}
	out := []v1.VirtualMachineInstanceNetworkInterface{}
	others := 0
	for _, gi := range r {
		if gi.Name == "lo" {
			continue
		}
		iface := v1.VirtualMachineInstanceNetworkInterface{
			InterfaceName: truncate(gi.Name, maxGuestString), MAC: truncate(gi.HardwareAdr, maxGuestMAC), InfoSource: InfoSourceGuestAgent,
		}
		for _, s := range spec {
			if s.MacAddress != "" && strings.EqualFold(s.MacAddress, gi.HardwareAdr) {
				iface.Name = s.Name
			}
		}
		if iface.Name == "" {
			if others == maxGuestInterfaces {
				continue
			}
			others++
		}
		for _, a := range gi.IPAddresses {
			if len(iface.IPs) == maxGuestIPs {
				break
			}
			// A parsed address's text is short: at most 45 bytes.
			if ip := net.ParseIP(a.Address); ip == nil || ip.IsLinkLocalUnicast() {
				continue
			}
			iface.IPs = append(iface.IPs, a.Address)
		}
		if len(iface.IPs) > 0 {
			iface.IP = iface.IPs[0]
		}
		out = append(out, iface)
	}
	return out, nil
}

// guestAgentQuery runs the guest agent commands behind the REST API's
// guestosinfo. A command the guest agent does not know leaves its part
// empty; a guest agent that stops answering fails the whole.
func guestAgentQuery(ctx context.Context, c *launcher.Client) (v1.VirtualMachineInstanceGuestAgentInfo, error) {
	var out v1.VirtualMachineInstanceGuestAgentInfo
	run := func(command string, parse func(json.RawMessage) error) error {
		raw, err := c.GuestAgentCommand(ctx, command)
		switch {
		case agentUnavailable(err):
			return err
		case err != nil:
			return nil // the guest agent does not support it
		}
		if err := parse(raw); err != nil {
			return fmt.Errorf("%s: %w", command, err)
		}
		return nil
	}
	steps := []struct {
		command string
		parse   func(json.RawMessage) error
	}{
		{"guest-info", func(raw json.RawMessage) error {
			var r struct {
				Version  string `json:"version"`
				Commands []struct {
					Name    string `json:"name"`
					Enabled bool   `json:"enabled"`
				} `json:"supported_commands"`
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			out.GAVersion = r.Version
			for _, c := range r.Commands {
				out.SupportedCommands = append(out.SupportedCommands, v1.GuestAgentCommandInfo{Name: c.Name, Enabled: c.Enabled})
			}
			return nil
		}},
		{"guest-get-host-name", func(raw json.RawMessage) error {
			var r struct {
				HostName string `json:"host-name"`
			}
			err := json.Unmarshal(raw, &r)
			out.Hostname = r.HostName
			return err
		}},
		{"guest-get-osinfo", func(raw json.RawMessage) error {
			var err error
			out.OS, err = guestOSInfo(raw)
			return err
		}},
		{"guest-get-timezone", func(raw json.RawMessage) error {
			var r struct {
				Zone   string `json:"zone"`
				Offset int    `json:"offset"`
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			out.Timezone = fmt.Sprintf("%s, %d", r.Zone, r.Offset)
			return nil
		}},
		{"guest-get-users", func(raw json.RawMessage) error {
			var err error
			out.UserList, err = guestUsers(raw)
			return err
		}},
		{"guest-get-fsinfo", func(raw json.RawMessage) error {
			var err error
			out.FSInfo.Filesystems, err = guestFileSystems(raw)
			return err
		}},
		{"guest-fsfreeze-status", func(raw json.RawMessage) error {
			// "frozen" or "thawed"
			return json.Unmarshal(raw, &out.FSFreezeStatus)
		}},
	}
	for _, s := range steps {
		if err := run(s.command, s.parse); err != nil {
			return v1.VirtualMachineInstanceGuestAgentInfo{}, err
		}
	}
	return out, nil
}

// guestUsers converts guest-get-users' return value.
func guestUsers(raw json.RawMessage) ([]v1.VirtualMachineInstanceGuestOSUser, error) {
	var r []struct {
		User      string  `json:"user"`
		Domain    string  `json:"domain"`
		LoginTime float64 `json:"login-time"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("guest-get-users: %w", err)
	}
	out := make([]v1.VirtualMachineInstanceGuestOSUser, 0, len(r))
	for _, u := range r {
		out = append(out, v1.VirtualMachineInstanceGuestOSUser{UserName: u.User, Domain: u.Domain, LoginTime: u.LoginTime})
	}
	return out, nil
}

// guestFileSystems converts guest-get-fsinfo's return value.
func guestFileSystems(raw json.RawMessage) ([]v1.VirtualMachineInstanceFileSystem, error) {
	var r []struct {
		Name       string `json:"name"`
		MountPoint string `json:"mountpoint"`
		Type       string `json:"type"`
		UsedBytes  int    `json:"used-bytes"`
		TotalBytes int    `json:"total-bytes"`
		Disk       []struct {
			Serial  string `json:"serial"`
			BusType string `json:"bus-type"`
		} `json:"disk"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("guest-get-fsinfo: %w", err)
	}
	out := make([]v1.VirtualMachineInstanceFileSystem, 0, len(r))
	for _, fs := range r {
		f := v1.VirtualMachineInstanceFileSystem{
			DiskName: fs.Name, MountPoint: fs.MountPoint, FileSystemType: fs.Type,
			UsedBytes: fs.UsedBytes, TotalBytes: fs.TotalBytes,
		}
		for _, d := range fs.Disk {
			f.Disk = append(f.Disk, v1.VirtualMachineInstanceFileSystemDisk{Serial: d.Serial, BusType: d.BusType})
		}
		out = append(out, f)
	}
	return out, nil
}
