package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmctl"
)

// cloudInitDone starts the line examples/vm-cloud.yaml's runcmd prints on
// the serial console once cloud-init has created the user and written the
// file; keysEnd ends cloud-init's SSH host key fingerprints, which come
// after it.
const (
	cloudInitDone = "VMKIT-CLOUD-INIT-DONE"
	keysEnd       = "-----END SSH HOST KEY FINGERPRINTS-----"
)

// The network data of the two guests: DHCP on the pod interface (found by
// its MAC) plus a static address, which shows that cloud-init applied it.
const (
	noCloudNetwork = `version: 2
ethernets:
  pod:
    match:
      macaddress: %q
    dhcp4: true
    addresses: [%s/24]
`
	configDriveNetwork = `{"links":[{"id":"pod","type":"phy","ethernet_mac_address":%q}],` +
		`"networks":[{"id":"dhcp","link":"pod","type":"ipv4_dhcp"},` +
		`{"id":"extra","link":"pod","type":"ipv4","ip_address":%q,"netmask":"255.255.255.0"}]}`
)

// TestCloudInit boots the cloud guest (hack/make-cloud-guest.sh: Debian 12
// with cloud-init, qemu-ga and OpenSSH from the vmkit/cloud-guest container
// disk) twice at once and checks inside each guest that cloud-init and the
// guest agent applied what the VMI gave them:
//   - vm-cloud is examples/vm-cloud.yaml as it is (NoCloud, inline user
//     data creating user vmkit without keys and writing /etc/vmkit/hello)
//     plus inline network data, spec.hostname, a blank disk on an empty
//     claim and three spec.accessCredentials, as KubeVirt users write them:
//     an SSH key from Secret accesscred-nocloud propagated by noCloud (the
//     launcher puts it in the NoCloud meta-data's public-keys, and
//     cloud-init gives it to Debian's default user "debian"), an SSH key
//     from Secret accesscred-agent propagated by qemuGuestAgent to user
//     vmkit (the launcher writes vmkit's authorized_keys through the guest
//     agent), and a password for vmkit from Secret accesscred-password
//     (userPassword, qemuGuestAgent);
//   - vm-cloud-drive is the same guest with a ConfigDrive on a SCSI CD-ROM:
//     the example's user data plus the test's SSH key for vmkit from a
//     Secret (key userdata), OpenStack network_data.json in base64, and the
//     VMI's name as hostname.
//
// For each: the runcmd line on the serial console names the user, hostname
// and file; the guest agent connects and reports Debian and the hostname
// (node agent and virt-api); SSH through virt-api's port-forward logs in as
// vmkit (the host key being one cloud-init made and printed) and sees the
// file, hostname and the network data's static address, sudo works; and
// while that session holds a terminal the guest agent's user list (through
// virt-api) shows vmkit.
//
// On vm-cloud the VMI gets AccessCredentialsSynchronized=True; SSH logs in
// as debian with the noCloud key and as vmkit with the agent's key, which
// is all of vmkit's authorized_keys; vmkit's password hash in /etc/shadow
// is the Secret's password; and replacing the agent Secret's key (the
// kubelet refreshes the mounted Secret) replaces vmkit's authorized_keys:
// the new key logs in, the file holds only it. The kubelet's refresh is
// waited for while vm-cloud-drive is checked. One guest serves the
// cloud-init and the access-credential checks: a cloud guest's boot under
// TCG costs about two CPU-minutes (docs/development.md).
func TestCloudInit(t *testing.T) {
	c := suite.Need(t)
	signer, authorizedKey := sshKey(t)
	ncSigner, ncKey := sshKey(t)
	gaSigner, gaKey := sshKey(t)
	const password = "Acc3ss-cred-pw"
	createSecret := func(name string, data map[string]string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, StringData: data}
		if _, err := c.Kube.CoreV1().Secrets("default").Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Kube.CoreV1().Secrets("default").Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}

	noCloud := framework.ExampleVM(t, "vm-cloud.yaml", "vm-cloud", v1.RunStrategyAlways)
	spec := &noCloud.Spec.Template.Spec
	spec.Hostname = "cloudy"
	spec.Domain.Devices.Interfaces[0].MacAddress = "02:00:00:c1:00:01"
	vol := volumeNamed(t, spec, "cloudinitdisk")
	if vol.CloudInitNoCloud == nil || vol.CloudInitNoCloud.UserData == "" {
		t.Fatal("examples/vm-cloud.yaml: volume cloudinitdisk must be cloudInitNoCloud with inline userData")
	}
	exampleUserData := vol.CloudInitNoCloud.UserData
	vol.CloudInitNoCloud.NetworkData = fmt.Sprintf(noCloudNetwork, "02:00:00:c1:00:01", "192.168.123.45")
	// A blank data disk on a fresh, empty Filesystem claim of 24 MiB: the
	// launcher creates its disk.img, and the guest sees a disk of the
	// claim's size (serial blankclaim).
	blank := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "vm-cloud-blank", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("24Mi")}}}}
	createClaim(t, c, blank)
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, v1.Disk{Name: "blank", Serial: "blankclaim",
		DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	spec.Volumes = append(spec.Volumes, v1.Volume{Name: "blank", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: blank.Name}}}})
	createSecret("accesscred-nocloud", map[string]string{"key": ncKey + "\n"})
	createSecret("accesscred-agent", map[string]string{"laptop": gaKey})
	createSecret("accesscred-password", map[string]string{"vmkit": password})
	secret := func(name string) *v1.AccessCredentialSecretSource {
		return &v1.AccessCredentialSecretSource{SecretName: name}
	}
	spec.AccessCredentials = []v1.AccessCredential{
		{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
			Source:            v1.SSHPublicKeyAccessCredentialSource{Secret: secret("accesscred-nocloud")},
			PropagationMethod: v1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &v1.NoCloudSSHPublicKeyAccessCredentialPropagation{}},
		}},
		{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
			Source: v1.SSHPublicKeyAccessCredentialSource{Secret: secret("accesscred-agent")},
			PropagationMethod: v1.SSHPublicKeyAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{
				Users: []string{"vmkit"}}},
		}},
		{UserPassword: &v1.UserPasswordAccessCredential{
			Source:            v1.UserPasswordAccessCredentialSource{Secret: secret("accesscred-password")},
			PropagationMethod: v1.UserPasswordAccessCredentialPropagationMethod{QemuGuestAgent: &v1.QemuGuestAgentUserPasswordAccessCredentialPropagation{}},
		}},
	}

	createSecret("vm-cloud-drive-userdata", map[string]string{"userdata": withAuthorizedKey(t, exampleUserData, "vmkit", authorizedKey)})
	drive := framework.ExampleVM(t, "vm-cloud.yaml", "vm-cloud-drive", v1.RunStrategyAlways)
	spec = &drive.Spec.Template.Spec
	spec.Domain.Devices.Interfaces[0].MacAddress = "02:00:00:c1:00:02"
	// The config drive as a CD-ROM on the SCSI bus (Debian's cloud kernel
	// has no AHCI driver for a SATA one): cloud-init finds it by its label.
	for i := range spec.Domain.Devices.Disks {
		if spec.Domain.Devices.Disks[i].Name == "cloudinitdisk" {
			spec.Domain.Devices.Disks[i].DiskDevice = v1.DiskDevice{CDRom: &v1.CDRomTarget{Bus: v1.DiskBusSCSI}}
		}
	}
	volumeNamed(t, spec, "cloudinitdisk").VolumeSource = v1.VolumeSource{CloudInitConfigDrive: &v1.CloudInitConfigDriveSource{
		UserDataSecretRef: &corev1.LocalObjectReference{Name: "vm-cloud-drive-userdata"},
		NetworkDataBase64: base64.StdEncoding.EncodeToString(fmt.Appendf(nil, configDriveNetwork, "02:00:00:c1:00:02", "192.168.124.45")),
	}}

	sub, err := vmctl.NewSubresources(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for _, vm := range []*v1.VirtualMachine{noCloud, drive} {
		framework.CreateVM(t, c, vm)
	}
	// booted waits for VMI name's cloud-init and guest agent and checks
	// what they report; it returns the console's lines.
	booted := func(name, hostname string) []string {
		framework.WaitVMI(t, c, name, "Running", running)
		// The console until cloud-init printed the host keys, which come
		// after the runcmd line.
		ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
		lines, err := c.Console(ctx, "default", name, keysEnd)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v (console so far: %q)\n%s", name, err, lines, framework.ComponentLogs(c))
		}
		seenDone := time.Since(began)
		i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, cloudInitDone) })
		if i < 0 {
			t.Fatalf("%s: no %s line on the console (the user data's runcmd did not run): %q", name, cloudInitDone, lines)
		}
		want := fmt.Sprintf("%s user=vmkit hostname=%s file=written by cloud-init from examples/vm-cloud.yaml", cloudInitDone, hostname)
		if !strings.Contains(lines[i], want) {
			t.Errorf("%s: console line %q, want it to hold %q", name, lines[i], want)
		}

		vmi := framework.WaitVMI(t, c, name, "AgentConnected with the guest's OS", func(vmi *v1.VirtualMachineInstance) bool {
			cond := vmi.VMICondition(v1.VirtualMachineInstanceAgentConnected)
			return cond != nil && cond.Status == corev1.ConditionTrue && vmi.Status.GuestOSInfo.ID != ""
		})
		// The guests boot at once and are checked one after the other: the
		// second's times are when the test looked.
		var toRunning time.Duration
		for _, p := range vmi.Status.PhaseTransitionTimestamps {
			if p.Phase == v1.Running {
				toRunning = p.PhaseTransitionTimestamp.Sub(began)
			}
		}
		t.Logf("%s: create → Running %v; cloud-init done seen at %v, AgentConnected at %v; guest OS %q", name, toRunning.Round(time.Second),
			seenDone.Round(time.Millisecond), time.Since(began).Round(time.Millisecond), vmi.Status.GuestOSInfo.PrettyName)
		if vmi.Status.GuestOSInfo.ID != "debian" || vmi.Status.GuestOSInfo.VersionID != "12" {
			t.Errorf("%s: status.guestOSInfo %+v, want Debian 12", name, vmi.Status.GuestOSInfo)
		}
		code, body, err := c.HandlerGet(t.Context(), "default", name, "guestosinfo")
		if err != nil {
			t.Fatal(err)
		}
		var info v1.VirtualMachineInstanceGuestAgentInfo
		if code != http.StatusOK || json.Unmarshal(body, &info) != nil || info.Hostname != hostname || info.OS.ID != "debian" {
			t.Errorf("%s: node agent's guestosinfo: %d %s; want hostname %s on debian", name, code, body, hostname)
		}
		if info, err := sub.GuestOSInfo(t.Context(), "default", name); err != nil || info.Hostname != hostname {
			t.Errorf("%s: virt-api's guestosinfo: %+v, %v; want hostname %s", name, info, err, hostname)
		}
		return lines
	}
	// applied checks, over SSH as vmkit, what cloud-init applied.
	applied := func(run func(string) string, name, hostname, address string) {
		out := run("id -un; hostname; cat /etc/vmkit/hello; sudo -n id -un; ip -4 -o addr show")
		for _, w := range []string{"vmkit\n" + hostname + "\nwritten by cloud-init from examples/vm-cloud.yaml\nroot\n", " inet " + address + "/24 "} {
			if !strings.Contains(out, w) {
				t.Errorf("%s: over SSH: %q, want it to hold %q", name, out, w)
			}
		}
	}
	synchronized := func(vmi *v1.VirtualMachineInstance) bool {
		cond := vmi.VMICondition(v1.VirtualMachineInstanceAccessCredentialsSynchronized)
		return cond != nil && cond.Status == corev1.ConditionTrue
	}

	// vm-cloud: NoCloud and the access credentials.
	name := noCloud.Name
	lines := booted(name, "cloudy")
	vmi := framework.WaitVMI(t, c, name, "AccessCredentialsSynchronized=True", synchronized)
	cond := vmi.VMICondition(v1.VirtualMachineInstanceAccessCredentialsSynchronized)
	t.Logf("%s: AccessCredentialsSynchronized=True (reason %s) %v after create", name, cond.Reason, time.Since(began).Round(time.Second))
	if cond.Reason != "AccessCredentialsSyncSuccess" {
		t.Errorf("%s: condition reason %q, want AccessCredentialsSyncSuccess", name, cond.Reason)
	}
	// The noCloud key: Debian's default user.
	withSSH(t, sub, name, "debian", ncSigner, lines, 2*time.Minute, func(run func(string) string) {
		if out := run("id -un; cat ~/.ssh/authorized_keys"); !strings.HasPrefix(out, "debian\n") || !strings.Contains(out, ncKey) {
			t.Errorf("%s: as debian over SSH: %q, want user debian whose authorized_keys hold the noCloud key", name, out)
		}
	})
	// The guest agent's key and password: vmkit.
	checkSSH(t, sub, name, gaSigner, lines, func(run func(cmd string) string) {
		applied(run, name, "cloudy", "192.168.123.45")
		if out := run("stat -c '%U %a' ~/.ssh ~/.ssh/authorized_keys"); out != "vmkit 700\nvmkit 600\n" {
			t.Errorf("%s: vmkit's ~/.ssh and authorized_keys: %q, want owned by vmkit, modes 700 and 600", name, out)
		}
		// qemu-ga writes the keys one a line, the last without a newline.
		if out := run("cat ~/.ssh/authorized_keys"); strings.TrimSpace(out) != gaKey {
			t.Errorf("%s: vmkit's authorized_keys: %q, want only the Secret's key %q", name, out, gaKey)
		}
		check := fmt.Sprintf(`sudo -n perl -e '$h = (getpwnam("vmkit"))[1]; print crypt(%q, $h) eq $h ? "match\n" : "differ\n"'`, password)
		if out := run(check); out != "match\n" {
			t.Errorf("%s: vmkit's password hash against the Secret's password: %q, want match", name, out)
		}
		// The disk on the empty claim: 24 MiB as the guest sees it.
		out := run("sudo -n blockdev --getsize64 /dev/disk/by-id/virtio-blankclaim")
		if strings.TrimSpace(out) != strconv.Itoa(24<<20) {
			t.Errorf("%s: the disk on the empty claim %s is %q bytes in the guest, want %d", name, blank.Name, strings.TrimSpace(out), 24<<20)
		} else {
			t.Logf("%s: the guest sees the disk on the empty claim %s as %s bytes", name, blank.Name, strings.TrimSpace(out))
		}
	})
	// A new key in the Secret replaces vmkit's authorized_keys: checked
	// after vm-cloud-drive, while the kubelet refreshes the mounted Secret.
	newSigner, newKey := sshKey(t)
	s, err := c.Kube.CoreV1().Secrets("default").Get(t.Context(), "accesscred-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"laptop": []byte(newKey)}
	if _, err := c.Kube.CoreV1().Secrets("default").Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := time.Now()

	// vm-cloud-drive: the config drive, and the user data's key.
	driveLines := booted(drive.Name, drive.Name)
	checkSSH(t, sub, drive.Name, signer, driveLines, func(run func(cmd string) string) {
		applied(run, drive.Name, drive.Name, "192.168.124.45")
		if out := run("cat ~/.ssh/authorized_keys"); !strings.Contains(out, authorizedKey) {
			t.Errorf("%s: vmkit's authorized_keys: %q, want the user data's key", drive.Name, out)
		}
		// The config drive is the guest's SCSI CD-ROM.
		out := run("sudo -n blkid -o value -s LABEL /dev/sr0; cat /sys/block/sr0/device/type")
		if !slices.Equal(strings.Fields(out), []string{"config-2", "5"}) {
			t.Errorf("%s: /dev/sr0 label and SCSI type %q, want the config drive (config-2) on a CD-ROM (type 5)", drive.Name, out)
		}
	})

	withSSH(t, sub, name, "vmkit", newSigner, lines, 4*time.Minute, func(run func(string) string) {
		t.Logf("%s: the replaced key logs in %v after the Secret's update", name, time.Since(updated).Round(time.Second))
		if out := run("cat ~/.ssh/authorized_keys"); strings.TrimSpace(out) != newKey {
			t.Errorf("%s: vmkit's authorized_keys after the update: %q, want only the new key", name, out)
		}
	})
	framework.WaitVMI(t, c, name, "still AccessCredentialsSynchronized=True", synchronized)
}

