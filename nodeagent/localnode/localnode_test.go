package localnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// fakeLauncher writes a script that records its arguments and runs until
// SIGTERM, or exits with the code in <dir>/exit once that file exists.
func fakeLauncher(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "virt-launcher")
	script := `#!/bin/sh
echo "$@" > ` + dir + `/args
trap 'exit 0' TERM
while [ ! -f ` + dir + `/exit ]; do sleep 0.05; done
exit "$(cat ` + dir + `/exit)"
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// guestDir is a guest directory with the given files, the required ones
// when none are given.
func guestDir(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	if len(files) == 0 {
		files = guestFiles
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func launcherPod(ns, name, vmiUID string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "0123456789-pod",
			Labels: map[string]string{v1.AppLabel: v1.VirtLauncherValue, v1.CreatedByLabel: vmiUID}},
		Spec: corev1.PodSpec{NodeName: "node01", Containers: []corev1.Container{{
			Name:    "compute",
			Command: []string{"/usr/bin/virt-launcher-monitor", "--qemu-timeout", "240s", "--name", "tiny", "--uid", vmiUID, "--namespace", ns},
			Args:    []string{"--kubevirt-share-dir", "/var/run/kubevirt", "--ephemeral-disk-dir", "/var/run/kubevirt-ephemeral-disks", "--container-disk-dir", "/var/run/kubevirt/container-disks"},
		}}},
	}
}

// TestPodLifecycle plays a launcher pod through its life: started with the
// pod's arguments and mapped directories, Running and ready, Failed with the
// exit code, the VMI's domain removed; a deleted pod's launcher gets
// SIGTERM and the pod is deleted.
func TestPodLifecycle(t *testing.T) {
	work := t.TempDir()
	kube := fake.NewClientset(launcherPod("ns1", "virt-launcher-tiny-abcde", "vmi-uid-1"))
	hv := hvfake.New()
	n, err := Start(context.Background(), Options{
		Kube: kube, NodeName: "node01", LauncherBinary: fakeLauncher(t, work), LibvirtURI: "qemu:///system",
		GuestDir: guestDir(t, Kernel, IdleInitramfs, AgentInitramfs), BaseDir: filepath.Join(work, "base"), Domains: hv, Interval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	pods := kube.CoreV1().Pods("ns1")
	waitPod := func(what string, cond func(*corev1.Pod, error) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			return cond(pods.Get(ctx, "virt-launcher-tiny-abcde", metav1.GetOptions{})), nil
		}); err != nil {
			t.Fatalf("pod: waiting for %s: %v", what, err)
		}
	}
	waitPod("Running", func(p *corev1.Pod, err error) bool {
		return err == nil && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
	})
	var args []byte
	_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		args, err = os.ReadFile(filepath.Join(work, "args"))
		return err == nil && len(args) > 0, nil
	})
	podDir := filepath.Join(work, "base", "pods", "01234567")
	want := strings.Join([]string{"--qemu-timeout 240s --name tiny --uid vmi-uid-1 --namespace ns1",
		"--kubevirt-share-dir", n.ShareDir(), "--ephemeral-disk-dir", podDir + "/eph", "--container-disk-dir", podDir + "/cd",
		"--private-dir", podDir + "/priv", "--libvirt-uri qemu:///system"}, " ")
	if diff := cmp.Diff(want, strings.TrimSpace(string(args))); diff != "" {
		t.Errorf("launcher arguments (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{Kernel, IdleInitramfs, AgentInitramfs}, n.GuestFiles()); diff != "" {
		t.Errorf("GuestFiles (-want +got):\n%s", diff)
	}
	for _, f := range n.GuestFiles() {
		if _, err := os.Stat(filepath.Join(podDir, "cd", "vmi-uid-1", "kernel-boot", f)); err != nil {
			t.Errorf("kernel-boot file: %v", err)
		}
	}
	l := n.Launcher("vmi-uid-1")
	if l == nil || l.Exited() {
		t.Fatalf("Launcher(vmi-uid-1) = %+v, want a running process", l)
	}

	// The VMI's domain outlives the launcher in a node's libvirt: the
	// local node removes it when the launcher exits.
	if _, err := hv.Define(context.Background(), `<domain type="qemu"><name>ns1_tiny</name><uuid>8a9d2c1e-0e8f-4d7c-a6b5-4e3f2a1b0c9d</uuid><metadata><vmi xmlns="https://github.com/vmkit/vmkit/domainxml/v1"><namespace>ns1</namespace><name>tiny</name><uid>vmi-uid-1</uid></vmi></metadata></domain>`); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "exit"), []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitPod("Failed", func(p *corev1.Pod, err error) bool {
		return err == nil && p.Status.Phase == corev1.PodFailed && p.Status.ContainerStatuses[0].State.Terminated != nil &&
			p.Status.ContainerStatuses[0].State.Terminated.ExitCode == 3
	})
	if doms, _ := hv.List(context.Background(), "vmi-uid-1"); len(doms) != 0 {
		t.Errorf("domains of the exited launcher's VMI: %+v, want none", doms)
	}
	if code := l.ExitCode(); code != 3 {
		t.Errorf("ExitCode() = %d, want 3", code)
	}
}

func TestDeletedPodIsTerminated(t *testing.T) {
	work := t.TempDir()
	pod := launcherPod("ns1", "virt-launcher-tiny-abcde", "vmi-uid-2")
	pod.Spec.NodeName = ""
	kube := fake.NewClientset(pod)
	n, err := Start(context.Background(), Options{
		Kube: kube, NodeName: "node01", LauncherBinary: fakeLauncher(t, work),
		GuestDir: guestDir(t), BaseDir: filepath.Join(work, "base"), Domains: hvfake.New(), Interval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Stop() }()
	// The fake clientset does not implement binding: bind as the API server would.
	time.Sleep(50 * time.Millisecond)
	pod.Spec.NodeName = "node01"
	if _, err := kube.CoreV1().Pods("ns1").Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var l *Launcher
	_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		l = n.Launcher("vmi-uid-2")
		return l != nil, nil
	})
	if l == nil {
		t.Fatal("no launcher started for the bound pod")
	}
	// A pod being deleted: the fake tracker deletes at once, so mark it
	// with a deletion timestamp instead, as the API server does.
	now := metav1.Now()
	got, _ := kube.CoreV1().Pods("ns1").Get(context.Background(), pod.Name, metav1.GetOptions{})
	got.DeletionTimestamp = &now
	if _, err := kube.CoreV1().Pods("ns1").Update(context.Background(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("launcher still running after its pod was marked for deletion")
	}
	if code := l.ExitCode(); code != 0 {
		t.Errorf("launcher exit code %d after SIGTERM, want 0", code)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Pods("ns1").Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("pod not deleted after its launcher exited: %v", err)
	}
}

func TestStartChecksOptions(t *testing.T) {
	_, err := Start(context.Background(), Options{Kube: fake.NewClientset(), NodeName: "n", LauncherBinary: "/nonexistent/virt-launcher", GuestDir: guestDir(t)})
	if err == nil || !strings.Contains(err.Error(), "go build") {
		t.Errorf("Start with a missing launcher: %v, want an error saying how to build it", err)
	}
	_, err = Start(context.Background(), Options{Kube: fake.NewClientset(), NodeName: "n", LauncherBinary: "/bin/sh", GuestDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make-guest.sh") {
		t.Errorf("Start without the guest: %v, want an error saying how to build it", err)
	}
}

// The guest agent's initramfs is offered when the guest directory has it;
// a guest directory without it (built before make-guest.sh made it) works
// as before.
func TestAgentInitramfsIsOptional(t *testing.T) {
	for _, tc := range []struct {
		files []string
		want  []string
	}{
		{[]string{Kernel, IdleInitramfs}, []string{Kernel, IdleInitramfs}},
		{[]string{Kernel, IdleInitramfs, AgentInitramfs}, []string{Kernel, IdleInitramfs, AgentInitramfs}},
	} {
		n, err := Start(context.Background(), Options{Kube: fake.NewClientset(), NodeName: "n", LauncherBinary: "/bin/sh",
			GuestDir: guestDir(t, tc.files...), BaseDir: t.TempDir(), Domains: hvfake.New()})
		if err != nil {
			t.Fatalf("Start with %v: %v", tc.files, err)
		}
		if diff := cmp.Diff(tc.want, n.GuestFiles()); diff != "" {
			t.Errorf("guest directory with %v: GuestFiles (-want +got):\n%s", tc.files, diff)
		}
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	}
	if _, err := Start(context.Background(), Options{Kube: fake.NewClientset(), NodeName: "n", LauncherBinary: "/bin/sh",
		GuestDir: guestDir(t, Kernel, AgentInitramfs)}); err == nil || !strings.Contains(err.Error(), IdleInitramfs) {
		t.Errorf("Start without %s: %v, want an error naming it", IdleInitramfs, err)
	}
}
