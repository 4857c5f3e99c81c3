package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vmkit/vmkit/internal/testenv/hostsetup"
)

// stop ends the kubelet, every pod's processes, the containerd shims and
// containerd, then removes the node's mounts and directories. The nodes
// after the first stop before it (Env.stop).
func (n *Node) stop() error {
	if n.kubeProxy != nil {
		n.kubeProxy.stop(stopGrace)
	}
	if n.kubelet != nil {
		n.kubelet.stop(stopGrace)
	}
	if n.Index > 0 {
		return n.stopOther()
	}
	err := errors.Join(hostsetup.KillCgroup(kubepodsCgroup), killShims(n.ContainerdSocket), hostsetup.RemovePodNetwork())
	if n.containerd != nil {
		n.containerd.stop(stopGrace)
	}
	// containerd, cleaning up the tasks whose shims died, starts
	// `containerd-shim-runc-v2 ... delete` processes that outlive it.
	err = errors.Join(err, killShims(n.ContainerdSocket))
	// Block volumes: the kubelet's loop devices and those over files in StorageDir.
	err = errors.Join(err, hostsetup.DetachLoops(func(backing string) bool {
		return hostsetup.Under(backing, hostsetup.Resolve(n.dir)) || hostsetup.Under(backing, hostsetup.Resolve(KubeletRootDir))
	}))
	err = errors.Join(err, hostsetup.UnmountUnder(n.dir), hostsetup.UnmountUnder(KubeletRootDir+"/"), hostsetup.UnmountUnder("/var/run/kubevirt"))
	if n.rootShared {
		err = errors.Join(err, hostsetup.MakeRootPrivate())
	}
	err = errors.Join(err, hostsetup.RemoveCgroup(kubepodsCgroup), hostsetup.RestoreHugePages())
	for _, d := range n.created {
		err = errors.Join(err, os.RemoveAll(d))
	}
	if !slices.Contains(n.created, KubeletRootDir) {
		// Ours (the marker says so) but older than this node: keep the directory, drop its contents.
		err = errors.Join(err, hostsetup.RemoveContents(KubeletRootDir))
	}
	return err
}

