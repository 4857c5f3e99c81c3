package dhcp

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// ReadResolvConf reads the name servers and search domains of a resolv.conf
// for a Lease; virt-launcher passes the pod's /etc/resolv.conf so the guest
// resolves names as the pod does.
//
// It reads the file as the C library's resolver does: "nameserver" lines in
// order; "search" and "domain" lines set the search list, the last one
// winning ("domain d" is "search d"); other keywords ("options", "sortlist")
// are ignored, as are text after '#' or ';' and malformed addresses. Only
// IPv4 name servers are returned, since DHCPv4's option 6 carries no others,
// and "." (the root, which systemd-resolved writes for "no search domains")
// is left out of the search list.
func ReadResolvConf(path string) (dns []net.IP, search []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("dhcp: reading resolv.conf: %w", err)
	}
	dns, search = parseResolvConf(string(b))
	return dns, search, nil
}

// parseResolvConf is ReadResolvConf on the file's content.
func parseResolvConf(content string) (dns []net.IP, search []string) {
	for _, line := range strings.Split(content, "\n") {
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if ip := net.ParseIP(fields[1]).To4(); ip != nil {
				dns = append(dns, ip)
			}
		case "search", "domain":
			search = searchDomains(fields[0], fields[1:])
		}
	}
	return dns, search
}

// searchDomains is the search list a "search" or "domain" line sets.
func searchDomains(keyword string, args []string) []string {
	if keyword == "domain" {
		args = args[:1]
	}
	var out []string
	for _, d := range args {
		if d != "." {
			out = append(out, d)
		}
	}
	return out
}
