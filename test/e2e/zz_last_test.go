package e2e

// The tests that change the installation itself run last: go test runs the
// files in name order, and this file's name sorts after every other.

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestStartTimes holds every start the suite made to its kind's budget
// (issue #41): a VMI that took more than framework.StartBudgetFactor times
// its kind's measured p95 from created to Ready fails it. It runs before
// the tests that replace or remove the installation, after every other.
func TestStartTimes(t *testing.T) {
	suite.Need(t)
	if starts == nil {
		t.Fatal("TestMain recorded no starts (framework.WatchStarts)")
	}
	got := starts.Stop()
	if len(got) == 0 {
		t.Fatal("no VMI start was recorded: the suite's VMIs carry no start timeline")
	}
	framework.CheckStarts(t, "e2e", got)
}

// TestUpgrade: release N was installed from the registry (the cluster
// publishes it there and applies its manifests); release N+1 is pushed to the
// same registry (each component's image of N with one more layer, so a new
// digest, as a new build has). A KubeVirt CR naming a tag that does not
// exist reports Degraded with the image it cannot pull; naming N+1 rolls
// virt-controller, virt-api and virt-handler to it, and the running guest is
// untouched (same VMI, same QEMU), its console answering through the new
// node agent.
func TestUpgrade(t *testing.T) {
	c := suite.Need(t)
	const tag = "upgrade"
	for _, img := range []string{v1.VirtControllerValue, v1.VirtAPIValue, v1.VirtHandlerValue, v1.VirtLauncherValue} {
		pushNextRelease(t, c.Release.Ref(img), c.Release.Registry+"/"+img+":"+tag)
	}
	vm := tinyVM(t, "vm-upgrade", v1.RunStrategyAlways)
	framework.CreateVM(t, c, vm)
	before := framework.WaitVMI(t, c, vm.Name, "Running", running)
	pid := qemuPID(t, "default", vm.Name)
	handlerPods := func() []corev1.Pod {
		pods, err := c.Kube.CoreV1().Pods(cluster.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: v1.AppLabel + "=" + v1.VirtHandlerValue})
		if err != nil {
			t.Fatal(err)
		}
		return pods.Items
	}
	oldHandler := handlerPods()[0].UID
	setTag := func(tag string) {
		patch := fmt.Sprintf(`{"spec":{"imageTag":%q}}`, tag)
		if _, err := c.Client.KubevirtV1().KubeVirts(cluster.Namespace).Patch(t.Context(), cluster.KubeVirtName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A tag nobody pushed: the CR says which image cannot be pulled.
	const missing = "no-such-release"
	setTag(missing)
	suite.WaitFor(t, "KubeVirt Degraded naming an image of "+missing, 3*time.Minute, func() (bool, string) {
		kv, err := c.Client.KubevirtV1().KubeVirts(cluster.Namespace).Get(t.Context(), cluster.KubeVirtName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range kv.Status.Conditions {
			if cond.Type == v1.KubeVirtConditionDegraded {
				return cond.Status == corev1.ConditionTrue && cond.Reason == "ImagePullFailed" &&
					strings.Contains(cond.Message, c.Release.Registry+"/virt-") && strings.Contains(cond.Message, ":"+missing), cond.Reason + ": " + cond.Message
			}
		}
		return false, "no Degraded condition"
	})

	setTag(tag)
	suite.WaitFor(t, "KubeVirt at "+tag+" and Available", 4*time.Minute, func() (bool, string) {
		kv, err := c.Client.KubevirtV1().KubeVirts(cluster.Namespace).Get(t.Context(), cluster.KubeVirtName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		available := false
		for _, cond := range kv.Status.Conditions {
			if cond.Type == v1.KubeVirtConditionAvailable && cond.Status == corev1.ConditionTrue {
				available = true
			}
		}
		return kv.Status.ObservedKubeVirtVersion == tag && available, fmt.Sprintf("observed %s, available %v", kv.Status.ObservedKubeVirtVersion, available)
	})
	for _, name := range []string{v1.VirtControllerValue, v1.VirtAPIValue} {
		d, err := c.Kube.AppsV1().Deployments(cluster.Namespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+tag) {
			t.Errorf("Deployment %s runs %s after the upgrade", name, img)
		}
	}
	pods := handlerPods()
	if len(pods) != 1 || pods[0].UID == oldHandler || !strings.HasSuffix(pods[0].Spec.Containers[0].Image, ":"+tag) {
		t.Fatalf("virt-handler did not roll: %d pods, first %s", len(pods), pods[0].Spec.Containers[0].Image)
	}
	after, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(t.Context(), vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID || after.Status.Phase != v1.Running {
		t.Fatalf("guest disturbed by the upgrade: VMI %s %s, was %s", after.UID, after.Status.Phase, before.UID)
	}
	if now := qemuPID(t, "default", vm.Name); now != pid {
		t.Fatalf("QEMU restarted by the upgrade: pid %d, was %d", now, pid)
	}
	console(t, c, vm.Name)
}

// pushNextRelease pushes the image src (by digest, for this machine's
// architecture) with one more layer, /etc/vmkit-release naming dst, as dst:
// a new build of the same component.
func pushNextRelease(t *testing.T, src, dst string) {
	t.Helper()
	s, err := name.ParseReference(src, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	d, err := name.ParseReference(dst, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(s, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("reading %s: %v", src, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	content := []byte(dst + "\n")
	_ = tw.WriteHeader(&tar.Header{Name: "etc/vmkit-release", Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(content)
	_ = tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	next, err := mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(d, next, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("pushing %s: %v", dst, err)
	}
}

// TestUninstall: deleting the KubeVirt CR removes everything the operator
// installed. It runs last.
func TestUninstall(t *testing.T) {
	c := suite.Need(t)
	if err := c.Client.KubevirtV1().KubeVirts(cluster.Namespace).Delete(t.Context(), cluster.KubeVirtName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	defer func() {
		t.Logf("KubeVirt CR deleted → everything gone in %v", time.Since(deleted).Round(100*time.Millisecond))
	}()
	suite.WaitFor(t, "KubeVirt CR gone", 3*time.Minute, func() (bool, string) {
		kv, err := c.Client.KubevirtV1().KubeVirts(cluster.Namespace).Get(t.Context(), cluster.KubeVirtName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		msg := "phase " + string(kv.Status.Phase)
		for _, cond := range kv.Status.Conditions {
			if cond.Status == "False" && cond.Message != "" {
				msg += fmt.Sprintf("; %s: %s", cond.Type, cond.Message)
			}
		}
		return false, msg
	})
	suite.WaitFor(t, "components gone", 2*time.Minute, func() (bool, string) {
		var left []string
		deps, _ := c.Kube.AppsV1().Deployments(cluster.Namespace).List(t.Context(), metav1.ListOptions{})
		for _, d := range deps.Items {
			if d.Name != v1.VirtOperatorValue {
				left = append(left, "Deployment "+d.Name)
			}
		}
		dss, _ := c.Kube.AppsV1().DaemonSets(cluster.Namespace).List(t.Context(), metav1.ListOptions{})
		for _, d := range dss.Items {
			left = append(left, "DaemonSet "+d.Name)
		}
		pods, _ := c.Kube.CoreV1().Pods(cluster.Namespace).List(t.Context(), metav1.ListOptions{})
		for _, p := range pods.Items {
			if p.Labels[v1.AppLabel] != v1.VirtOperatorValue {
				left = append(left, "Pod "+p.Name)
			}
		}
		crds, _ := c.Env.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().List(t.Context(), metav1.ListOptions{})
		for _, crd := range crds.Items {
			if crd.Spec.Group == v1.GroupName && crd.Name != "kubevirts.kubevirt.io" {
				left = append(left, "CRD "+crd.Name)
			}
		}
		secrets, _ := c.Kube.CoreV1().Secrets(cluster.Namespace).List(t.Context(), metav1.ListOptions{})
		for _, s := range secrets.Items {
			left = append(left, "Secret "+s.Name)
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
}

// logTimeline logs when each step of a VM's start happened, relative to
// the VM's creation: the VMI's phases, the pod's conditions and containers.
