package v1

import (
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateAccessCredentials checks spec.accessCredentials as KubeVirt's
// VMI webhook does: each sets one of sshPublicKey and userPassword, a
// secret source and one propagation method; noCloud and configDrive need a
// cloud-init volume of that kind, qemuGuestAgent SSH keys at least one
// user. Secret names must be DNS subdomains.
func validateAccessCredentials(p *field.Path, creds []AccessCredential, volumes []Volume) field.ErrorList {
	var noCloud, configDrive bool
	for i := range volumes {
		noCloud = noCloud || volumes[i].CloudInitNoCloud != nil
		configDrive = configDrive || volumes[i].CloudInitConfigDrive != nil
	}
	var errs field.ErrorList
	for i := range creds {
		ac := &creds[i]
		cp := p.Index(i)
		errs = append(errs, validateOneOf(cp, "access credential", []setField{
			{"sshPublicKey", ac.SSHPublicKey != nil}, {"userPassword", ac.UserPassword != nil}}, true)...)
		var secret *AccessCredentialSecretSource
		var sp *field.Path
		switch {
		case ac.SSHPublicKey != nil:
			sp = cp.Child("sshPublicKey")
			secret = ac.SSHPublicKey.Source.Secret
			pm := &ac.SSHPublicKey.PropagationMethod
			pp := sp.Child("propagationMethod")
			errs = append(errs, validateOneOf(pp, "propagation method", []setField{
				{"noCloud", pm.NoCloud != nil}, {"configDrive", pm.ConfigDrive != nil}, {"qemuGuestAgent", pm.QemuGuestAgent != nil}}, true)...)
			if pm.NoCloud != nil && !noCloud {
				errs = append(errs, field.Invalid(pp.Child("noCloud"), "", "requires a cloudInitNoCloud volume, whose metadata carries the keys"))
			}
			if pm.ConfigDrive != nil && !configDrive {
				errs = append(errs, field.Invalid(pp.Child("configDrive"), "", "requires a cloudInitConfigDrive volume, whose metadata carries the keys"))
			}
			if pm.QemuGuestAgent != nil {
				up := pp.Child("qemuGuestAgent", "users")
				if len(pm.QemuGuestAgent.Users) == 0 {
					errs = append(errs, field.Required(up, "the guest users whose authorized_keys get the keys"))
				}
				for j, u := range pm.QemuGuestAgent.Users {
					if u == "" {
						errs = append(errs, field.Invalid(up.Index(j), u, "must not be empty"))
					}
				}
			}
		case ac.UserPassword != nil:
			sp = cp.Child("userPassword")
			secret = ac.UserPassword.Source.Secret
			if ac.UserPassword.PropagationMethod.QemuGuestAgent == nil {
				errs = append(errs, field.Required(sp.Child("propagationMethod", "qemuGuestAgent"), "passwords reach the guest through the guest agent"))
			}
		default:
			continue
		}
		np := sp.Child("source", "secret", "secretName")
		switch {
		case secret == nil || secret.SecretName == "":
			errs = append(errs, field.Required(np, "the Secret holding the credentials"))
		default:
			for _, msg := range validation.IsDNS1123Subdomain(secret.SecretName) {
				errs = append(errs, field.Invalid(np, secret.SecretName, msg))
			}
		}
	}
	return errs
}