// checkSSH logs in to VMI name as vmkit (see sshLogin) and calls f with a
// function running a command (stdout and stderr). Meanwhile a second
// session holds a terminal, which logs vmkit in (utmp), until the guest
// agent's user list through virt-api shows the user.
func checkSSH(t *testing.T, sub *vmctl.Subresources, name string, signer ssh.Signer, lines []string, f func(run func(cmd string) string)) {
	t.Helper()
	client := sshLogin(t, sub, name, "vmkit", signer, lines, 2*time.Minute)
	defer client.Close()
	f(sshRunner(t, client, name, "vmkit"))

	term, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if err := term.RequestPty("xterm", 24, 80, ssh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	if err := term.Start("sleep 600"); err != nil {
		t.Fatal(err)
	}
	suite.WaitFor(t, name+": vmkit in the guest agent's user list", time.Minute, func() (bool, string) {
		users, err := sub.UserList(t.Context(), "default", name)
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(users.Items, func(u v1.VirtualMachineInstanceGuestOSUser) bool { return u.UserName == "vmkit" }),
			fmt.Sprintf("%+v", users.Items)
	})
}

// withSSH logs in to VMI name as user (see sshLogin) and calls f with a
// function running a command (stdout and stderr).
func withSSH(t *testing.T, sub *vmctl.Subresources, name, user string, signer ssh.Signer, lines []string, timeout time.Duration, f func(run func(cmd string) string)) {
	t.Helper()
	client := sshLogin(t, sub, name, user, signer, lines, timeout)
	defer client.Close()
	f(sshRunner(t, client, name, user))
}

// sshLogin logs in to VMI name as user with signer over SSH through
// virt-api's port-forward to port 22, retrying until timeout (sshd starts
// after cloud-init's network stage, a key may not be in place yet), and
// checks that the guest's host key is one whose fingerprint cloud-init
// printed on the console (lines).
func sshLogin(t *testing.T, sub *vmctl.Subresources, name, user string, signer ssh.Signer, lines []string, timeout time.Duration) *ssh.Client {
	t.Helper()
	var hostKey ssh.PublicKey
	var client *ssh.Client
	suite.WaitFor(t, fmt.Sprintf("%s: SSH as %s through port-forward", name, user), timeout, func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		conn, err := sub.Stream(ctx, "default", name, vmctl.PortForwardPath(22, "tcp"))
		if err != nil {
			return false, err.Error()
		}
		sc, chans, reqs, err := ssh.NewClientConn(conn, name, &ssh.ClientConfig{
			User: user,
			Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
			HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
				hostKey = key
				return nil
			},
			Timeout: 30 * time.Second,
		})
		if err != nil {
			conn.Close()
			return false, err.Error()
		}
		client = ssh.NewClient(sc, chans, reqs)
		return true, ""
	})
	fp := ssh.FingerprintSHA256(hostKey)
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, fp) }) {
		t.Errorf("%s: SSH host key %s %s is none of those cloud-init printed on the console", name, hostKey.Type(), fp)
	}
	return client
}

