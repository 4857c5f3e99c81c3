package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/internal/registry"
	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmctl"
)

// pushDisk runs `vmctl containerdisk push FILE IMAGE` as a user does and
// returns the reference by digest it prints.
func pushDisk(t *testing.T, file, image string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := vmctl.NewCommand(vmctl.Options{Name: "vmctl", Streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}})
	cmd.SetArgs([]string{"containerdisk", "push", file, image})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("vmctl containerdisk push %s %s: %v\n%s", file, image, err, errOut.String())
	}
	ref := strings.TrimSpace(out.String())
	if !strings.Contains(ref, "@sha256:") {
		t.Fatalf("vmctl containerdisk push printed %q, want IMAGE@sha256:...\n%s", ref, errOut.String())
	}
	return ref
}

// guestDisk is the tiny guest's BIOS-bootable disk (hack/make-guest.sh).
func guestDisk(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("VMKIT_GUEST_DIR")
	if dir == "" {
		root, err := testenv.ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "_output", "guest")
	}
	disk := filepath.Join(dir, "disk.img")
	if _, err := os.Stat(disk); err != nil {
		t.Fatalf("the tiny guest's disk is missing (%v): make it with `hack/make-guest.sh` (run by `make test-deps`)", err)
	}
	return disk
}

// TestQuickStartVM: KubeVirt's quick-start VM (examples/vm-quickstart.yaml;
// its container disk quay.io/kubevirt/cirros-container-disk-demo has no tag,
// so the kubelet pulls :latest every time) boots once a bootable disk is
// pushed under that name to the cluster's registry, which the nodes use for
// quay.io. Only its memory is raised, for the tiny guest.
func TestQuickStartVM(t *testing.T) {
	c := suite.Need(t)
	pushDisk(t, guestDisk(t), registry.DefaultAddr+"/kubevirt/cirros-container-disk-demo:latest")
	vm := framework.ExampleVM(t, "vm-quickstart.yaml", "testvm", v1.RunStrategyAlways)
	// KubeVirt's 64M fit CirrOS; the tiny guest's Debian kernel and
	// initramfs do not load in it (SYSLINUX: "Booting kernel failed").
	vm.Spec.Template.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running", running)
	pod := launcherPod(t, c, vmi)
	pulled := false
	for _, ctr := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if ctr.Image == "quay.io/kubevirt/cirros-container-disk-demo" {
			pulled = true
			if ctr.ImagePullPolicy != "Always" {
				t.Errorf("container %s pulls %s with policy %s, want Always (an untagged image is :latest)", ctr.Name, ctr.Image, ctr.ImagePullPolicy)
			}
		}
	}
	if !pulled {
		t.Errorf("launcher pod %s has no container of image quay.io/kubevirt/cirros-container-disk-demo", pod.Name)
	}
	console(t, c, vm.Name)
	suite.WaitFor(t, "VM testvm Ready", 2*time.Minute, func() (bool, string) {
		got, err := c.Client.KubevirtV1().VirtualMachines("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.Ready && got.Status.PrintableStatus == v1.VirtualMachineStatusRunning, fmt.Sprintf("ready %v, %s", got.Status.Ready, got.Status.PrintableStatus)
	})
}

// TestOwnDiskBoots: a user's own qcow2 file, pushed with `vmctl
// containerdisk push` and referenced by the digest it printed, boots.
func TestOwnDiskBoots(t *testing.T) {
	c := suite.Need(t)
	qcow2 := filepath.Join(t.TempDir(), "my-disk.qcow2")
	if out, err := exec.CommandContext(t.Context(), "qemu-img", "convert", "-O", "qcow2", guestDisk(t), qcow2).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s (qemu-img is in Debian's qemu-utils, installed by hack/setup-libvirt.sh)", err, out)
	}
	ref := pushDisk(t, qcow2, registry.DefaultAddr+"/users/my-disk:v1")
	vm := framework.ExampleVM(t, "vm-disk.yaml", "vm-own-disk", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Volumes[0].ContainerDisk.Image = ref
	framework.CreateVM(t, c, vm)
	framework.WaitVMI(t, c, vm.Name, "Running", running)
	console(t, c, vm.Name)
}
