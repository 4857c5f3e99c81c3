package network

import (
	"fmt"
	"net"
	"strings"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

// podRecord is what the bridge binding takes away from the pod interface
// and hands to the guest. Setup keeps it as the bridge's alias (ifalias),
// so that a second Setup returns the same lease after eth0 lost it.
type podRecord struct {
	IP      net.IPNet        // the pod's IPv4 address and prefix; IP nil: none (a layer-2 secondary network)
	MAC     net.HardwareAddr // the pod interface's original MAC
	Gateway net.IP           // the default route's gateway; nil: none
	Routes  []dhcp.Route     // the pod interface's other routes
	// IP6 is the pod's first global IPv6 address and prefix (IP nil:
	// none), Gateway6 its IPv6 default route's gateway (nil: none).
	IP6      net.IPNet
	Gateway6 net.IP
}

// recordPrefix marks a bridge alias written by Setup.
const recordPrefix = "vmkit-pod:"

// maxAlias is the longest alias the kernel keeps (IFALIASZ - 1).
const maxAlias = 255

// String encodes r, e.g. "vmkit-pod: ip=10.244.7.5/24 mac=0a:58:0a:f4:07:05
// gw=10.244.7.1 routes=169.254.1.1/32,10.96.0.0/12>10.244.7.254
// ip6=fd00:10:244::5/64 gw6=fd00:10:244::1".
func (r podRecord) String() string {
	var b strings.Builder
	b.WriteString(recordPrefix)
	if r.IP.IP != nil {
		fmt.Fprintf(&b, " ip=%s", r.IP.String())
	}
	fmt.Fprintf(&b, " mac=%s", r.MAC)
	if r.Gateway != nil {
		fmt.Fprintf(&b, " gw=%s", r.Gateway)
	}
	if len(r.Routes) > 0 {
		routes := make([]string, len(r.Routes))
		for i, rt := range r.Routes {
			routes[i] = rt.Dest.String()
			if rt.Gateway != nil {
				routes[i] += ">" + rt.Gateway.String()
			}
		}
		fmt.Fprintf(&b, " routes=%s", strings.Join(routes, ","))
	}
	if r.IP6.IP != nil {
		fmt.Fprintf(&b, " ip6=%s", r.IP6.String())
	}
	if r.Gateway6 != nil {
		fmt.Fprintf(&b, " gw6=%s", r.Gateway6)
	}
	return b.String()
}

// parseRecord decodes what podRecord.String wrote.
func parseRecord(s string) (podRecord, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 || fields[0] != recordPrefix {
		return podRecord{}, fmt.Errorf("alias %q was not written by vmkit", s)
	}
	var r podRecord
	for _, f := range fields[1:] {
		key, value, _ := strings.Cut(f, "=")
		if err := r.set(key, value); err != nil {
			return podRecord{}, fmt.Errorf("alias %q: %s: %w", s, key, err)
		}
	}
	if r.MAC == nil {
		return podRecord{}, fmt.Errorf("alias %q: needs mac", s)
	}
	return r, nil
}

func (r *podRecord) set(key, value string) error {
	var err error
	switch key {
	case "ip":
		var ip net.IP
		var n *net.IPNet
		if ip, n, err = net.ParseCIDR(value); err == nil && ip.To4() != nil {
			r.IP = net.IPNet{IP: ip.To4(), Mask: n.Mask}
		} else if err == nil {
			err = fmt.Errorf("%q is not IPv4", value)
		}
	case "mac":
		r.MAC, err = net.ParseMAC(value)
	case "gw":
		r.Gateway, err = parseIPv4(value)
	case "routes":
		r.Routes, err = parseRoutes(value)
	case "ip6":
		var ip net.IP
		var n *net.IPNet
		if ip, n, err = net.ParseCIDR(value); err == nil && ip.To4() == nil {
			r.IP6 = net.IPNet{IP: ip, Mask: n.Mask}
		} else if err == nil {
			err = fmt.Errorf("%q is not IPv6", value)
		}
	case "gw6":
		if r.Gateway6 = net.ParseIP(value); r.Gateway6 == nil || r.Gateway6.To4() != nil {
			err = fmt.Errorf("%q is not an IPv6 address", value)
		}
	default:
		err = fmt.Errorf("unknown key")
	}
	return err
}

func parseRoutes(s string) ([]dhcp.Route, error) {
	var routes []dhcp.Route
	for _, rt := range strings.Split(s, ",") {
		dest, gw, via := strings.Cut(rt, ">")
		_, n, err := net.ParseCIDR(dest)
		if err != nil || n.IP.To4() == nil {
			return nil, fmt.Errorf("%q is not an IPv4 network", dest)
		}
		route := dhcp.Route{Dest: net.IPNet{IP: n.IP.To4(), Mask: n.Mask}}
		if via {
			if route.Gateway, err = parseIPv4(gw); err != nil {
				return nil, err
			}
		}
		routes = append(routes, route)
	}
	return routes, nil
}

func parseIPv4(s string) (net.IP, error) {
	ip := net.ParseIP(s).To4()
	if ip == nil {
		return nil, fmt.Errorf("%q is not an IPv4 address", s)
	}
	return ip, nil
}
