package v1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestValidateAccessCredentials: spec.accessCredentials as KubeVirt's
// webhook checks them, each error naming the field.
func TestValidateAccessCredentials(t *testing.T) {
	secret := &v1.AccessCredentialSecretSource{SecretName: "keys"}
	ssh := func(pm v1.SSHPublicKeyAccessCredentialPropagationMethod, s *v1.AccessCredentialSecretSource) v1.AccessCredential {
		return v1.AccessCredential{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{Source: v1.SSHPublicKeyAccessCredentialSource{Secret: s}, PropagationMethod: pm}}
	}
	noCloud := v1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &v1.NoCloudSSHPublicKeyAccessCredentialPropagation{}}
	configDrive := v1.SSHPublicKeyAccessCredentialPropagationMethod{ConfigDrive: &v1.ConfigDriveSSHPublicKeyAccessCredentialPropagation{}}
	agent := func(users ...string) v1.SSHPublicKeyAccessCredentialPropagationMethod {
		return v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: users}}
	}
	password := func(pm *v1.QemuGuestAgentUserPasswordAccessCredentialPropagation, s *v1.AccessCredentialSecretSource) v1.AccessCredential {
		return v1.AccessCredential{UserPassword: &v1.UserPasswordAccessCredential{Source: v1.UserPasswordAccessCredentialSource{Secret: s},
			PropagationMethod: v1.UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: pm}}}
	}
	const p = "spec.accessCredentials[0]"
	for _, tc := range []struct {
		name string
		cred v1.AccessCredential
		want []fieldError
	}{
		{"noCloud key", ssh(noCloud, secret), nil},
		{"guest agent key", ssh(agent("fedora"), secret), nil},
		{"password", password(&v1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}, secret), nil},
		{"neither kind", v1.AccessCredential{}, []fieldError{{required, p}}},
		{"both kinds", v1.AccessCredential{SSHPublicKey: ssh(noCloud, secret).SSHPublicKey, UserPassword: password(&v1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}, secret).UserPassword},
			[]fieldError{{forbidden, p + ".userPassword"}}},
		{"no propagation method", ssh(v1.SSHPublicKeyAccessCredentialPropagationMethod{}, secret), []fieldError{{required, p + ".sshPublicKey.propagationMethod"}}},
		{"two propagation methods", ssh(v1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: noCloud.NoCloud, QemuGuestAgent: agent("a").QemuGuestAgent}, secret),
			[]fieldError{{forbidden, p + ".sshPublicKey.propagationMethod.qemuGuestAgent"}}},
		{"configDrive without its volume", ssh(configDrive, secret), []fieldError{{invalid, p + ".sshPublicKey.propagationMethod.configDrive"}}},
		{"guest agent without users", ssh(agent(), secret), []fieldError{{required, p + ".sshPublicKey.propagationMethod.qemuGuestAgent.users"}}},
		{"empty user", ssh(agent("a", ""), secret), []fieldError{{invalid, p + ".sshPublicKey.propagationMethod.qemuGuestAgent.users[1]"}}},
		{"no secret", ssh(noCloud, nil), []fieldError{{required, p + ".sshPublicKey.source.secret.secretName"}}},
		{"bad secret name", ssh(noCloud, &v1.AccessCredentialSecretSource{SecretName: "Keys!"}), []fieldError{{invalid, p + ".sshPublicKey.source.secret.secretName"}}},
		{"password without the guest agent", password(nil, secret), []fieldError{{required, p + ".userPassword.propagationMethod.qemuGuestAgent"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := testVMI() // has a cloudInitNoCloud volume
			vmi.Spec.AccessCredentials = []v1.AccessCredential{tc.cred}
			got := fieldErrors(t, v1.ValidateVirtualMachineInstance(vmi))
			if diff := cmp.Diff(tc.want, got, sortFieldErrors, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s\nall: %v", diff, v1.ValidateVirtualMachineInstance(vmi))
			}
		})
	}
}
