package launchertest

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// SSHPublicKey is a fresh Ed25519 key in authorized_keys form, ending in
// comment.
func SSHPublicKey(t *testing.T, comment string) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " " + comment
}

// WriteCredentialSecret lays out a Secret as the kubelet mounts it at
// <priv>/secret/<name>-access-cred: the keys are links into ..data, a link
// to a ..<timestamp> directory holding the files. Called again, it swaps
// ..data as the kubelet does on an update.
func WriteCredentialSecret(t *testing.T, priv, name string, data map[string]string) {
	t.Helper()
	dir := filepath.Join(priv, "secret", name+"-access-cred")
	ts := filepath.Join(dir, "..2026_11_25_"+time.Now().Format("150405.000000000"))
	if err := os.MkdirAll(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(ts, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, ok := data[e.Name()]; !ok && !strings.HasPrefix(e.Name(), "..") {
			_ = os.Remove(filepath.Join(dir, e.Name())) // a key the update removed
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// SSHCred is an SSH public key access credential from the Secret named
// secret, propagated by pm.
func SSHCred(secret string, pm v1.SSHPublicKeyAccessCredentialPropagationMethod) v1.AccessCredential {
	return v1.AccessCredential{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
		Source:            v1.SSHPublicKeyAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: secret}},
		PropagationMethod: pm,
	}}
}

// ByAgent propagates SSH public keys by the guest agent to users.
func ByAgent(users ...string) v1.SSHPublicKeyAccessCredentialPropagationMethod {
	return v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: users}}
}
