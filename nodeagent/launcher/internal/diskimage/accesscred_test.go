package diskimage

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// testPublicKey is a fresh Ed25519 key in authorized_keys form.
func testPublicKey(t *testing.T, comment string) string {
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

// writeCredentialSecret lays out a Secret as the kubelet mounts it at
// <priv>/secret/<name>-access-cred: the keys are links into ..data, a link
// to a ..<timestamp> directory holding the files. Called again, it swaps
// ..data as the kubelet does on an update.
func writeCredentialSecret(t *testing.T, priv, name string, data map[string]string) {
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

func sshCred(secret string, pm v1.SSHPublicKeyAccessCredentialPropagationMethod) v1.AccessCredential {
	return v1.AccessCredential{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
		Source:            v1.SSHPublicKeyAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: secret}},
		PropagationMethod: pm,
	}}
}

func byAgent(users ...string) v1.SSHPublicKeyAccessCredentialPropagationMethod {
	return v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: users}}
}

var (
	byNoCloud     = v1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &v1.NoCloudSSHPublicKeyAccessCredentialPropagation{}}
	byConfigDrive = v1.SSHPublicKeyAccessCredentialPropagationMethod{ConfigDrive: &v1.ConfigDriveSSHPublicKeyAccessCredentialPropagation{}}
)

// TestCloudInitAccessCredentials: the keys of credentials propagated by
// noCloud go into NoCloud's meta-data as public-keys, those by configDrive
// into meta_data.json's public_keys, each Secret value one entry, as
// KubeVirt's launcher writes them; the other credentials stay out. A value
// that is not an SSH key, or a Secret that is not mounted, fails the ISO
// with an error naming the field, the Secret and the key.
func TestCloudInitAccessCredentials(t *testing.T) {
	k1, k2, k3 := testPublicKey(t, "one"), testPublicKey(t, "two"), testPublicKey(t, "three")
	c := cloudInitConfig(t, nil)
	writeCredentialSecret(t, c.PrivateDir, "nc", map[string]string{"b": k2 + "\n", "a": "# mine\n" + k1 + "\n", "empty": ""})
	writeCredentialSecret(t, c.PrivateDir, "cd", map[string]string{"key": k3})
	writeCredentialSecret(t, c.PrivateDir, "bad", map[string]string{"ok": k1, "typo": k2 + "\nssh-ed25519 not-base64 x\n"})
	creds := []v1.AccessCredential{sshCred("nc", byNoCloud), sshCred("cd", byConfigDrive), sshCred("cd", byAgent("root"))}

	vmi := &v1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace, vmi.UID = "vm1", "ns", types.UID(diskUID)
	vmi.Spec.AccessCredentials = creds
	vmi.Spec.Volumes = []v1.Volume{{Name: "cloudinit", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}}}
	path := filepath.Join(t.TempDir(), "noCloud.iso")
	err := c.noCloudISO(context.Background(), vmi, &vmi.Spec.Volumes[0], path)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	checkISO(t, err, "", path, "cidata", map[string]string{
		"meta-data": "instance-id: " + diskUID + "\nlocal-hostname: vm1\npublic-keys:\n" +
			`  "0": ` + q("# mine\n"+k1+"\n") + "\n" + `  "1": ` + q(k2+"\n") + "\n",
		"user-data": "#cloud-config\n",
	})

	dvmi, vol := configDriveVMI(&v1.CloudInitConfigDriveSource{UserData: "#cloud-config\n"})
	dvmi.Spec.AccessCredentials = creds
	path = filepath.Join(t.TempDir(), "configdrive.iso")
	err = c.configDriveISO(context.Background(), dvmi, vol, path)
	meta, _ := json.Marshal(map[string]any{"instance_id": "vm1.ns", "uuid": diskUID, "hostname": "vm1", "public_keys": map[string]string{"0": k3}})
	var want map[string]any
	_ = json.Unmarshal(meta, &want)
	img := func() map[string]any {
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(readISO(t, path).Files["openstack/latest/meta_data.json"]), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}()
	if gotKeys, wantKeys := img["public_keys"], want["public_keys"]; !jsonEqual(gotKeys, wantKeys) {
		t.Errorf("config drive public_keys %v, want %v", gotKeys, wantKeys)
	}

	for _, tc := range []struct {
		name string
		cred v1.AccessCredential
		want string
	}{
		{"bad key", sshCred("bad", byNoCloud), `spec.accessCredentials[1].sshPublicKey: Secret "bad", key "typo", line 2: not an SSH public key`},
		{"secret not mounted", sshCred("gone", byNoCloud), `spec.accessCredentials[1].sshPublicKey: Secret "gone" is not mounted at ` + filepath.Join(c.PrivateDir, "secret", "gone-access-cred")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi.Spec.AccessCredentials = []v1.AccessCredential{sshCred("nc", byNoCloud), tc.cred}
			err := c.noCloudISO(context.Background(), vmi, &vmi.Spec.Volumes[0], filepath.Join(t.TempDir(), "noCloud.iso"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
