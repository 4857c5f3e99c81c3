package podtemplate

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func sshKeyCred(secret string, pm v1.SSHPublicKeyAccessCredentialPropagationMethod) v1.AccessCredential {
	return v1.AccessCredential{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
		Source:            v1.SSHPublicKeyAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: secret}},
		PropagationMethod: pm,
	}}
}

func passwordCred(secret string) v1.AccessCredential {
	return v1.AccessCredential{UserPassword: &v1.UserPasswordAccessCredential{
		Source:            v1.UserPasswordAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: secret}},
		PropagationMethod: v1.UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}},
	}}
}

var (
	viaNoCloud = v1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &v1.NoCloudSSHPublicKeyAccessCredentialPropagation{}}
	viaAgent   = v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: []string{"vmkit"}}}
)

// TestAccessCredentialVolumes: each Secret of spec.accessCredentials is a
// pod volume <secret>-access-cred mounted read-only in the compute
// container at /var/run/kubevirt-private/secret/<secret>-access-cred, as
// KubeVirt's launcher pods mount them (the launcher reads them there, the
// kubelet refreshes them); a Secret named twice is mounted once.
func TestAccessCredentialVolumes(t *testing.T) {
	vmi := minimalVMI()
	vmi.Spec.AccessCredentials = []v1.AccessCredential{
		sshKeyCred("keys", viaNoCloud),
		sshKeyCred("agent-keys", viaAgent),
		passwordCred("passwords"),
		sshKeyCred("keys", viaAgent),
	}
	pod, err := newTestRenderer(t, nil).RenderLaunchPod(vmi)
	if err != nil {
		t.Fatal(err)
	}
	var vols []corev1.Volume
	for _, v := range pod.Spec.Volumes {
		if strings.HasSuffix(v.Name, AccessCredentialVolumeSuffix) {
			vols = append(vols, v)
		}
	}
	var mounts []corev1.VolumeMount
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if strings.HasSuffix(m.Name, AccessCredentialVolumeSuffix) {
			mounts = append(mounts, m)
		}
	}
	secretVol := func(name string) corev1.Volume {
		return corev1.Volume{Name: name + "-access-cred", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}}
	}
	mount := func(name string) corev1.VolumeMount {
		return corev1.VolumeMount{Name: name + "-access-cred", MountPath: "/var/run/kubevirt-private/secret/" + name + "-access-cred", ReadOnly: true}
	}
	if d := cmp.Diff([]corev1.Volume{secretVol("keys"), secretVol("agent-keys"), secretVol("passwords")}, vols); d != "" {
		t.Errorf("access credential volumes (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]corev1.VolumeMount{mount("keys"), mount("agent-keys"), mount("passwords")}, mounts); d != "" {
		t.Errorf("compute container's mounts of them (-want +got):\n%s", d)
	}
}

func TestAccessCredentialErrors(t *testing.T) {
	both := sshKeyCred("s", viaAgent)
	both.UserPassword = passwordCred("s").UserPassword
	noSource := passwordCred("s")
	noSource.UserPassword.Source.Secret = nil
	noMethod := passwordCred("s")
	noMethod.UserPassword.PropagationMethod.QemuGuestAgent = nil
	for _, tc := range []struct {
		name string
		cred v1.AccessCredential
		edit func(*v1.VirtualMachineInstance)
		want string
	}{
		{name: "neither kind", cred: v1.AccessCredential{},
			want: "spec.accessCredentials[1]: set exactly one of sshPublicKey and userPassword"},
		{name: "both kinds", cred: both,
			want: "spec.accessCredentials[1]: set exactly one of sshPublicKey and userPassword"},
		{name: "no propagation method", cred: sshKeyCred("s", v1.SSHPublicKeyAccessCredentialPropagationMethod{}),
			want: "spec.accessCredentials[1].sshPublicKey.propagationMethod: set exactly one of noCloud, configDrive and qemuGuestAgent (0 set)"},
		{name: "two propagation methods", cred: sshKeyCred("s", v1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: viaNoCloud.NoCloud, QemuGuestAgent: viaAgent.QemuGuestAgent}),
			want: "spec.accessCredentials[1].sshPublicKey.propagationMethod: set exactly one of noCloud, configDrive and qemuGuestAgent (2 set)"},
		{name: "configDrive without its volume", cred: sshKeyCred("s", v1.SSHPublicKeyAccessCredentialPropagationMethod{ConfigDrive: &v1.ConfigDriveSSHPublicKeyAccessCredentialPropagation{}}),
			want: "spec.accessCredentials[1].sshPublicKey.propagationMethod.configDrive: needs a cloudInitConfigDrive volume"},
		{name: "noCloud without its volume", cred: sshKeyCred("s", viaNoCloud),
			edit: func(vmi *v1.VirtualMachineInstance) {
				vmi.Spec.Volumes[2].VolumeSource = v1.VolumeSource{CloudInitConfigDrive: &v1.CloudInitConfigDriveSource{UserData: "#cloud-config"}}
			},
			want: "spec.accessCredentials[0].sshPublicKey.propagationMethod.noCloud: needs a cloudInitNoCloud volume"},
		{name: "guest agent without users", cred: sshKeyCred("s", v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{}}),
			want: "spec.accessCredentials[1].sshPublicKey.propagationMethod.qemuGuestAgent.users: required"},
		{name: "empty user", cred: sshKeyCred("s", v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: []string{"a", ""}}}),
			want: "spec.accessCredentials[1].sshPublicKey.propagationMethod.qemuGuestAgent.users[1]: empty user name"},
		{name: "password without the guest agent", cred: noMethod,
			want: "spec.accessCredentials[1].userPassword.propagationMethod.qemuGuestAgent: required"},
		{name: "no secret", cred: noSource,
			want: "spec.accessCredentials[1].userPassword.source.secret.secretName: required"},
		{name: "bad secret name", cred: sshKeyCred("Keys!", viaAgent),
			want: `spec.accessCredentials[1].sshPublicKey.source.secret.secretName: "Keys!": `},
		{name: "secret name too long for the pod volume", cred: sshKeyCred(strings.Repeat("k", 60), viaAgent),
			want: `spec.accessCredentials[1].sshPublicKey.source.secret.secretName: "` + strings.Repeat("k", 60) + `": the pod volume "` + strings.Repeat("k", 60) + `-access-cred" of its Secret must be a DNS label of at most 63 characters`},
		{name: "pod volume taken by a VMI volume", cred: sshKeyCred("s", viaAgent),
			edit: func(vmi *v1.VirtualMachineInstance) {
				vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "s-access-cred", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "other"}}})
			},
			want: `spec.accessCredentials[1].sshPublicKey.source.secret.secretName: the pod volume "s-access-cred" of Secret "s" is also the name of another volume of the launcher pod`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := minimalVMI()
			vmi.Spec.AccessCredentials = []v1.AccessCredential{sshKeyCred("ok", viaNoCloud), tc.cred}
			if tc.edit != nil {
				tc.edit(vmi)
			}
			pod, err := newTestRenderer(t, nil).RenderLaunchPod(vmi)
			var fe *FieldError
			want := "VirtualMachineInstance ns/vm: " + tc.want
			if pod != nil || !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %v\nwant a FieldError starting with %q", err, want)
			}
		})
	}
}
