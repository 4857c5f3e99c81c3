// Package accesscred reads the Secrets of a VMI's access credentials
// (spec.accessCredentials) and keeps the guest-agent ones in the guest, as
// KubeVirt's launcher handles them. The launcher pod mounts the Secret of
// each credential at <PrivateDir>/secret/<secret>-access-cred
// (podtemplate); every file of it is one key of the Secret.
//
//   - SSH keys with propagation noCloud or configDrive go into the
//     cloud-init metadata of that volume when the launcher writes its ISO:
//     NoCloud's public-keys, the config drive's public_keys, one entry per
//     file of the Secret ("0", "1", ... in the order of the credentials and
//     of the keys' names), which cloud-init adds to the default user's
//     authorized_keys. They are read once, at the domain's start.
//   - SSH keys with propagation qemuGuestAgent become the whole
//     ~/.ssh/authorized_keys of each listed user, written by the QEMU guest
//     agent (guest-ssh-add-authorized-keys with reset, which libvirt's
//     virDomainAuthorizedSSHKeysSet sends for KubeVirt); a user named by
//     several credentials gets all their keys.
//   - Passwords (userPassword, always through the guest agent): every file
//     of the Secret is a user (its name) and its password (its contents,
//     trimmed), set by guest-set-user-password.
//
// The guest-agent credentials are kept in sync while the guest runs
// (Syncer): the Secrets are read every Syncer.Interval and written again
// when they changed (the kubelet refreshes a Secret volume within about a
// minute of an edit), when the last attempt failed, and every resync
// regardless, as KubeVirt's launcher does every 5 minutes. The outcome
// (Syncer.Report) is the launcher's Status.AccessCredentials, which the
// node agent turns into the VMI condition AccessCredentialsSynchronized.
package accesscred

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"k8s.io/klog/v2"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// dirSuffix ends the directory (and pod volume) name of an access
// credential's Secret: podtemplate.AccessCredentialVolumeSuffix.
const dirSuffix = "-access-cred"

// DefaultInterval is how often a Syncer reads the Secrets of guest-agent
// access credentials unless Syncer.Interval says otherwise.
const DefaultInterval = 5 * time.Second

// resync: guest-agent credentials are written again this long after the
// last success even when the Secrets did not change (a user in the guest
// may have edited authorized_keys), as KubeVirt's launcher.
const resync = 5 * time.Minute

// AgentOffline is KubeVirt's message of AccessCredentialsStatus while the
// guest agent does not answer.
const AgentOffline = "Guest agent is offline"

// secretFile is one key of a mounted Secret.
type secretFile struct {
	name string
	data []byte
}

// secretDir is where the launcher pod mounts the Secret, under its
// private directory priv.
func secretDir(priv, secret string) string {
	return filepath.Join(priv, "secret", secret+dirSuffix)
}

// readSecretDir reads the keys of a Secret the kubelet mounted at dir,
// sorted by name: each key is a link into ..data; the kubelet's own
// entries (names starting with "..") are left out, and so are links of
// keys an update removed (the kubelet swaps ..data first, then removes
// them).
func readSecretDir(dir string) ([]secretFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []secretFile
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a removed key, its link not yet removed by the kubelet
		}
		if err != nil {
			return nil, err
		}
		if fi.IsDir() {
			continue
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, secretFile{name: e.Name(), data: b})
	}
	return files, nil
}

// credentialSecret returns the Secret name and the field of credential i
// ("spec.accessCredentials[i].sshPublicKey"); "" when it names none
// (podtemplate refuses such a VMI).
func credentialSecret(ac *v1.AccessCredential, i int) (secret, field string) {
	field = "spec.accessCredentials[" + strconv.Itoa(i) + "]"
	switch {
	case ac.SSHPublicKey != nil:
		field += ".sshPublicKey"
		if s := ac.SSHPublicKey.Source.Secret; s != nil {
			secret = s.SecretName
		}
	case ac.UserPassword != nil:
		field += ".userPassword"
		if s := ac.UserPassword.Source.Secret; s != nil {
			secret = s.SecretName
		}
	}
	return secret, field
}

// readCredentialSecret reads the Secret of credential i, mounted under
// priv; the error names the field and the Secret.
func readCredentialSecret(priv string, ac *v1.AccessCredential, i int) (secret, field string, files []secretFile, err error) {
	secret, field = credentialSecret(ac, i)
	if secret == "" {
		return "", field, nil, fmt.Errorf("%s.source.secret.secretName: required", field)
	}
	dir := secretDir(priv, secret)
	files, err = readSecretDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return secret, field, nil, fmt.Errorf("%s: Secret %q is not mounted at %s (a launcher pod rendered without it?)", field, secret, dir)
	}
	if err != nil {
		return secret, field, nil, fmt.Errorf("%s: Secret %q mounted at %s: %w", field, secret, dir, err)
	}
	return secret, field, files, nil
}

