package launcher

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

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Access credentials (spec.accessCredentials), as KubeVirt's launcher
// handles them. The launcher pod mounts the Secret of each credential at
// <PrivateDir>/secret/<secret>-access-cred (podtemplate); every file of it
// is one key of the Secret.
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
// The guest-agent credentials are kept in sync while the guest runs: the
// launcher reads the Secrets every AccessCredentialInterval and writes them
// again when they changed (the kubelet refreshes a Secret volume within
// about a minute of an edit), when the last attempt failed, and every
// accessCredentialResync regardless, as KubeVirt's launcher does every 5
// minutes. The outcome is Status.AccessCredentials, which the node agent
// turns into the VMI condition AccessCredentialsSynchronized.

// accessCredentialDirSuffix ends the directory (and pod volume) name of an
// access credential's Secret: podtemplate.AccessCredentialVolumeSuffix.
const accessCredentialDirSuffix = "-access-cred"

// DefaultAccessCredentialInterval is how often the launcher reads the
// Secrets of guest-agent access credentials unless
// Config.AccessCredentialInterval says otherwise.
const DefaultAccessCredentialInterval = 5 * time.Second

// accessCredentialResync: guest-agent credentials are written again this
// long after the last success even when the Secrets did not change (a user
// in the guest may have edited authorized_keys), as KubeVirt's launcher.
const accessCredentialResync = 5 * time.Minute

// Messages of AccessCredentialsStatus.
const (
	// accessCredentialsAgentOffline is KubeVirt's message while the guest
	// agent does not answer.
	accessCredentialsAgentOffline = "Guest agent is offline"
)

// secretFile is one key of a mounted Secret.
type secretFile struct {
	name string
	data []byte
}

