package v1

import corev1 "k8s.io/api/core/v1"

// AccessCredential puts SSH keys or a user password from a secret into the
// guest; exactly one of its members is set.
//
// +kubebuilder:validation:XValidation:rule="has(self.sshPublicKey) != has(self.userPassword)",message="an access credential sets exactly one of sshPublicKey and userPassword"
type AccessCredential struct {
	// SSHPublicKey adds the secret's public keys to the guest.
	// +optional
	SSHPublicKey *SSHPublicKeyAccessCredential `json:"sshPublicKey,omitempty"`
	// UserPassword sets guest users' passwords from the secret
	// (user name to password).
	// +optional
	UserPassword *UserPasswordAccessCredential `json:"userPassword,omitempty"`
}

// SSHPublicKeyAccessCredential is where SSH keys come from and how they
// reach the guest.
type SSHPublicKeyAccessCredential struct {
	// Source holds the keys: every value of the secret is one or more
	// authorized_keys lines.
	Source SSHPublicKeyAccessCredentialSource `json:"source"`
	// PropagationMethod is how the keys reach the guest.
	PropagationMethod SSHPublicKeyAccessCredentialPropagationMethod `json:"propagationMethod"`
}

// SSHPublicKeyAccessCredentialSource names the secret holding the keys.
type SSHPublicKeyAccessCredentialSource struct {
	// Secret in the VMI's namespace.
	// +optional
	Secret *AccessCredentialSecretSource `json:"secret,omitempty"`
}

// AccessCredentialSecretSource names a secret in the VMI's namespace.
type AccessCredentialSecretSource struct {
	// SecretName is the secret's name.
	SecretName string `json:"secretName"`
}

// SSHPublicKeyAccessCredentialPropagationMethod is how SSH keys reach the
// guest; exactly one member is set.
type SSHPublicKeyAccessCredentialPropagationMethod struct {
	// ConfigDrive puts the keys in the config drive's metadata (needs a
	// cloudInitConfigDrive volume).
	// +optional
	ConfigDrive *ConfigDriveSSHPublicKeyAccessCredentialPropagation `json:"configDrive,omitempty"`
	// NoCloud puts the keys in the NoCloud metadata (needs a
	// cloudInitNoCloud volume).
	// +optional
	NoCloud *NoCloudSSHPublicKeyAccessCredentialPropagation `json:"noCloud,omitempty"`
	// QemuGuestAgent writes the keys into the listed users'
	// authorized_keys through the guest agent, and keeps them current.
	// +optional
	QemuGuestAgent *QemuGuestAgentSSHPublicKeyAccessCredentialPropagation `json:"qemuGuestAgent,omitempty"`
}

// ConfigDriveSSHPublicKeyAccessCredentialPropagation selects the config
// drive; it has no settings.
type ConfigDriveSSHPublicKeyAccessCredentialPropagation struct{}

// NoCloudSSHPublicKeyAccessCredentialPropagation selects NoCloud metadata;
// it has no settings.
type NoCloudSSHPublicKeyAccessCredentialPropagation struct{}

// QemuGuestAgentSSHPublicKeyAccessCredentialPropagation lists the guest
// users whose authorized_keys the guest agent manages.
type QemuGuestAgentSSHPublicKeyAccessCredentialPropagation struct {
	// Users whose authorized_keys get the keys.
	// +listType=set
	Users []string `json:"users"`
}

// UserPasswordAccessCredential is where passwords come from and how they
// reach the guest.
type UserPasswordAccessCredential struct {
	// Source holds the passwords, one secret key per user name.
	Source UserPasswordAccessCredentialSource `json:"source"`
	// PropagationMethod is how the passwords reach the guest.
	PropagationMethod UserPasswordAccessCredentialPropagationMethod `json:"propagationMethod"`
}

// UserPasswordAccessCredentialSource names the secret holding passwords.
type UserPasswordAccessCredentialSource struct {
	// Secret in the VMI's namespace.
	// +optional
	Secret *AccessCredentialSecretSource `json:"secret,omitempty"`
}

// UserPasswordAccessCredentialPropagationMethod is how passwords reach the
// guest.
type UserPasswordAccessCredentialPropagationMethod struct {
	// QemuGuestAgent sets the passwords through the guest agent.
	// +optional
	QemuGuestAgent *QemuGuestAgentUserPasswordAccessCredentialPropagation `json:"qemuGuestAgent,omitempty"`
}

// QemuGuestAgentUserPasswordAccessCredentialPropagation selects the guest
// agent; it has no settings.
type QemuGuestAgentUserPasswordAccessCredentialPropagation struct{}

// Probe checks the guest periodically, as a container probe checks a
// container: through the pod network (tcpSocket, httpGet), by a command
// run in the guest (exec, through the guest agent) or by pinging the guest
// agent. Exactly one check is set.
type Probe struct {
	// Exec runs a command in the guest through the guest agent; exit code
	// 0 is success.
	// +optional
	Exec *corev1.ExecAction `json:"exec,omitempty"`
	// HTTPGet sends an HTTP GET to the guest.
	// +optional
	HTTPGet *corev1.HTTPGetAction `json:"httpGet,omitempty"`
	// TCPSocket opens a TCP connection to the guest.
	// +optional
	TCPSocket *corev1.TCPSocketAction `json:"tcpSocket,omitempty"`
	// GuestAgentPing pings the guest agent.
	// +optional
	GuestAgentPing *GuestAgentPing `json:"guestAgentPing,omitempty"`
	// InitialDelaySeconds after the guest starts before the first check.
	// +optional
	InitialDelaySeconds *int32 `json:"initialDelaySeconds,omitempty"`
	// TimeoutSeconds of one check; 1 when unset.
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
	// PeriodSeconds between checks; 10 when unset.
	// +optional
	PeriodSeconds *int32 `json:"periodSeconds,omitempty"`
	// SuccessThreshold is the consecutive successes after a failure that
	// count as success; 1 when unset.
	// +optional
	SuccessThreshold *int32 `json:"successThreshold,omitempty"`
	// FailureThreshold is the consecutive failures that count as failure;
	// 3 when unset.
	// +optional
	FailureThreshold *int32 `json:"failureThreshold,omitempty"`
}

// GuestAgentPing selects a guest-agent ping; it has no settings.
type GuestAgentPing struct{}
