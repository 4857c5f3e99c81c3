package main

import "testing"

func TestLibvirtEndpoint(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/107")
	for _, tc := range []struct {
		uri, socket string
		session     bool
	}{
		{"qemu:///system", "/run/libvirt/libvirt-sock", false},
		{"qemu+unix:///system?socket=/var/run/libvirt/virtqemud-sock", "/var/run/libvirt/virtqemud-sock", false},
		{"qemu:///session", "/run/user/107/libvirt/libvirt-sock", true},
		{"qemu+unix:///session?socket=/pod/run/libvirt/libvirt-sock", "/pod/run/libvirt/libvirt-sock", true},
		{"qemu+tcp://node1/system", "", false},
		{"test:///default", "", false},
	} {
		socket, session := libvirtEndpoint(tc.uri)
		if socket != tc.socket || session != tc.session {
			t.Errorf("libvirtEndpoint(%q) = %q, %v; want %q, %v", tc.uri, socket, session, tc.socket, tc.session)
		}
	}
}