// authorizedKeys returns the keys of a Secret's value: one per line, blank
// lines and # comments left out, each checked to be an SSH public key in
// authorized_keys form (options allowed).
func authorizedKeys(field, secret string, f secretFile) ([]string, error) {
	var keys []string
	for n, line := range strings.Split(string(f.data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err != nil {
			return nil, fmt.Errorf("%s: Secret %q, key %q, line %d: not an SSH public key in authorized_keys form: %v", field, secret, f.name, n+1, err)
		}
		keys = append(keys, line)
	}
	return keys, nil
}

// CloudInitPublicKeys returns the values of the cloud-init metadata's
// public keys for the credentials propagated by noCloud (configDrive
// false) or configDrive: each non-empty key of their Secrets, mounted
// under priv (the launcher's private directory), as KubeVirt puts them,
// in the order of the credentials and of the keys' names. Every line must
// be an SSH public key; the error names the field, the Secret and the key.
func CloudInitPublicKeys(priv string, vmi *v1.VirtualMachineInstance, configDrive bool) ([]string, error) {
	var values []string
	for i := range vmi.Spec.AccessCredentials {
		ac := &vmi.Spec.AccessCredentials[i]
		if ac.SSHPublicKey == nil {
			continue
		}
		pm := ac.SSHPublicKey.PropagationMethod
		if (configDrive && pm.ConfigDrive == nil) || (!configDrive && pm.NoCloud == nil) {
			continue
		}
		secret, field, files, err := readCredentialSecret(priv, ac, i)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			keys, err := authorizedKeys(field, secret, f)
			if err != nil {
				return nil, err
			}
			if len(keys) > 0 {
				values = append(values, string(f.data))
			}
		}
	}
	return values, nil
}

// PublicKeysMap numbers the public keys as KubeVirt's metadata does
// (the config drive's public_keys).
func PublicKeysMap(values []string) map[string]string {
	if len(values) == 0 {
		return nil
	}
	m := make(map[string]string, len(values))
	for i, v := range values {
		m[strconv.Itoa(i)] = v
	}
	return m
}

// NoCloudPublicKeys is the public-keys entry of NoCloud's meta-data (YAML;
// each value a JSON string, which YAML reads as a double-quoted scalar);
// "" without keys.
func NoCloudPublicKeys(values []string) (string, error) {
	if len(values) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("public-keys:\n")
	for i, v := range values {
		q, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "  %q: %s\n", strconv.Itoa(i), q)
	}
	return b.String(), nil
}

// guestCredentials is what the guest agent is to put in the guest.
type guestCredentials struct {
	// keys maps a user to the authorized keys it gets; users keeps the
	// users in order.
	keys  map[string][]string
	users []string
	// passwords maps a user to its password; pwUsers in order.
	passwords map[string]string
	pwUsers   []string
	// fields maps a user to the credentials that give it keys or a
	// password, for messages.
	fields map[string][]string
}

// ForGuestAgent reports whether vmi has credentials the guest agent
// propagates.
func ForGuestAgent(vmi *v1.VirtualMachineInstance) bool {
	for i := range vmi.Spec.AccessCredentials {
		ac := &vmi.Spec.AccessCredentials[i]
		if (ac.SSHPublicKey != nil && ac.SSHPublicKey.PropagationMethod.QemuGuestAgent != nil) ||
			(ac.UserPassword != nil && ac.UserPassword.PropagationMethod.QemuGuestAgent != nil) {
			return true
		}
	}
	return false
}