// leftovers reports what the stopped nodes left on the host: their
// bridges, host-local allocations, libcni cache files, cgroups, mounts
// (under their directories and the kubelet's), pinned sandbox network
// namespaces, kube-proxy's nftables table, processes of their directories
// (containerd, kubelets, shims) and loop devices over their files.
// Env.stop checks this while it still holds the node lock: the next
// cluster may start the moment it lets go, and its bridge would look like
// ours.
func (e *Env) leftovers() error {
	var left []string
	dirs := []string{hostsetup.Resolve(KubeletRootDir) + "/"}
	for _, n := range e.Nodes {
		if hostsetup.Exists("/sys/class/net/" + n.PodBridge) {
			left = append(left, "bridge "+n.PodBridge)
		}
		if hostsetup.Exists(filepath.Join(hostsetup.HostLocalRoot, n.networkName)) {
			left = append(left, "host-local allocations "+filepath.Join(hostsetup.HostLocalRoot, n.networkName))
		}
		if files := hostsetup.CNICacheFiles(n.networkName); len(files) > 0 {
			left = append(left, "CNI cache files "+strings.Join(files, " "))
		}
		cgroup := kubepodsCgroup
		if n.cgroupRoot != "" {
			cgroup = n.cgroupRoot
		}
		if cg := hostsetup.CgroupDirs(cgroup); len(cg) > 0 {
			left = append(left, "cgroups "+strings.Join(cg, " "))
		}
		dirs = append(dirs, hostsetup.Resolve(n.dir)+"/")
	}
	for _, d := range dirs {
		if mps := hostsetup.MountPoints(d); len(mps) > 0 {
			left = append(left, "mounts "+strings.Join(mps, " "))
		}
	}
	if pinned, _ := filepath.Glob(filepath.Join(hostsetup.SandboxNetnsDir, "cni-*")); len(pinned) > 0 {
		left = append(left, "sandbox network namespaces "+strings.Join(pinned, " "))
	}
	if exec.Command("nft", "list", "table", "ip", hostsetup.KubeProxyNFTTable).Run() == nil {
		left = append(left, "nftables table ip "+hostsetup.KubeProxyNFTTable)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, d := range dirs[1:] {
			if strings.Contains(string(data), d) {
				left = append(left, "process "+filepath.Base(filepath.Dir(p))+" ("+strings.ReplaceAll(strings.TrimRight(string(data), "\x00"), "\x00", " ")+")")
				break
			}
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		data, _ := os.ReadFile(l)
		backing := strings.TrimSpace(string(data))
		for _, d := range dirs[1:] {
			if strings.HasPrefix(backing, d) {
				left = append(left, "loop device "+filepath.Base(filepath.Dir(filepath.Dir(l)))+" over "+backing)
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	return nil
}

// stopOther is stop for a node after the first: its pods, shims and
// containerd go, then the loop devices its kubelet attached (named by their
// path in the node's mount namespace, /var/lib/kubelet/...) and those over
// its storage; the process holding its mount namespace ends, which takes
// every mount of the node with it; its bridge, host-local's allocations,
// cgroup root and directory go last.
func (n *Node) stopOther() error {
	err := errors.Join(hostsetup.KillCgroup(n.cgroupRoot), killShims(n.ContainerdSocket))
	if n.containerd != nil {
		n.containerd.stop(stopGrace)
	}
	err = errors.Join(err, killShims(n.ContainerdSocket)) // the shims' `delete` runs containerd started (stop)
	err = errors.Join(err, hostsetup.DetachLoops(func(backing string) bool {
		return hostsetup.Under(backing, hostsetup.Resolve(n.dir)) || hostsetup.Under(backing, KubeletRootDir)
	}))
	if n.mountNS != nil {
		n.mountNS.stop(stopGrace)
	}
	return errors.Join(err, hostsetup.RemoveBridge(n.PodBridge), os.RemoveAll(filepath.Join(hostsetup.HostLocalRoot, n.networkName)),
		hostsetup.RemoveCNICache(n.networkName), hostsetup.RemoveCgroup(n.cgroupRoot), os.RemoveAll(n.dir))
}

// CleanupNode removes what a node killed before it could stop leaves
// behind: pod processes, containerd shims of testenv's containerd sockets,
// mounts under the kubelet's root directory and the shared bind mounts. It
// must only be called while holding the node lock (a running node would be
// destroyed); startNode calls it.
func CleanupNode() error {
	// The pods of the nodes after the first, in their cgroup roots; the
	// processes holding their mount namespaces died with the process that
	// started them, and the namespaces (and every mount of those nodes)
	// die with the last of their pods and shims.
	var otherNodes []string
	for _, d := range hostsetup.CgroupDirs(nodeCgroupPrefix + "*") {
		otherNodes = append(otherNodes, filepath.Base(d))
	}
	slices.Sort(otherNodes)
	otherNodes = slices.Compact(otherNodes)
	err := hostsetup.KillCgroup(kubepodsCgroup)
	for _, name := range otherNodes {
		err = errors.Join(err, hostsetup.KillCgroup(name))
	}
	err = errors.Join(err, killShims(""), hostsetup.RemovePodNetwork())
	for _, name := range otherNodes {
		err = errors.Join(err, hostsetup.RemoveCgroup(name))
	}
	// Loop devices of a dead node's block volumes: over files in its
	// storage directory, or attached by its kubelet.
	runDirs := filepath.Join(hostsetup.Resolve(os.TempDir()), "vmkit-testenv-")
	err = errors.Join(err, hostsetup.DetachLoops(func(backing string) bool {
		return (strings.HasPrefix(backing, runDirs) && nodeDirPattern.MatchString(backing)) || hostsetup.Under(backing, hostsetup.Resolve(KubeletRootDir))
	}))
	// containerd's sandboxes and root file systems of the dead nodes' run
	// directory, then the nodes' directories (containerd's images, the
	// kubelet's directories of the nodes after the first: gigabytes). Their
	// control plane's files are left to the OS's temp cleanup. Only a
	// cluster holding the node lock has node directories, so every one
	// found is a dead cluster's.
	for _, mp := range hostsetup.MountPoints(runDirs) {
		if nodeDirPattern.MatchString(mp) {
			err = errors.Join(err, hostsetup.Unmount(mp))
		}
	}
	deadNodes, _ := filepath.Glob(runDirs + "*/node")
	others, _ := filepath.Glob(runDirs + "*/node-[0-9]*")
	for _, dir := range append(deadNodes, others...) {
		err = errors.Join(err, os.RemoveAll(dir))
	}
	if _, serr := os.Stat(filepath.Join(KubeletRootDir, nodeMarker)); serr != nil {
		return err // the kubelet's directory is clean
	}
	err = errors.Join(err, hostsetup.UnmountUnder(KubeletRootDir+"/"), hostsetup.UnmountUnder("/var/run/kubevirt"))

	if _, serr := os.Stat(filepath.Join(KubeletRootDir, rootSharedMarker)); serr == nil {
		err = errors.Join(err, hostsetup.MakeRootPrivate())
	}
	err = errors.Join(err, hostsetup.RemoveCgroup(kubepodsCgroup), hostsetup.RestoreHugePages(), hostsetup.RemoveContents(KubeletRootDir))
	return err
}

// nodeDirPattern finds a node's directory in a path of its run directory:
// /node/ for the first, /node-2/ and on for the others.
var nodeDirPattern = regexp.MustCompile(`/node(-[0-9]+)?/`)

// killShims SIGKILLs the containerd-shim-runc-v2 processes serving the
// containerd at socket, or, with an empty socket, any testenv containerd.
func killShims(socket string) error {
	var killed []string // their /proc/<pid>/cmdline
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "containerd-shim-runc-v2" {
			continue
		}
		i := slices.Index(args, "-address")
		if i < 0 || i+1 >= len(args) {
			continue
		}
		addr := args[i+1]
		ours := addr == socket || (socket == "" && strings.Contains(addr, "/vmkit-testenv-") && strings.HasSuffix(addr, "/"+containerdSock))
		if !ours {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, p)
		}
	}
	// Until they are gone (a zombie's cmdline is empty), for at most 2 s.
	for deadline := time.Now().Add(2 * time.Second); len(killed) > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		killed = slices.DeleteFunc(killed, func(p string) bool {
			data, err := os.ReadFile(p)
			return err != nil || len(data) == 0
		})
	}
	return nil
}
