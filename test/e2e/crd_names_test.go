package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/testenv"
)

// TestKubeVirtDocumentedCommands runs the kubectl commands of KubeVirt's
// quick start and user guide against vmkit installed by its operator, with
// the real kubectl: waiting for the KubeVirt CR, reading its phase and
// version, turning on emulation with `kubectl -n kubevirt patch kubevirt
// kubevirt --type=merge` (which answered "you must specify only one
// resource" while vmkit's CRDs had a category kubevirt), editing it, and
// the quick-start VM through its short names. `kubectl get kubevirt` lists
// the KubeVirt CR alone, no kubevirt.io kind is in a category kubevirt, and
// every namespaced one is in all, as KubeVirt's CRDs
// (pkg/virt-operator/resource/generate/components/crds.go).
func TestKubeVirtDocumentedCommands(t *testing.T) {
	c := suite.Need(t)
	kubectl := kubectlFor(t, c)
	const ns = "e2e-kubectl"
	if _, err := c.Kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})

	kubectl.run(t, "kubevirt.kubevirt.io/kubevirt condition met", "-n", cluster.Namespace, "wait", "kv", cluster.KubeVirtName, "--for", "condition=Available", "--timeout=5m")
	kubectl.run(t, "Deployed", "get", "kubevirt.kubevirt.io/kubevirt", "-n", cluster.Namespace, "-o=jsonpath={.status.phase}")
	if v := kubectl.run(t, "", "get", "kubevirt.kubevirt.io/kubevirt", "-n", cluster.Namespace, "-o=jsonpath={.status.observedKubeVirtVersion}"); v == "" {
		t.Error("the KubeVirt CR has no status.observedKubeVirtVersion, which KubeVirt's quick start reads for virtctl's version")
	}
	// The cluster runs with emulation already: the patch changes nothing,
	// but must find the one KubeVirt CR.
	kubectl.run(t, "kubevirt.kubevirt.io/kubevirt patched", "-n", cluster.Namespace, "patch", "kubevirt", cluster.KubeVirtName,
		"--type=merge", "--patch", `{"spec":{"configuration":{"developerConfiguration":{"useEmulation":true}}}}`)
	// kubectl edit as KubeVirt's feature-gate guide runs it, with an
	// editor that changes nothing.
	kubectl.run(t, "Edit cancelled, no changes made", "edit", "kubevirt", cluster.KubeVirtName, "-n", cluster.Namespace)

	manifest := filepath.Join(t.TempDir(), "vm.yaml")
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	quickStart, err := os.ReadFile(filepath.Join(root, "examples", "vm-quickstart.yaml")) // KubeVirt's, unchanged
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, quickStart, 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl.run(t, "virtualmachine.kubevirt.io/testvm created", "-n", ns, "apply", "-f", manifest)
	suite.WaitFor(t, "VM "+ns+"/testvm Stopped", time.Minute, func() (bool, string) {
		status := kubectl.run(t, "", "-n", ns, "get", "vm", "testvm", "-o=jsonpath={.status.printableStatus}")
		return status == "Stopped", status
	})
	kubectl.run(t, "testvm", "-n", ns, "get", "vms")
	if got := kubectl.run(t, "", "-n", ns, "get", "vm,vms,vmi,vmis,vmirs,vmim,kv,vmipreset,vminstancetype,vmpref,vmpool", "-o", "name"); got != "virtualmachine.kubevirt.io/testvm\n" {
		t.Errorf("kubectl get through the short names printed\n%s\nwant only virtualmachine.kubevirt.io/testvm", got)
	}
	if got := kubectl.run(t, "", "get", "kubevirt", "-A", "-o", "name"); got != "kubevirt.kubevirt.io/kubevirt\n" {
		t.Errorf("kubectl get kubevirt -A printed\n%s\nwant the KubeVirt CR alone", got)
	}
	if got := kubectl.run(t, "", "get", "all", "-n", ns, "-o", "name"); !strings.Contains(got, "virtualmachine.kubevirt.io/testvm\n") {
		t.Errorf("kubectl get all -n %s printed\n%s\nwant the VM in it", ns, got)
	}
	if got := kubectl.run(t, "", "api-resources", "--categories=kubevirt", "-o", "name"); got != "" {
		t.Errorf("resources in a category kubevirt, which KubeVirt's CRDs do not have:\n%s", got)
	}
	inAll := strings.Fields(kubectl.run(t, "", "api-resources", "--api-group=kubevirt.io", "--categories=all", "-o", "name"))
	for _, r := range []string{"kubevirts.kubevirt.io", "virtualmachineinstancemigrations.kubevirt.io", "virtualmachineinstancepresets.kubevirt.io",
		"virtualmachineinstancereplicasets.kubevirt.io", "virtualmachineinstances.kubevirt.io", "virtualmachines.kubevirt.io"} {
		if !slices.Contains(inAll, r) {
			t.Errorf("%s is not in the category all (kubectl api-resources printed %q)", r, inAll)
		}
	}
	kubectl.run(t, `virtualmachine.kubevirt.io "testvm" deleted`, "-n", ns, "delete", "vm", "testvm")
}

// kubectlRunner runs the cluster's kubectl with a kubeconfig for it.
type kubectlRunner struct {
	bin, kubeconfig, home string
	noCacheDir            bool // virtctl has no --cache-dir
}

// kubectlFor finds kubectl beside the control plane's binaries and writes a
// kubeconfig reaching the cluster as its admin.
func kubectlFor(t *testing.T, c *cluster.Cluster) kubectlRunner {
	t.Helper()
	dir, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no kubectl beside the control plane binaries (%v); install it with `make test-deps` (hack/setup-k8s.sh)", err)
	}
	home := t.TempDir()
	if c.Env != nil {
		return kubectlRunner{bin: bin, kubeconfig: c.Env.KubeconfigPath, home: home}
	}
	cfg := c.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile, CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{ClientCertificate: cfg.CertFile, ClientCertificateData: cfg.CertData,
		ClientKey: cfg.KeyFile, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken, TokenFile: cfg.BearerTokenFile}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	path := filepath.Join(home, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return kubectlRunner{bin: bin, kubeconfig: path, home: home}
}

// run runs kubectl with args and returns what it printed on stdout; the
// test fails when kubectl fails or its output lacks want.
func (k kubectlRunner) run(t *testing.T, want string, args ...string) string {
	t.Helper()
	flags := []string{"--kubeconfig", k.kubeconfig, "--cache-dir", filepath.Join(k.home, "cache")}
	if k.noCacheDir {
		flags = flags[:2]
	}
	cmd := exec.CommandContext(t.Context(), k.bin, append(flags, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+k.home, "KUBE_EDITOR=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(k.bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String()+stderr.String(), want) {
		t.Fatalf("%s %s printed\n%s%s\nwant %q in it", filepath.Base(k.bin), strings.Join(args, " "), stdout.String(), stderr.String(), want)
	}
	return stdout.String()
}

// virtctlFor is KubeVirt's own virtctl (v1.8, built by
// hack/build-virtctl.sh) with a kubeconfig for the cluster.
func virtctlFor(t *testing.T, c *cluster.Cluster) kubectlRunner {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "_output", "bin", "virtctl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("KubeVirt's virtctl is not built (%v); build it with hack/build-virtctl.sh (part of `make test-deps`)", err)
	}
	k := kubectlFor(t, c)
	k.bin, k.noCacheDir = bin, true
	return k
}
