// Package guestagent converts what the QEMU guest agent answers, through a
// launcher's GuestAgentCommand, into KubeVirt's types, within bounds: the
// guest writes those answers. The node agent's status poll
// (status.guestOSInfo, status.interfaces) and its REST API
// (nodeagent/restapi: guestosinfo, userlist, filesystemlist) share it.
package guestagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"unicode/utf8"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// InfoSource marks interfaces in status.interfaces that the guest agent
// reported, as KubeVirt does.
const InfoSource = "guest-agent"

// Bounds on what a guest agent's answers put in the VMI's status
// (status.interfaces, status.guestOSInfo). The guest writes those answers
// (up to launcher.MaxGuestAgentAnswerBytes each): kept whole, they could
// push the VMI towards etcd's object size limit, past which every write of
// its status fails (review N13).
const (
	// MaxInterfaces is how many interfaces are kept besides those
	// matching an interface of the VMI's spec, which are always kept.
	MaxInterfaces = 32
	// MaxIPs is how many addresses are kept per interface.
	MaxIPs = 16
	// MaxString bounds a name, in bytes; MaxMAC a hardware address (an
	// InfiniBand one takes 59).
	MaxString = 256
	MaxMAC    = 64
)

// Unavailable reports whether err says that the guest agent does not
// answer, or that the domain is not in a state to ask it.
func Unavailable(err error) bool {
	var le *client.Error
	return errors.Is(err, hypervisor.ErrAgentUnavailable) || (errors.As(err, &le) && le.Code == 409)
}

// OSInfo converts guest-get-osinfo's return value.
func OSInfo(raw json.RawMessage) (v1.VirtualMachineInstanceGuestOSInfo, error) {
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
	c := func(s string) string { return truncate(s, MaxString) }
	return v1.VirtualMachineInstanceGuestOSInfo{
		Name: c(r.Name), KernelRelease: c(r.KernelRelease), Version: c(r.Version), PrettyName: c(r.PrettyName),
		VersionID: c(r.VersionID), KernelVersion: c(r.KernelVersion), Machine: c(r.Machine), ID: c(r.ID),
	}, nil
}

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

// Interfaces converts guest-network-get-interfaces' return value to
// status interfaces: one per guest interface except the loopback, named
// after the spec interface with the same MAC address when there is one,
// with the addresses the guest holds (IPv6 link-local ones left out) and
// the first of them as the primary address. It keeps, in the guest's
// order, every interface matching the spec and at most MaxInterfaces
// others, at most MaxIPs addresses of each, and names and MACs cut to
// MaxString and MaxMAC bytes.
func Interfaces(raw json.RawMessage, spec []v1.Interface) ([]v1.VirtualMachineInstanceNetworkInterface, error) {
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
			InterfaceName: truncate(gi.Name, MaxString), MAC: truncate(gi.HardwareAdr, MaxMAC), InfoSource: InfoSource,
		}
		for _, s := range spec {
			if s.MacAddress != "" && strings.EqualFold(s.MacAddress, gi.HardwareAdr) {
				iface.Name = s.Name
			}
		}
		if iface.Name == "" {
			if others == MaxInterfaces {
				continue
			}
			others++
		}
		for _, a := range gi.IPAddresses {
			if len(iface.IPs) == MaxIPs {
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

// Users converts guest-get-users' return value.
func Users(raw json.RawMessage) ([]v1.VirtualMachineInstanceGuestOSUser, error) {
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

// FileSystems converts guest-get-fsinfo's return value.
func FileSystems(raw json.RawMessage) ([]v1.VirtualMachineInstanceFileSystem, error) {
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
