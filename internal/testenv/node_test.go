package testenv

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNode runs a real kubelet and containerd, runs a pod on them and checks
// that stopping the node leaves no pod process, shim or mount behind.
func TestNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kubelet and containerd")
	}
	pause := os.Getenv("VMKIT_PAUSE_IMAGE")
	if pause == "" {
		root, err := ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		pause = root + "/_output/images/pause.tar"
	}
	if _, err := os.Stat(pause); err != nil {
		t.Fatalf("the pause image is missing (%v): build it with `hack/build-images.sh` (run by `make test-deps`)", err)
	}
	env := Start(t, Options{WithControllerManager: true, WithScheduler: true, Node: &NodeOptions{Images: []string{pause}}})
	ctx := t.Context()
	// Only host-network pods run: the node's CNI configuration gives pods
	// loopback only, and a sandbox without an address does not start.
	for _, hostNetwork := range []bool{true} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "pause-", Namespace: "default"},
			Spec: corev1.PodSpec{
				HostNetwork:                   hostNetwork,
				TerminationGracePeriodSeconds: new(int64),
				Containers: []corev1.Container{{
					Name: "pause", Image: pauseImage, ImagePullPolicy: corev1.PullNever,
				}},
			},
		}
		if err := waitServiceAccount(t, env); err != nil {
			t.Fatal(err)
		}
		created, err := env.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := env.Kube.CoreV1().Pods("default").Get(ctx, created.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase == corev1.PodRunning {
				t.Logf("hostNetwork=%v: pod %s Running on %s (pod IP %q)", hostNetwork, got.Name, got.Spec.NodeName, got.Status.PodIP)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("hostNetwork=%v: pod %s not Running after 60s: %+v", hostNetwork, got.Name, got.Status)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := mountPoints(KubeletRootDir); len(left) > 0 {
		t.Errorf("mounts left under %s: %v", KubeletRootDir, left)
	}
	if left := mountPoints(env.Dir); len(left) > 0 {
		t.Errorf("mounts left under %s: %v", env.Dir, left)
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmdline, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if strings.Contains(string(cmdline), env.Dir) {
			t.Errorf("process %s left: %s", p.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}

// waitServiceAccount waits for the default ServiceAccount the controller
// manager creates, without which pods are rejected.
func waitServiceAccount(t *testing.T, env *Env) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := env.Kube.CoreV1().ServiceAccounts("default").Get(t.Context(), "default", metav1.GetOptions{})
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
