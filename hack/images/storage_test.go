package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBusyboxApplets(t *testing.T) {
	list := "usr/bin/[\n/bin/sh\nbin/busybox\nsbin/losetup\n\nbin/sh\nusr/bin/dd\n"
	want := []string{"bin/sh", "sbin/losetup", "usr/bin/[", "usr/bin/dd"}
	if diff := cmp.Diff(want, busyboxApplets(list)); diff != "" {
		t.Errorf("applets (-want +got):\n%s", diff)
	}
}

// TestStorageImageConfig: the provisioner runs as the non-root user from
// its static binary; busybox starts a shell and is tagged :latest too, as
// examples/vm-pvc.yaml names it.
func TestStorageImageConfig(t *testing.T) {
	b := &builder{opts: options{tag: "v9"}}
	lp := spec(t, b, "local-path-provisioner")
	if diff := cmp.Diff([]string{"vmkit/local-path-provisioner:v9"}, lp.refs); diff != "" {
		t.Errorf("local-path-provisioner refs (-want +got):\n%s", diff)
	}
	if lp.config.User != "1001" || !cmp.Equal(lp.config.Entrypoint, []string{"/usr/bin/local-path-provisioner"}) {
		t.Errorf("local-path-provisioner config: %+v", lp.config)
	}
	bb := spec(t, b, "busybox")
	if diff := cmp.Diff([]string{"vmkit/busybox:v9", "vmkit/busybox:latest"}, bb.refs); diff != "" {
		t.Errorf("busybox refs (-want +got):\n%s", diff)
	}
	if !cmp.Equal(bb.config.Cmd, []string{"/bin/sh"}) {
		t.Errorf("busybox config: %+v", bb.config)
	}
}
