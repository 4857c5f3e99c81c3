// Command container-disk serves a container disk image to the launcher of
// its pod. It runs inside the disk image's container, whose root
// filesystem holds the disk (KubeVirt's layout: /disk/<image file>) or, for
// a kernel-boot image, the kernel and initrd (e.g. /boot/vmlinux).
// podtemplate renders two containers per image, both running
// /usr/bin/container-disk, a static binary copied out of the launcher
// image:
//
//	container-disk --no-op
//
// exits at once: the init container only makes the kubelet pull the image
// before the launcher starts.
//
//	container-disk --copy-path <container-disk-dir>/<vmi uid>/<served name> --copy-only
//
// copies as below and exits 0: a Guaranteed pod's init container, which
// podtemplate gives the compute container's CPU (a Guaranteed pod's
// sidecar gets KubeVirt's 10m, a hundredth of a CPU, under which the copy
// of a kernel took 10 s); the sidecar then finds the copy in place.
//
//	container-disk --copy-path <container-disk-dir>/<vmi uid>/<served name>
//
// copies /disk and /boot (those that exist) into the copy path, keeping
// their relative paths (<copy path>/disk/..., <copy path>/boot/...), then
// stays alive until SIGTERM or SIGINT, or until the copy path is removed
// (the launcher removes it when its guest has ended, so that the pod
// completes after a shutdown or a migration away), and exits 0. The launcher
// (nodeagent/launcher) looks for the image there. The copy is
// containerdisk/sidecar's Serve: atomic (made in a hidden sibling, renamed
// when complete), hard links where it can, else copies keeping the holes of
// sparse images, and an existing copy path (served by an earlier run of the
// container: the pod's volume outlives it) kept. It exits non-zero, naming
// the paths, when the image has neither directory or no file in them.
//
// --root (default /) is the root filesystem to serve from, for tests.
// Symbolic links are followed, resolved against the real root.
//
// It uses the standard library only and builds with CGO_ENABLED=0: disk
// images have no libc.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vmkit/vmkit/containerdisk/sidecar"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: it returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fset := flag.NewFlagSet("container-disk", flag.ContinueOnError)
	fset.SetOutput(stderr)
	noOp := fset.Bool("no-op", false, "exit at once (the init container only makes the kubelet pull the image)")
	copyPath := fset.String("copy-path", "", "where to serve the image's /disk and /boot: <copy-path>/disk/..., <copy-path>/boot/...")
	copyOnly := fset.Bool("copy-only", false, "with --copy-path: copy, then exit 0 instead of serving (an init container)")
	root := fset.String("root", "/", "root filesystem to serve from (for tests)")
	if err := fset.Parse(args); err != nil {
		return 2
	}
	switch {
	case fset.NArg() > 0:
		fmt.Fprintf(stderr, "container-disk: unexpected arguments %q\n", fset.Args())
		return 2
	case *noOp:
		return 0
	case *copyPath == "":
		fmt.Fprintln(stderr, "container-disk: --copy-path or --no-op is required")
		return 2
	}
	done := make(chan error, 1)
	go func() { done <- sidecar.Serve(*root, *copyPath, sidecar.Options{}) }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(stderr, "container-disk: %v\n", err)
			return 1
		}
	case <-ctx.Done():
		return 0 // stopped while copying; the next run removes the partial copy
	}
	if *copyOnly {
		fmt.Fprintf(stderr, "container-disk: copied %s to %s\n", *root, *copyPath)
		return 0
	}
	fmt.Fprintf(stderr, "container-disk: serving %s at %s\n", *root, *copyPath)
	// The launcher removes the copy once its guest has ended (shut down or
	// migrated away): then nothing is served any more, and the container
	// exits so that the pod can complete, as KubeVirt's container disks do
	// when their socket is gone.
	if sidecar.WaitRemoved(ctx, *copyPath, gonePoll) {
		fmt.Fprintf(stderr, "container-disk: %s was removed: the launcher is done with it\n", *copyPath)
	}
	return 0
}

// gonePoll is how often a serving container-disk checks that its copy is
// still there.
const gonePoll = time.Second