// sshRunner runs a command in a new session of client, returning its
// stdout and stderr; a failing command fails the test.
func sshRunner(t *testing.T, client *ssh.Client, name, user string) func(cmd string) string {
	return func(cmd string) string {
		s, err := client.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.CombinedOutput(cmd)
		if err != nil {
			t.Errorf("%s: %q over SSH as %s: %v: %s", name, cmd, user, err, out)
		}
		return string(out)
	}
}

// sshKey makes an Ed25519 key pair: the signer and the public key in
// authorized_keys form.
func sshKey(t testing.TB) (ssh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer, string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " vmkit-e2e"
}

// withAuthorizedKey adds key to the ssh_authorized_keys of user in
// #cloud-config user data.
func withAuthorizedKey(t testing.TB, userData, user, key string) string {
	t.Helper()
	const header = "#cloud-config\n"
	if !strings.HasPrefix(userData, header) {
		t.Fatalf("user data does not start with %q", header)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(userData), &cfg); err != nil {
		t.Fatal(err)
	}
	users, _ := cfg["users"].([]any)
	found := false
	for _, u := range users {
		if m, ok := u.(map[string]any); ok && m["name"] == user {
			keys, _ := m["ssh_authorized_keys"].([]any)
			m["ssh_authorized_keys"] = append(keys, key)
			found = true
		}
	}
	if !found {
		t.Fatalf("user data creates no user %q", user)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return header + string(out)
}

// volumeNamed returns the VMI spec's volume called name.
func volumeNamed(t testing.TB, spec *v1.VirtualMachineInstanceSpec, name string) *v1.Volume {
	t.Helper()
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	t.Fatalf("no volume %q", name)
	return nil
}

// BenchmarkCloudGuestStart creates examples/vm-cloud.yaml's VM as it is,
// one run after another, and reports create → VM Ready and create → the
// runcmd line of its user data on the console (cloud-init done), as
// nearest-rank percentiles.
func BenchmarkCloudGuestStart(b *testing.B) {
	c := suite.Need(b)
	var ready, done []time.Duration
	for i := 0; b.Loop(); i++ {
		vm := framework.ExampleVM(b, "vm-cloud.yaml", fmt.Sprintf("bench-cloud-%d", i), v1.RunStrategyAlways)
		began := time.Now()
		if _, err := c.Client.KubevirtV1().VirtualMachines("default").Create(b.Context(), vm, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitVMReady(b, c, vm.Name)
		ready = append(ready, time.Since(began))
		ctx, cancel := context.WithTimeout(b.Context(), 6*time.Minute)
		lines, err := c.Console(ctx, "default", vm.Name, cloudInitDone)
		cancel()
		if err != nil {
			b.Fatalf("%s: %v (console so far: %q)", vm.Name, err, lines)
		}
		done = append(done, time.Since(began))
		deleteAndWait(b, c, vm.Name)
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"ready", ready}, {"cloud-init", done}} {
		reportPercentiles(b, m.name, m.d)
	}
	b.ReportMetric(0, "ns/op")
}
