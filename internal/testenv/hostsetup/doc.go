// Package hostsetup changes and restores the host state that testenv's
// nodes need, and finds what a node left behind: the machine-wide node
// lock, the shared root mount, mounts under a directory, loop devices,
// cgroups, the 2 MiB huge page pool, the pod networks' bridges, CNI cache
// and kube-proxy's nftables table. It knows nothing of the control plane
// or of a node's processes (package testenv runs those); its functions act
// on the host directly and need root.
package hostsetup
