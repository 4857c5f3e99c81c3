package libvirtenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"
)

const guestMarker = "GUEST-BOOTED"

// domainTemplate is a transient TCG domain that direct-boots the test guest
// with its first serial port written to a file. on_poweroff=destroy makes the
// domain vanish once the guest powers itself off.
var domainTemplate = template.Must(template.New("domain").Parse(`<domain type='qemu'>
  <name>{{.Name}}</name>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{{.Kernel}}</kernel>
    <initrd>{{.Initrd}}</initrd>
    <cmdline>console=ttyS0 panic=-1 quiet</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <serial type='file'>
      <source path='{{.SerialLog}}' append='off'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
`))

// TestLibvirtBootsGuest proves that the installed libvirt + QEMU boot the real
// test guest: a transient domain must print the guest's marker on its serial
// console within 60 s and then power off.
func TestLibvirtBootsGuest(t *testing.T) {
	uri := RequireLibvirt(t)
	guest := RequireGuest(t)
	if strings.HasPrefix(uri, "test:") {
		t.Fatalf("%s=%s is libvirt's mock driver, which runs no guest; this test needs QEMU (unset %s to use %s)",
			LibvirtURIEnv, uri, LibvirtURIEnv, DefaultLibvirtURI)
	}

	dir := t.TempDir()
	name := "vmkit-testenv-" + randomDomainSuffix(t)
	serialLog := filepath.Join(dir, "serial.log")
	xmlPath := filepath.Join(dir, "domain.xml")

	var xml bytes.Buffer
	if err := domainTemplate.Execute(&xml, map[string]string{
		"Name":      name,
		"Kernel":    guest.Kernel,
		"Initrd":    guest.Initramfs,
		"SerialLog": serialLog,
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(xmlPath, xml.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if validator, err := exec.LookPath("virt-xml-validate"); err == nil {
		if out, err := exec.Command(validator, xmlPath, "domain").CombinedOutput(); err != nil {
			t.Fatalf("domain XML does not validate: %v\n%s\n%s", err, out, xml.String())
		}
	}

	// Registered after t.TempDir, so it runs before the directory is removed.
	t.Cleanup(func() {
		if domainExists(uri, name) {
			if out, err := runVirsh(context.Background(), uri, "destroy", name); err != nil && domainExists(uri, name) {
				t.Errorf("cleanup: virsh destroy %s: %v\n%s", name, err, out)
			}
		}
	})

	start := time.Now()
	if out, err := runVirsh(context.Background(), uri, "create", xmlPath); err != nil {
		t.Fatalf("virsh create: %v\n%s\ndomain XML:\n%s", err, out, xml.String())
	}

	deadline := start.Add(60 * time.Second)
	for poll := 1; ; poll++ {
		gone := poll%20 == 0 && !domainExists(uri, name) // checked about once a second
		data, _ := os.ReadFile(serialLog)
		if i := bytes.Index(data, []byte(guestMarker)); i >= 0 {
			line, _, _ := bytes.Cut(data[i:], []byte("\n"))
			t.Logf("%s booted in %v: %s", name, time.Since(start).Round(time.Millisecond),
				strings.TrimSpace(string(line)))
			break
		}
		if gone || time.Now().After(deadline) {
			why := "within 60 s"
			if gone {
				why = "before the domain stopped"
			}
			t.Fatalf("no %s on the serial console of %s %s; serial log:\n%s\nQEMU log (/var/log/libvirt/qemu/%s.log):\n%s",
				guestMarker, name, why, data, name, tailFile(fmt.Sprintf("/var/log/libvirt/qemu/%s.log", name), 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The guest powers off right after the marker; the transient domain must
	// then disappear (this checks ACPI power-off and on_poweroff=destroy).
	for deadline := time.Now().Add(30 * time.Second); domainExists(uri, name); {
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists 30 s after the guest printed %s (power-off failed)", name, guestMarker)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s powered off %v after start", name, time.Since(start).Round(time.Millisecond))
}

// runVirsh runs "virsh -q -c uri args..." with a 60 s timeout.
func runVirsh(ctx context.Context, uri string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "virsh", append([]string{"-q", "-c", uri}, args...)...).CombinedOutput()
}

// domainExists reports whether libvirt still knows the domain. Errors other
// than "not found" count as existing, so cleanup still tries to destroy it.
func domainExists(uri, name string) bool {
	out, err := runVirsh(context.Background(), uri, "domstate", name)
	return err == nil || !bytes.Contains(out, []byte("failed to get domain"))
}

func randomDomainSuffix(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// tailFile returns at most the last n bytes of a file, or a note that it cannot
// be read.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}
