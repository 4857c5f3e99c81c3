package nodeagent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/vmkit/vmkit/podtemplate"
)

// DefaultSeccompDir is the kubelet's directory of Localhost seccomp
// profiles.
const DefaultSeccompDir = "/var/lib/kubelet/seccomp"

// passtSandboxSyscalls are what passt, unprivileged, uses to sandbox itself
// before it serves the guest: a user namespace of its own, and in it new
// mount, IPC and UTS namespaces, an empty root it pivots into. The runtime's
// default profile allows them only with CAP_SYS_ADMIN, which no launcher
// has, so under it passt fails with "Couldn't create user namespace".
var passtSandboxSyscalls = []string{"unshare", "mount", "umount2", "pivot_root"}

// passtProfile is the container runtime's default profile (moby's, which
// containerd's matches) plus passtSandboxSyscalls, as KubeVirt's own
// profile is the default plus userfaultfd.
func passtProfile() *seccomp.Seccomp {
	p := seccomp.DefaultProfile()
	p.Syscalls = append(p.Syscalls, &seccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{Names: passtSandboxSyscalls, Action: specs.ActAllow},
		Comment:      "vmkit: passt's own sandbox (a user namespace, and mount namespaces in it)",
	})
	return p
}

// InstallSeccompProfiles writes the launcher pods' Localhost seccomp
// profiles under dir (the kubelet's seccomp directory), only when their
// content changed, so a pod the kubelet is starting never reads half a
// file. The kubelet refuses to start a pod whose Localhost profile is
// missing.
func InstallSeccompProfiles(dir string) error {
	b, err := json.MarshalIndent(passtProfile(), "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, podtemplate.PasstSeccompProfile)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("installing seccomp profile %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("installing seccomp profile %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("installing seccomp profile %s: %w", path, err)
	}
	return nil
}
