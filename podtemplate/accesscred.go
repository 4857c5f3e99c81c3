package podtemplate

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// AccessCredentialVolumeSuffix ends the name of the pod volume of an
// access credential's Secret: <secret name>-access-cred, mounted read-only
// at /var/run/kubevirt-private/secret/<secret name>-access-cred, as
// KubeVirt's pods do. The launcher reads the keys and passwords there, and
// the kubelet refreshes the files when the Secret changes.
const AccessCredentialVolumeSuffix = "-access-cred"

// accessCredentialStorage checks spec.accessCredentials and adds a pod
// volume and a read-only compute mount for each Secret they name (once per
// Secret, however many credentials name it). Each credential sets exactly
// one of sshPublicKey and userPassword, a secret source with a name and
// exactly one propagation method; noCloud and configDrive need a volume of
// that kind for the metadata that carries the keys, qemuGuestAgent for SSH
// keys at least one user. The volume is not optional, as KubeVirt's: the
// kubelet starts no launcher while the Secret is missing and says so in
// the pod's events, naming the volume <secret>-access-cred.
func accessCredentialStorage(f *guestFacts, spec *v1.VirtualMachineInstanceSpec, s *podStorage) error {
	var noCloud, configDrive bool
	for i := range spec.Volumes {
		noCloud = noCloud || spec.Volumes[i].CloudInitNoCloud != nil
		configDrive = configDrive || spec.Volumes[i].CloudInitConfigDrive != nil
	}
	first := len(s.volumes)
	for i := range spec.AccessCredentials {
		ac := &spec.AccessCredentials[i]
		field := "spec.accessCredentials[" + strconv.Itoa(i) + "]"
		var secret *v1.AccessCredentialSecretSource
		switch {
		case (ac.SSHPublicKey == nil) == (ac.UserPassword == nil):
			return f.ref.errorf(field, "set exactly one of sshPublicKey and userPassword")
		case ac.SSHPublicKey != nil:
			field += ".sshPublicKey"
			secret = ac.SSHPublicKey.Source.Secret
			pm := &ac.SSHPublicKey.PropagationMethod
			n := 0
			for _, set := range [...]bool{pm.NoCloud != nil, pm.ConfigDrive != nil, pm.QemuGuestAgent != nil} {
				if set {
					n++
				}
			}
			switch {
			case n != 1:
				return f.ref.errorf(field+".propagationMethod", "set exactly one of noCloud, configDrive and qemuGuestAgent (%d set)", n)
			case pm.NoCloud != nil && !noCloud:
				return f.ref.errorf(field+".propagationMethod.noCloud", "needs a cloudInitNoCloud volume, whose metadata carries the keys")
			case pm.ConfigDrive != nil && !configDrive:
				return f.ref.errorf(field+".propagationMethod.configDrive", "needs a cloudInitConfigDrive volume, whose metadata carries the keys")
			case pm.QemuGuestAgent != nil && len(pm.QemuGuestAgent.Users) == 0:
				return f.ref.errorf(field+".propagationMethod.qemuGuestAgent.users", "required: the guest users whose authorized_keys get the keys")
			}
			if pm.QemuGuestAgent != nil {
				for j, u := range pm.QemuGuestAgent.Users {
					if u == "" {
						return f.ref.errorf(field+".propagationMethod.qemuGuestAgent.users["+strconv.Itoa(j)+"]", "empty user name")
					}
				}
			}
		default:
			field += ".userPassword"
			secret = ac.UserPassword.Source.Secret
			if ac.UserPassword.PropagationMethod.QemuGuestAgent == nil {
				return f.ref.errorf(field+".propagationMethod.qemuGuestAgent", "required: the guest agent is how passwords reach the guest")
			}
		}
		if secret == nil || secret.SecretName == "" {
			return f.ref.errorf(field+".source.secret.secretName", "required")
		}
		name := secret.SecretName
		if !isDNSSubdomain(name) {
			return f.ref.errorf(field+".source.secret.secretName", "%q: %s", name, dnsSubdomainError(name))
		}
		podVol := name + AccessCredentialVolumeSuffix
		if len(podVol) > validation.DNS1123LabelMaxLength || !isDNSLabel(podVol) {
			return f.ref.errorf(field+".source.secret.secretName", "%q: the pod volume %q of its Secret must be a DNS label of at most %d characters; use a shorter Secret name without dots",
				name, podVol, validation.DNS1123LabelMaxLength)
		}
		dup := false
		for j := range s.volumes {
			if s.volumes[j].Name != podVol {
				continue
			}
			if j >= first {
				dup = true // another credential of the same Secret: mounted once
				break
			}
			return f.ref.errorf(field+".source.secret.secretName", "the pod volume %q of Secret %q is also the name of another volume of the launcher pod", podVol, name)
		}
		if dup {
			continue
		}
		s.add(podVol, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}, secretDir+"/"+podVol)
	}
	return nil
}