// readGuestCredentials reads the Secrets of the guest-agent credentials,
// mounted under priv.
func readGuestCredentials(priv string, vmi *v1.VirtualMachineInstance) (*guestCredentials, error) {
	g := &guestCredentials{keys: map[string][]string{}, passwords: map[string]string{}, fields: map[string][]string{}}
	for i := range vmi.Spec.AccessCredentials {
		ac := &vmi.Spec.AccessCredentials[i]
		switch {
		case ac.SSHPublicKey != nil && ac.SSHPublicKey.PropagationMethod.QemuGuestAgent != nil:
			secret, field, files, err := readCredentialSecret(priv, ac, i)
			if err != nil {
				return nil, err
			}
			var keys []string
			for _, f := range files {
				k, err := authorizedKeys(field, secret, f)
				if err != nil {
					return nil, err
				}
				keys = append(keys, k...)
			}
			for _, u := range ac.SSHPublicKey.PropagationMethod.QemuGuestAgent.Users {
				if _, ok := g.keys[u]; !ok {
					g.users = append(g.users, u)
					g.keys[u] = []string{}
				}
				g.keys[u] = append(g.keys[u], keys...)
				g.fields[u] = append(g.fields[u], fmt.Sprintf("%s (Secret %q)", field, secret))
			}
		case ac.UserPassword != nil && ac.UserPassword.PropagationMethod.QemuGuestAgent != nil:
			secret, field, files, err := readCredentialSecret(priv, ac, i)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				pw := strings.TrimSpace(string(f.data))
				if pw == "" {
					continue
				}
				if _, ok := g.passwords[f.name]; !ok {
					g.pwUsers = append(g.pwUsers, f.name)
				}
				g.passwords[f.name] = pw
				g.fields[f.name] = append(g.fields[f.name], fmt.Sprintf("%s (Secret %q, key %q)", field, secret, f.name))
			}
		}
	}
	return g, nil
}

// digest identifies the credentials, to tell whether they changed.
func (g *guestCredentials) digest() [sha256.Size]byte {
	b, _ := json.Marshal([]any{g.users, g.keys, g.pwUsers, g.passwords})
	return sha256.Sum256(b)
}

// Agent is the guest agent, as a Syncer uses it.
type Agent interface {
	// Ping fails when the agent does not answer.
	Ping(ctx context.Context) error
	// Call runs command with args and fails with the agent's error.
	Call(ctx context.Context, command string, args any) error
}

// Syncer keeps the guest-agent credentials of a VMI in the guest.
type Syncer struct {
	// PrivateDir is the launcher's private directory, under which the pod
	// mounts the Secrets.
	PrivateDir string
	// Interval is how often the Secrets are read; DefaultInterval when
	// zero.
	Interval time.Duration
	// Agent writes the credentials into the guest.
	Agent Agent
	// Report records the outcome of each attempt: ok, or the error's
	// message.
	Report func(ok bool, message string)
}

// Run keeps the guest-agent credentials of vmi in the guest (see the
// package comment) until ctx ends or done is closed.
func (s Syncer) Run(ctx context.Context, vmi *v1.VirtualMachineInstance, done <-chan struct{}) {
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	log := klog.FromContext(ctx)
	var applied [sha256.Size]byte
	var appliedAt time.Time
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		g, err := readGuestCredentials(s.PrivateDir, vmi)
		switch {
		case err != nil:
			s.Report(false, err.Error())
		case g.digest() != applied || time.Since(appliedAt) >= resync:
			if err := s.apply(ctx, g); err != nil {
				log.V(2).Info("access credentials not synchronized", "err", err.Error())
				s.Report(false, err.Error())
				applied = [sha256.Size]byte{}
			} else {
				log.V(2).Info("access credentials synchronized", "users", len(g.users), "passwords", len(g.pwUsers))
				s.Report(true, "")
				applied, appliedAt = g.digest(), time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// apply writes the keys and passwords through the guest agent:
// authorized_keys of each user replaced by its keys, then the passwords.
func (s Syncer) apply(ctx context.Context, g *guestCredentials) error {
	if err := s.Agent.Ping(ctx); err != nil {
		return fmt.Errorf("%s: %w", AgentOffline, err)
	}
	var errs []error
	for _, u := range g.users {
		keys := g.keys[u]
		if keys == nil {
			keys = []string{}
		}
		args := map[string]any{"username": u, "keys": keys, "reset": true}
		if err := s.Agent.Call(ctx, "guest-ssh-add-authorized-keys", args); err != nil {
			errs = append(errs, fmt.Errorf("%s: writing the authorized keys of user %q: %w", strings.Join(g.fields[u], ", "), u, err))
		}
	}
	for _, u := range g.pwUsers {
		args := map[string]any{"username": u, "password": base64.StdEncoding.EncodeToString([]byte(g.passwords[u])), "crypted": false}
		if err := s.Agent.Call(ctx, "guest-set-user-password", args); err != nil {
			errs = append(errs, fmt.Errorf("%s: setting the password of user %q: %w", strings.Join(g.fields[u], ", "), u, err))
		}
	}
	return errors.Join(errs...)
}
