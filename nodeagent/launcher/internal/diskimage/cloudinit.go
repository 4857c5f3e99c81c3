package diskimage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vmkit/vmkit/nodeagent/launcher/internal/accesscred"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// noCloudISO writes the NoCloud ISO (label cidata) of a cloud-init volume:
// meta-data (instance-id and local-hostname), user-data and, when given,
// network-config. The instance ID is KubeVirt's, the firmware UUID, which
// the VM controller derives from the VM's name: cloud-init sees the same
// instance after a restart and runs its once-per-instance modules (users,
// SSH host keys) once. A VMI without one (made directly) uses its UID.
// Secret references are read where the launcher pod mounts
// them: <PrivateDir>/secret/<volume>/{userdata,userData,networkdata,networkData}.
func (c Config) noCloudISO(ctx context.Context, vmi *v1.VirtualMachineInstance, vol *v1.Volume, path string) error {
	user, network, err := c.cloudInitPayload(vol.Name, vol.CloudInitNoCloud)
	if err != nil {
		return err
	}
	keys, err := accesscred.CloudInitPublicKeys(c.PrivateDir, vmi, false)
	if err != nil {
		return err
	}
	publicKeys, err := accesscred.NoCloudPublicKeys(keys)
	if err != nil {
		return err
	}
	host := guestHostname(vmi)
	files := []isoFile{
		{Name: "meta-data", Data: []byte(fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n%s", firmwareUUID(vmi), host, publicKeys))},
		{Name: "user-data", Data: user},
	}
	if len(network) > 0 {
		files = append(files, isoFile{Name: "network-config", Data: network})
	}
	return writeISO(ctx, path, "cidata", files)
}

// configDriveISO writes the OpenStack config drive (label config-2) of a
// cloud-init volume: openstack/latest/meta_data.json and, when given,
// user_data and network_data.json. The metadata keys are KubeVirt's:
// instance_id is <name>.<namespace>, uuid the firmware UUID (else the VMI
// UID), hostname as for NoCloud. Secret references are read as for NoCloud.
func (c Config) configDriveISO(ctx context.Context, vmi *v1.VirtualMachineInstance, vol *v1.Volume, path string) error {
	// The two sources hold the same fields.
	src := v1.CloudInitNoCloudSource(*vol.CloudInitConfigDrive)
	user, network, err := c.cloudInitPayload(vol.Name, &src)
	if err != nil {
		return err
	}
	keys, err := accesscred.CloudInitPublicKeys(c.PrivateDir, vmi, true)
	if err != nil {
		return err
	}
	host := guestHostname(vmi)
	meta, err := json.Marshal(configDriveMetadata{InstanceID: vmi.Name + "." + vmi.Namespace, UUID: firmwareUUID(vmi), Hostname: host,
		PublicKeys: accesscred.PublicKeysMap(keys)})
	if err != nil {
		return err
	}
	const dir = "openstack/latest/"
	files := []isoFile{{Name: dir + "meta_data.json", Data: meta}}
	if len(user) > 0 {
		files = append(files, isoFile{Name: dir + "user_data", Data: user})
	}
	if len(network) > 0 {
		files = append(files, isoFile{Name: dir + "network_data.json", Data: network})
	}
	return writeISO(ctx, path, "config-2", files)
}

// configDriveMetadata is openstack/latest/meta_data.json.
type configDriveMetadata struct {
	InstanceID string `json:"instance_id"`
	UUID       string `json:"uuid"`
	Hostname   string `json:"hostname,omitempty"`
	// PublicKeys are the SSH keys of access credentials propagated by
	// configDrive, as KubeVirt's: "0", "1", ... to a Secret value each.
	PublicKeys map[string]string `json:"public_keys,omitempty"`
}

// cloudInitPayload reads a cloud-init volume's user and network data:
// inline, base64 or from the Secret the launcher pod mounts at
// <PrivateDir>/secret/<volume>/.
func (c Config) cloudInitPayload(volume string, src *v1.CloudInitNoCloudSource) (user, network []byte, err error) {
	secretDir := filepath.Join(c.PrivateDir, "secret", volume)
	if user, err = cloudInitData(src.UserData, src.UserDataBase64, src.UserDataSecretRef != nil, secretDir, "userdata", "userData"); err != nil {
		return nil, nil, fmt.Errorf("user data: %w", err)
	}
	if network, err = cloudInitData(src.NetworkData, src.NetworkDataBase64, src.NetworkDataSecretRef != nil, secretDir, "networkdata", "networkData"); err != nil {
		return nil, nil, fmt.Errorf("network data: %w", err)
	}
	return user, network, nil
}

// firmwareUUID is the VMI's firmware UUID, else its UID.
func firmwareUUID(vmi *v1.VirtualMachineInstance) string {
	if fw := vmi.Spec.Domain.Firmware; fw != nil && fw.UUID != "" {
		return string(fw.UUID)
	}
	return string(vmi.UID)
}

// guestHostname is the VMI's spec.hostname, else its name.
func guestHostname(vmi *v1.VirtualMachineInstance) string {
	if vmi.Spec.Hostname != "" {
		return vmi.Spec.Hostname
	}
	return vmi.Name
}

func cloudInitData(plain, b64 string, fromSecret bool, secretDir string, keys ...string) ([]byte, error) {
	switch {
	case plain != "":
		return []byte(plain), nil
	case b64 != "":
		return base64.StdEncoding.DecodeString(b64)
	case fromSecret:
		for _, k := range keys {
			if b, err := os.ReadFile(filepath.Join(secretDir, k)); err == nil {
				return b, nil
			}
		}
		return nil, fmt.Errorf("secret not mounted at %s", secretDir)
	}
	return nil, nil
}
