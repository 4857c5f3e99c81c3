// Package netnames holds how a VMI's networks are named inside its launcher
// pod, so that the pod template (which asks Multus for the interfaces), the
// domain (which attaches the guest's NICs to taps) and the node agent (which
// wires them) agree.
//
// The names are KubeVirt's: the pod network is eth0; a secondary (Multus)
// network's pod interface is "pod" and the first 11 hex digits of the
// SHA-256 of the network's name, 11 so that the bridge "k6t-<hash>" still
// fits Linux's 15 characters. The tap of the N-th Multus network in
// spec.networks order is "tap<N>", the pod network's "tap0".
package netnames

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

const (
	// PodNetworkInterface is the pod network's device in the launcher pod.
	PodNetworkInterface = "eth0"
	secondaryPrefix     = "pod"
	secondaryHashLen    = 11
)

// SecondaryInterface is the pod interface Multus creates for the secondary
// network of the given name (spec.networks[].name).
func SecondaryInterface(network string) string {
	sum := sha256.Sum256([]byte(network))
	return secondaryPrefix + hex.EncodeToString(sum[:])[:secondaryHashLen]
}

// Bridge is the in-pod bridge the bridge binding puts a pod interface and
// its tap on: "k6t-eth0" for eth0, "k6t-<hash>" for "pod<hash>".
func Bridge(podInterface string) string {
	return "k6t-" + strings.TrimPrefix(podInterface, secondaryPrefix)
}

// Tap is the tap device of the pod network (ordinal 0) or of the
// ordinal-th Multus network (from 1, in spec.networks order).
func Tap(ordinal int) string {
	return "tap" + strconv.Itoa(ordinal)
}