// accessCredentialDir is where the launcher pod mounts the Secret.
func (l *Launcher) accessCredentialDir(secret string) string {
	return filepath.Join(l.cfg.PrivateDir, "secret", secret+accessCredentialDirSuffix)
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

// readCredentialSecret reads the Secret of credential i; the error names
// the field and the Secret.
func (l *Launcher) readCredentialSecret(ac *v1.AccessCredential, i int) (secret, field string, files []secretFile, err error) {
	secret, field = credentialSecret(ac, i)
	if secret == "" {
		return "", field, nil, fmt.Errorf("%s.source.secret.secretName: required", field)
	}
	dir := l.accessCredentialDir(secret)
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

// cloudInitPublicKeys returns the values of the cloud-init metadata's
// public keys for the credentials propagated by noCloud (configDrive
// false) or configDrive: each non-empty key of their Secrets, as KubeVirt
// puts them, in the order of the credentials and of the keys' names.
// Every line must be an SSH public key; the error names the field, the
// Secret and the key.
func (l *Launcher) cloudInitPublicKeys(vmi *v1.VirtualMachineInstance, configDrive bool) ([]string, error) {
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
		secret, field, files, err := l.readCredentialSecret(ac, i)
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

// publicKeysMap numbers the public keys as KubeVirt's metadata does.
func publicKeysMap(values []string) map[string]string {
	if len(values) == 0 {
		return nil
	}
	m := make(map[string]string, len(values))
	for i, v := range values {
		m[strconv.Itoa(i)] = v
	}
	return m
}

// noCloudPublicKeys is the public-keys entry of NoCloud's meta-data (YAML;
// each value a JSON string, which YAML reads as a double-quoted scalar);
// "" without keys.
func noCloudPublicKeys(values []string) (string, error) {
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

// hasGuestAgentCredentials reports whether vmi has credentials the guest
// agent propagates.
func hasGuestAgentCredentials(vmi *v1.VirtualMachineInstance) bool {
	for i := range vmi.Spec.AccessCredentials {
		ac := &vmi.Spec.AccessCredentials[i]
		if (ac.SSHPublicKey != nil && ac.SSHPublicKey.PropagationMethod.QemuGuestAgent != nil) ||
			(ac.UserPassword != nil && ac.UserPassword.PropagationMethod.QemuGuestAgent != nil) {
			return true
		}
	}
	return false
}

// readGuestCredentials reads the Secrets of the guest-agent credentials.
func (l *Launcher) readGuestCredentials(vmi *v1.VirtualMachineInstance) (*guestCredentials, error) {
	g := &guestCredentials{keys: map[string][]string{}, passwords: map[string]string{}, fields: map[string][]string{}}
	for i := range vmi.Spec.AccessCredentials {
		ac := &vmi.Spec.AccessCredentials[i]
		switch {
		case ac.SSHPublicKey != nil && ac.SSHPublicKey.PropagationMethod.QemuGuestAgent != nil:
			secret, field, files, err := l.readCredentialSecret(ac, i)
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
			secret, field, files, err := l.readCredentialSecret(ac, i)
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

// syncAccessCredentials keeps the guest-agent credentials of vmi in the
// guest while the domain runs (see the comment at the top of the file).
func (l *Launcher) syncAccessCredentials(ctx context.Context, vmi *v1.VirtualMachineInstance) {
	interval := l.cfg.AccessCredentialInterval
	if interval <= 0 {
		interval = DefaultAccessCredentialInterval
	}
	log := klog.FromContext(ctx).WithValues("vmi", l.key())
	var applied [sha256.Size]byte
	var appliedAt time.Time
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		g, err := l.readGuestCredentials(vmi)
		switch {
		case err != nil:
			l.setAccessCredentials(false, err.Error())
		case g.digest() != applied || time.Since(appliedAt) >= accessCredentialResync:
			if err := l.applyGuestCredentials(ctx, g); err != nil {
				log.V(2).Info("access credentials not synchronized", "err", err.Error())
				l.setAccessCredentials(false, err.Error())
				applied = [sha256.Size]byte{}
			} else {
				log.V(2).Info("access credentials synchronized", "users", len(g.users), "passwords", len(g.pwUsers))
				l.setAccessCredentials(true, "")
				applied, appliedAt = g.digest(), time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-l.done:
			return
		case <-tick.C:
		}
	}
}

// setAccessCredentials records the outcome for Status.
func (l *Launcher) setAccessCredentials(ok bool, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.accessCreds = &client.AccessCredentialsStatus{Succeeded: ok, Message: msg}
}

// applyGuestCredentials writes the keys and passwords through the guest
// agent: authorized_keys of each user replaced by its keys, then the
// passwords.
func (l *Launcher) applyGuestCredentials(ctx context.Context, g *guestCredentials) error {
	if _, err := l.agentCommand(ctx, "guest-ping", l.agentTimeout()); err != nil {
		return fmt.Errorf("%s: %w", accessCredentialsAgentOffline, err)
	}
	var errs []error
	for _, u := range g.users {
		keys := g.keys[u]
		if keys == nil {
			keys = []string{}
		}
		args := map[string]any{"username": u, "keys": keys, "reset": true}
		if err := l.agentCall(ctx, "guest-ssh-add-authorized-keys", args); err != nil {
			errs = append(errs, fmt.Errorf("%s: writing the authorized keys of user %q: %w", strings.Join(g.fields[u], ", "), u, err))
		}
	}
	for _, u := range g.pwUsers {
		args := map[string]any{"username": u, "password": base64.StdEncoding.EncodeToString([]byte(g.passwords[u])), "crypted": false}
		if err := l.agentCall(ctx, "guest-set-user-password", args); err != nil {
			errs = append(errs, fmt.Errorf("%s: setting the password of user %q: %w", strings.Join(g.fields[u], ", "), u, err))
		}
	}
	return errors.Join(errs...)
}

// agentCall runs a guest agent command with arguments, for the launcher's
// own use (never for its clients: see IsGuestAgentCommand).
func (l *Launcher) agentCall(ctx context.Context, command string, args any) error {
	domain, err := l.startedDomain(command)
	if err != nil {
		return err
	}
	b, err := agentRequest(command, args)
	if err != nil {
		return err
	}
	timeout := l.agentTimeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := l.h.GuestAgentCommand(ctx, domain, b)
	if err != nil {
		return fmt.Errorf("%s: %w", command, agentTimedOut(err, timeout))
	}
	_, err = parseAgentReply(command, out)
	return err
}

// agentRequest is the guest agent's JSON request for command with args.
func agentRequest(command string, args any) (string, error) {
	b, err := json.Marshal(struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments"`
	}{command, args})
	return string(b), err
}
