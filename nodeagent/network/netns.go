package network

import (
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// SameNamespace reports whether nsPath (e.g. /proc/<pid>/ns/net) is the
// caller's own network namespace. The agent refuses to wire a launcher that
// shares the node's namespace (host network): Setup would rewire the node.
func SameNamespace(nsPath string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(nsPath, &st); err != nil {
		return false, fmt.Errorf("reading network namespace %s: %w", nsPath, err)
	}
	return isOwnNamespace(&st)
}

// isOwnNamespace reports whether st is the calling thread's network
// namespace. The thread, not the process: the goroutine is pinned so that
// the namespace read is the one this code runs in.
func isOwnNamespace(st *unix.Stat_t) (bool, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var self unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &self); err != nil {
		return false, fmt.Errorf("reading own network namespace: %w", err)
	}
	return self.Dev == st.Dev && self.Ino == st.Ino, nil
}

// inNamespace runs f on a dedicated OS thread switched into ns, for what has
// no namespace-aware API: creating a tap (/dev/net/tun binds to the opener's
// namespace) and writing net sysctls. If the thread cannot return to its
// namespace it is left locked, so the runtime ends it with its goroutine.
func inNamespace(ns netns.NsHandle, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("reading own network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering network namespace: %w", err)
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("leaving network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// tapFlags are KubeVirt's: a tap without packet information, with virtio-net
// headers (createTap adds IFF_MULTI_QUEUE on request).
const tapFlags = unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR

// createTap makes a persistent tap named name, owned by uid:gid, in the
// calling thread's network namespace.
func createTap(name string, multiQueue bool, uid, gid int) error {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening /dev/net/tun: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	flags := uint16(tapFlags)
	if multiQueue {
		flags |= unix.IFF_MULTI_QUEUE
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("TUNSETIFF: %w", err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETOWNER, uid); err != nil {
		return fmt.Errorf("TUNSETOWNER %d: %w", uid, err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETGROUP, gid); err != nil {
		return fmt.Errorf("TUNSETGROUP %d: %w", gid, err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
		return fmt.Errorf("TUNSETPERSIST: %w", err)
	}
	return nil
}

// setSysctl writes value to the sysctl key (as net.ipv4.ip_forward, with
// slashes: net/ipv4/ip_forward) of the calling thread's network namespace.
func setSysctl(key, value string) error {
	p := path.Join("/proc/sys", key)
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("setting %s: %w", p, err)
	}
	return nil
}
