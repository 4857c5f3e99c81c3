package diskimage

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/nodeagent/launcher/internal/launchertest"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

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
	k1, k2, k3 := launchertest.SSHPublicKey(t, "one"), launchertest.SSHPublicKey(t, "two"), launchertest.SSHPublicKey(t, "three")
	c := cloudInitConfig(t, nil)
	launchertest.WriteCredentialSecret(t, c.PrivateDir, "nc", map[string]string{"b": k2 + "\n", "a": "# mine\n" + k1 + "\n", "empty": ""})
	launchertest.WriteCredentialSecret(t, c.PrivateDir, "cd", map[string]string{"key": k3})
	launchertest.WriteCredentialSecret(t, c.PrivateDir, "bad", map[string]string{"ok": k1, "typo": k2 + "\nssh-ed25519 not-base64 x\n"})
	creds := []v1.AccessCredential{launchertest.SSHCred("nc", byNoCloud), launchertest.SSHCred("cd", byConfigDrive), launchertest.SSHCred("cd", launchertest.ByAgent("root"))}

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
		if err := json.Unmarshal([]byte(launchertest.ReadISO(t, path).Files["openstack/latest/meta_data.json"]), &got); err != nil {
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
		{"bad key", launchertest.SSHCred("bad", byNoCloud), `spec.accessCredentials[1].sshPublicKey: Secret "bad", key "typo", line 2: not an SSH public key`},
		{"secret not mounted", launchertest.SSHCred("gone", byNoCloud), `spec.accessCredentials[1].sshPublicKey: Secret "gone" is not mounted at ` + filepath.Join(c.PrivateDir, "secret", "gone-access-cred")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi.Spec.AccessCredentials = []v1.AccessCredential{launchertest.SSHCred("nc", byNoCloud), tc.cred}
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
