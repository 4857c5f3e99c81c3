package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// tpmProbed is the line the guest kernel's tpm_tis driver prints when it
// finds a TPM 2.0, e.g. "tpm_tis 00:05: 2.0 TPM (device-id 0x1, rev-id 1)".
var tpmProbed = regexp.MustCompile(`tpm_tis \S+: 2\.0 TPM \(device-id`)

// TestNonRootLauncherTPM runs the real virt-launcher as an unprivileged
// user, as the default launcher pod does, with a VMI asking for a TPM
// (tpm: {}): its libvirt session must set up the TPM's state with
// swtpm_setup and run swtpm as the launcher's user, and the guest kernel
// must find a TPM 2.0.
func TestNonRootLauncherTPM(t *testing.T) {
	requireSwtpm(t)
	nl := startNonRootLauncher(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	lines := nl.boot(ctx, t, func(vmi *v1.VirtualMachineInstance) {
		vmi.Spec.Domain.Devices.TPM = &v1.TPMDevice{}
		// Not quiet: the TPM driver's message is informational. The
		// tiny guest's vmlinux boots through QEMU's PVH entry, where
		// the ACPI tables of a machine with a TPM come out garbled
		// (the kernel then finds no TPM2 table and no MSFT0101
		// device), so the driver probes the TIS address itself.
		vmi.Spec.Domain.Firmware.KernelBoot.KernelArgs = "console=ttyS0 panic=-1 tpm_tis.force=1"
	})
	found := ""
	for _, l := range lines {
		if tpmProbed.MatchString(l) {
			found = strings.TrimSpace(l)
		}
	}
	if found == "" {
		t.Errorf("the guest kernel found no TPM 2.0 (no line matching %s); its console:\n%s", tpmProbed, strings.Join(lines, "\n"))
	} else {
		t.Logf("guest: %s", found)
	}

	// libvirt's session keeps the TPM's state in the launcher's private
	// directory (XDG_CONFIG_HOME), an emptyDir of the pod: it goes with it.
	states, err := filepath.Glob(filepath.Join(nl.dirs["p"], "libvirt", "qemu", "swtpm", "*", "tpm2", "tpm2-00.permall"))
	if err != nil || len(states) != 1 {
		t.Errorf("TPM state files under the private directory: %v, %v; want one", states, err)
	}
	// swtpm_setup's certificate authority, which signed the TPM's EK
	// certificate, is the session's own too (KubeVirt's non-root path).
	if _, err := os.Stat(filepath.Join(nl.dirs["p"], "var", "lib", "swtpm-localca", "issuercert.pem")); err != nil {
		t.Errorf("no local CA under the private directory: %v", err)
	}

	swtpms := swtpmPIDs(t, nl.ns)
	if len(swtpms) != 1 {
		t.Fatalf("%d swtpm processes for domain %s_tiny, want 1", len(swtpms), nl.ns)
	}
	if u := procUID(t, swtpms[0]); u != nobody {
		t.Errorf("swtpm runs as uid %d, want the launcher's %d", u, nobody)
	}

	nl.shutdown(ctx, t)
	if left := swtpmPIDs(t, nl.ns); len(left) != 0 {
		t.Errorf("swtpm processes %v left after the launcher exited", left)
	}
}

// requireSwtpm fails the test unless swtpm and swtpm_setup, which libvirt
// runs for a TPM, are installed.
func requireSwtpm(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"swtpm", "swtpm_setup"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found: install the Debian packages swtpm and swtpm-tools with hack/setup-libvirt.sh", bin)
		}
	}
}

// swtpmPIDs are the swtpm processes libvirt started for the domain
// <ns>_tiny (their command line names its state or socket path).
func swtpmPIDs(t *testing.T, ns string) []int {
	return pidsOf(t, func(args []string, cmdline string) bool {
		return filepath.Base(args[0]) == "swtpm" && strings.Contains(cmdline, ns+"_tiny")
	})
}
