package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// libvirtEndpoint returns the UNIX socket of the libvirt daemon uri names
// and whether that daemon runs in session mode (a non-root launcher's
// qemu:///session): a migration's source libvirt connects to this socket
// through the node agents' proxy, with a qemu+unix:///system or
// qemu+unix:///session URI to match. Only local QEMU URIs have one; for
// others it returns "" (the launcher then cannot be a migration target).
func libvirtEndpoint(uri string) (socket string, session bool) {
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "qemu" && u.Scheme != "qemu+unix") || u.Host != "" {
		return "", false
	}
	session = u.Path == "/session"
	if s := u.Query().Get("socket"); s != "" {
		return s, session
	}
	if !session {
		return "/run/libvirt/libvirt-sock", false
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" || !strings.HasPrefix(dir, "/") {
		dir = filepath.Join("/run/user", strconv.Itoa(os.Getuid()))
	}
	return filepath.Join(dir, "libvirt", "libvirt-sock"), true
}
