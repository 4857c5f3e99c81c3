package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmctl"
)

// TestAccessCredentials boots the cloud guest (examples/vm-cloud.yaml) once
// with three spec.accessCredentials, as KubeVirt users write them:
//   - an SSH key from Secret accesscred-nocloud propagated by noCloud: the
//     launcher puts it in the NoCloud meta-data's public-keys, and
//     cloud-init gives it to Debian's default user "debian";
//   - an SSH key from Secret accesscred-agent propagated by qemuGuestAgent
//     to user vmkit (whom the user data creates, without keys): the
//     launcher writes vmkit's authorized_keys through the guest agent;
//   - a password for vmkit from Secret accesscred-password (userPassword,
//     qemuGuestAgent).
//
// It checks that the VMI gets AccessCredentialsSynchronized=True, that SSH
// through virt-api's port-forward logs in as debian with the first key and
// as vmkit with the second (the host key being one cloud-init printed),
// that vmkit's password hash in /etc/shadow is the Secret's password, and
// that replacing the agent Secret's key (the kubelet refreshes the mounted
// Secret) replaces vmkit's authorized_keys: the new key logs in, the file
// holds only it.
func TestAccessCredentials(t *testing.T) {
	c := need(t)
	ncSigner, ncKey := sshKey(t)
	gaSigner, gaKey := sshKey(t)
	const password = "Acc3ss-cred-pw"

	secrets := map[string]map[string]string{
		"accesscred-nocloud":  {"key": ncKey + "\n"},
		"accesscred-agent":    {"laptop": gaKey},
		"accesscred-password": {"vmkit": password},
	}
	for name, data := range secrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, StringData: data}
		if _, err := c.Kube.CoreV1().Secrets("default").Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Kube.CoreV1().Secrets("default").Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	secret := func(name string) *v1.AccessCredentialSecretSource {
		return &v1.AccessCredentialSecretSource{SecretName: name}
	}
	vm := exampleVM(t, "vm-cloud.yaml", "vm-accesscred", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.AccessCredentials = []v1.AccessCredential{
		{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
			Source:            v1.SSHPublicKeyAccessCredentialSource{Secret: secret("accesscred-nocloud")},
			PropagationMethod: v1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &v1.NoCloudSSHPublicKeyAccessCredentialPropagation{}},
		}},
		{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
			Source: v1.SSHPublicKeyAccessCredentialSource{Secret: secret("accesscred-agent")},
			PropagationMethod: v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{
				Users: []string{"vmkit"}}},
		}},
		{UserPassword: &v1.UserPasswordAccessCredential{
			Source:            v1.UserPasswordAccessCredentialSource{Secret: secret("accesscred-password")},
			PropagationMethod: v1.UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}},
		}},
	}
	began := time.Now()
	createVM(t, c, vm)
	name := vm.Name
	waitVMI(t, c, name, "Running", running)

	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	lines, err := c.Console(ctx, "default", name, keysEnd)
	cancel()
	if err != nil {
		t.Fatalf("%v (console so far: %q)\n%s", err, lines, componentLogs(c))
	}
	t.Logf("cloud-init done (host keys printed) %v after create", time.Since(began).Round(time.Second))
	vmi := waitVMI(t, c, name, "AccessCredentialsSynchronized=True", func(vmi *v1.VirtualMachineInstance) bool {
		cond := vmi.VMICondition(v1.VirtualMachineInstanceAccessCredentialsSynchronized)
		return cond != nil && cond.Status == corev1.ConditionTrue
	})
	cond := vmi.VMICondition(v1.VirtualMachineInstanceAccessCredentialsSynchronized)
	t.Logf("AccessCredentialsSynchronized=True (reason %s) %v after create", cond.Reason, time.Since(began).Round(time.Second))
	if cond.Reason != "AccessCredentialsSyncSuccess" {
		t.Errorf("condition reason %q, want AccessCredentialsSyncSuccess", cond.Reason)
	}

	sub, err := vmctl.NewSubresources(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The noCloud key: Debian's default user.
	withSSH(t, sub, name, "debian", ncSigner, lines, 2*time.Minute, func(run func(string) string) {
		if out := run("id -un; cat ~/.ssh/authorized_keys"); !strings.HasPrefix(out, "debian\n") || !strings.Contains(out, ncKey) {
			t.Errorf("as debian over SSH: %q, want user debian whose authorized_keys hold the noCloud key", out)
		}
	})
	// The guest agent's key and password: vmkit.
	withSSH(t, sub, name, "vmkit", gaSigner, lines, 2*time.Minute, func(run func(string) string) {
		if out := run("id -un; stat -c '%U %a' ~/.ssh ~/.ssh/authorized_keys"); out != "vmkit\nvmkit 700\nvmkit 600\n" {
			t.Errorf("as vmkit over SSH: %q, want user vmkit owning ~/.ssh (700) and authorized_keys (600)", out)
		}
		// qemu-ga writes the keys one a line, the last without a newline.
		if out := run("cat ~/.ssh/authorized_keys"); strings.TrimSpace(out) != gaKey {
			t.Errorf("vmkit's authorized_keys: %q, want only the Secret's key %q", out, gaKey)
		}
		check := fmt.Sprintf(`sudo -n perl -e '$h = (getpwnam("vmkit"))[1]; print crypt(%q, $h) eq $h ? "match\n" : "differ\n"'`, password)
		if out := run(check); out != "match\n" {
			t.Errorf("vmkit's password hash against the Secret's password: %q, want match", out)
		}
	})

	// A new key in the Secret replaces vmkit's authorized_keys.
	newSigner, newKey := sshKey(t)
	s, err := c.Kube.CoreV1().Secrets("default").Get(t.Context(), "accesscred-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"laptop": []byte(newKey)}
	if _, err := c.Kube.CoreV1().Secrets("default").Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := time.Now()
	withSSH(t, sub, name, "vmkit", newSigner, lines, 4*time.Minute, func(run func(string) string) {
		t.Logf("the replaced key logs in %v after the Secret's update", time.Since(updated).Round(time.Second))
		if out := run("cat ~/.ssh/authorized_keys"); strings.TrimSpace(out) != newKey {
			t.Errorf("vmkit's authorized_keys after the update: %q, want only the new key", out)
		}
	})
	waitVMI(t, c, name, "still AccessCredentialsSynchronized=True", func(vmi *v1.VirtualMachineInstance) bool {
		cond := vmi.VMICondition(v1.VirtualMachineInstanceAccessCredentialsSynchronized)
		return cond != nil && cond.Status == corev1.ConditionTrue
	})
}

// withSSH logs in to VMI name as user (see sshLogin) and calls f with a
// function running a command (stdout and stderr).
func withSSH(t *testing.T, sub *vmctl.Subresources, name, user string, signer ssh.Signer, lines []string, timeout time.Duration, f func(run func(cmd string) string)) {
	t.Helper()
	client := sshLogin(t, sub, name, user, signer, lines, timeout)
	defer client.Close()
	f(sshRunner(t, client, name, user))
}
