package testenv

import (
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// freePorts returns n distinct loopback ports that were free a moment ago.
// All listeners stay open until every port is picked, so none repeats. The
// ports are below the kernel's ephemeral range (net.ipv4.ip_local_port_range),
// which outgoing connections take their local ports from: a port picked there
// can be taken by any connection on the machine before etcd or kube-apiserver
// binds it (seen when test packages run side by side).
func freePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	low, high := portRange()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("pick a free port: none free of 1000 tried in [%d, %d)", low, high)
		}
		port := low + mathrand.IntN(high-low)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken
		}
		listeners = append(listeners, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// FreePort is a loopback port for a server a test starts, picked as the
// control plane's ports are (see freePorts). It fails the test if none is
// free.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

// portRange is where freePorts picks: the 10,000 ports below the ephemeral
// range, and below the default NodePort range (30000-32767), which tests
// with a node use.
func portRange() (low, high int) {
	high = 30000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > 11024 {
				high = min(high, lo)
			}
		}
	}
	return high - 10000, high
}
