package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// tpmProbed is the guest kernel's line for a TPM 2.0 its tpm_tis driver
// found, e.g. "tpm_tis tpm_tis: 2.0 TPM (device-id 0x1, rev-id 1)".
var tpmProbed = regexp.MustCompile(`tpm_tis \S+: 2\.0 TPM \(device-id`)

// TestTPM: a VM with tpm: {} runs in the stock launcher image (swtpm from
// Debian), its guest's kernel finds a TPM 2.0, and libvirt's swtpm runs as
// the launcher's non-root user and ends with the VM.
func TestTPM(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-tpm", v1.RunStrategyAlways)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.TPM = &v1.TPMDevice{}
	// Not quiet (the driver's line is informational); tpm_tis.force=1: the
	// tiny guest's vmlinux boots through QEMU's PVH entry, where a machine
	// with a TPM gets garbled ACPI tables, so the driver probes the TIS
	// address itself.
	spec.Domain.Firmware.KernelBoot.KernelArgs = strings.Replace(spec.Domain.Firmware.KernelBoot.KernelArgs, " quiet", "", 1) + " tpm_tis.force=1"
	began := time.Now()
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	lines, err := c.Console(ctx, "default", vm.Name, guestMarker)
	if err != nil {
		t.Fatalf("%v (console so far: %q)\n%s", err, lines, framework.ComponentLogs(c))
	}
	found := ""
	for _, l := range lines {
		if tpmProbed.MatchString(l) {
			found = strings.TrimSpace(l)
		}
	}
	if found == "" {
		t.Fatalf("the guest's kernel found no TPM 2.0 (no line matching %s); console:\n%s", tpmProbed, strings.Join(lines, "\n"))
	}
	t.Logf("VM create → %s on the console %v; guest: %s", guestMarker, time.Since(began).Round(time.Millisecond), found)

	pids := swtpmPIDs(t, "default_"+vm.Name)
	if len(pids) != 1 {
		t.Fatalf("%d swtpm processes for default_%s, want 1", len(pids), vm.Name)
	}
	pod := launcherPod(t, c, vmi)
	want := int64(107) // KubeVirt's non-root launcher user
	if sc := pod.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		want = *sc.RunAsUser
	}
	if u := procUser(t, pids[0]); int64(u) != want {
		t.Errorf("swtpm runs as uid %d, want the launcher's %d", u, want)
	}

	setRunStrategy(t, c, vm.Name, v1.RunStrategyHalted)
	waitNoVMI(t, c, vm.Name)
	suite.WaitFor(t, "swtpm of "+vm.Name+" gone", time.Minute, func() (bool, string) {
		left := swtpmPIDs(t, "default_"+vm.Name)
		return len(left) == 0, "swtpm PIDs " + pidsString(left)
	})
}

// swtpmPIDs are the swtpm processes of domain (namespace_name): libvirt
// names the domain in the paths it gives swtpm.
func swtpmPIDs(t testing.TB, domain string) []int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if filepath.Base(args[0]) != "swtpm" || !strings.Contains(string(data), domain+"-swtpm") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		pids = append(pids, pid)
	}
	return pids
}

func pidsString(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// rsaEncryption is the DER of the rsaEncryption algorithm's OID, which
// starts the public key of an RSA certificate (the TPM's endorsement key
// certificate, which swtpm_setup writes into the TPM's NV memory).
var rsaEncryption = []byte{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01}

// rsaKeys returns the RSA public keys (the 300 bytes after each
// rsaEncryption OID) held in a TPM state file.
func rsaKeys(t testing.TB, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for i := bytes.Index(b, rsaEncryption); i >= 0 && i+len(rsaEncryption)+300 <= len(b); {
		start := i + len(rsaEncryption)
		keys[string(b[start:start+300])] = true
		j := bytes.Index(b[start:], rsaEncryption)
		if j < 0 {
			break
		}
		i = start + j
	}
	return keys
}

// TestPersistentTPM: a VM with tpm: {persistent: true} (the test cluster
// turns the VMPersistentState feature gate on) gets its backend-storage
// claim persistent-state-for-<vm> from the default StorageClass, owned by
// the VM; libvirt keeps the TPM's state on it under the VM's firmware UUID;
// after a stop and a start (a new VMI and launcher pod) the TPM is the same
// one: its endorsement key, made once by swtpm_setup at the first start,
// is still in its state.
func TestPersistentTPM(t *testing.T) {
	c := suite.Need(t)
	vm := tinyVM(t, "vm-tpm-persist", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.Devices.TPM = &v1.TPMDevice{Persistent: v1.BoolPtr(true)}
	framework.CreateVM(t, c, vm)
	first := framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)
	pod := launcherPod(t, c, first)

	name := v1.BackendStorageClaimName(vm.Name)
	claim, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("backend-storage claim: %v", err)
	}
	owner := metav1.GetControllerOf(claim)
	if owner == nil || owner.Kind != "VirtualMachine" || owner.Name != vm.Name ||
		claim.Spec.Resources.Requests.Storage().Cmp(resource.MustParse("10Mi")) != 0 {
		t.Errorf("claim %s: owner %+v, request %v; want the VM, 10Mi", name, owner, claim.Spec.Resources.Requests.Storage())
	}
	mounted := false
	for _, v := range pod.Spec.Volumes {
		mounted = mounted || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name)
	}
	if !mounted {
		t.Errorf("launcher pod %s does not mount claim %s", pod.Name, name)
	}
	suite.WaitFor(t, "claim "+name+" bound", time.Minute, func() (bool, string) {
		claim, err = c.Kube.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return claim.Status.Phase == corev1.ClaimBound, string(claim.Status.Phase)
	})
	pv, err := c.Kube.CoreV1().PersistentVolumes().Get(t.Context(), claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil {
		t.Fatalf("volume of claim %s: %v (hostPath %v)", name, err, pv.Spec.HostPath)
	}
	state := filepath.Join(pv.Spec.HostPath.Path, "swtpm", string(first.Spec.Domain.Firmware.UUID), "tpm2", "tpm2-00.permall")
	suite.WaitFor(t, "TPM state "+state, time.Minute, func() (bool, string) {
		_, err := os.Stat(state)
		return err == nil, fmt.Sprint(err)
	})
	before := rsaKeys(t, state)
	if len(before) == 0 {
		t.Fatalf("no RSA key (the endorsement key's certificate) in the TPM state %s", state)
	}

	setRunStrategy(t, c, vm.Name, v1.RunStrategyHalted)
	waitNoVMI(t, c, vm.Name)
	suite.WaitFor(t, "launcher pod "+pod.Name+" gone", 2*time.Minute, func() (bool, string) {
		_, err := c.Kube.CoreV1().Pods("default").Get(t.Context(), pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("the TPM state is gone with the VMI: %v", err)
	}
	setRunStrategy(t, c, vm.Name, v1.RunStrategyAlways)
	second := framework.WaitVMI(t, c, vm.Name, "Running again", func(vmi *v1.VirtualMachineInstance) bool { return vmi.UID != first.UID && running(vmi) })
	console(t, c, vm.Name)
	after := rsaKeys(t, state)
	kept := 0
	for k := range before {
		if after[k] {
			kept++
		}
	}
	if kept != len(before) {
		t.Errorf("VMI %s's TPM has %d of the %d RSA keys VMI %s's had in %s: the TPM was made anew", second.UID, kept, len(before), first.UID, state)
	} else {
		t.Logf("VMIs %s → %s: the TPM state on claim %s kept its %d endorsement key(s)", first.UID, second.UID, name, kept)
	}
}
