package hostsetup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// AttachLoop attaches the file to a free loop device and returns the
// device's path (/dev/loopN): a block device of the node, for local block
// volumes. Devices over files under a node's run directory are detached
// when the node stops (or by the next node's start after a crash).
func AttachLoop(file string) (string, error) {
	f, err := os.OpenFile(file, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("attaching %s to a loop device: %w", file, err)
	}
	defer ctl.Close()
	for range 10 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("attaching %s: no free loop device: %w", file, err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		l, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", fmt.Errorf("attaching %s: %w", file, err)
		}
		err = unix.IoctlSetInt(int(l.Fd()), unix.LOOP_SET_FD, int(f.Fd()))
		l.Close()
		switch {
		case err == nil:
			return dev, nil
		case errors.Is(err, unix.EBUSY): // another process took it first
			continue
		default:
			return "", fmt.Errorf("attaching %s to %s: %w", file, dev, err)
		}
	}
	return "", fmt.Errorf("attaching %s: every free loop device was taken before this process could use it", file)
}

// DetachLoops detaches the loop devices whose backing file (the path the
// kernel recorded) match accepts, devices the kubelet attached (below its
// root directory) first, as they may hold the others open. A device still
// open is detached by the kernel when its last user closes it.
func DetachLoops(match func(backing string) bool) error {
	devs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var kubelet, others []string
	for _, p := range devs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // detached meanwhile
		}
		backing := strings.TrimSuffix(strings.TrimSpace(string(data)), " (deleted)")
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(p)))
		switch {
		case !match(backing):
		case Under(backing, Resolve(KubeletRootDir)):
			kubelet = append(kubelet, dev)
		default:
			others = append(others, dev)
		}
	}
	var errs []error
	for _, dev := range append(kubelet, others...) {
		errs = append(errs, detachLoop(dev))
	}
	return errors.Join(errs...)
}

// detachLoop detaches one loop device.
func detachLoop(dev string) error {
	l, err := os.OpenFile(dev, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("detaching %s: %w", dev, err)
	}
	defer l.Close()
	if err := unix.IoctlSetInt(int(l.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detaching %s: %w", dev, err)
	}
	return nil
}

// Under reports whether path is dir or below it.
func Under(path, dir string) bool {
	dir = strings.TrimSuffix(dir, "/")
	return path == dir || strings.HasPrefix(path, dir+"/")
}
