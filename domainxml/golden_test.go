package domainxml

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.xml from the converter's output")

// goldenCases pairs each testdata/<name>.vmi.yaml with the node options it
// converts under; the output is testdata/<name>.xml.
var goldenCases = []struct {
	name string
	opts Options
}{
	{"minimal-containerdisk", Options{}},
	{"cloudinit-pvc-2nics", Options{Emulation: true}},
	{"efi-secureboot", Options{}},
	{"kernel-boot", Options{Emulation: true}},
	{"dedicated-hugepages", Options{CPUSet: []uint{2, 3, 4, 5, 6}}},
	{"windows-hyperv", Options{Disks: map[string]DiskSource{"pvcdisk": {Path: "/var/run/kubevirt-private/vmi-disks/pvcdisk/disk.img"}}}},
	{"many-disks", Options{
		Emulation: true,
		Disks: map[string]DiskSource{
			"db":   {Path: "/dev/db", Block: true},
			"root": {Path: "/var/run/kubevirt-private/vmi-disks/root/disk.qcow2", Format: "qcow2"},
		},
		CloudInitISOs: map[string]string{"cloudinit": "/var/run/cloud-init/storage-zoo.iso"},
		SerialPTY:     true,
	}},
}

// TestGolden converts every golden VMI, compares the XML with
// testdata/<name>.xml (rewritten with -update) and validates it against
// libvirt's RNG schema with virt-xml-validate.
func TestGolden(t *testing.T) {
	validator := requireXMLValidator(t)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			vmi := loadVMI(t, filepath.Join("testdata", tc.name+".vmi.yaml"))
			dom, err := Convert(vmi, tc.opts)
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			got, err := Marshal(dom)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			golden := filepath.Join("testdata", tc.name+".xml")
			if *update {
				if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./domainxml -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got+"\n"); diff != "" {
				t.Errorf("domain XML differs from %s (-golden +got); rerun with -update if intended:\n%s", golden, diff)
			}
			validateXML(t, validator, golden)
		})
	}
}

// loadVMI reads a VMI manifest, rejecting unknown fields.
func loadVMI(t testing.TB, path string) *v1.VirtualMachineInstance {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vmi := &v1.VirtualMachineInstance{}
	if err := yaml.UnmarshalStrict(data, vmi); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return vmi
}

// requireXMLValidator returns the path of virt-xml-validate or fails the
// test saying how to install it.
func requireXMLValidator(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("virt-xml-validate")
	if err != nil {
		t.Fatalf("virt-xml-validate is not installed (Debian packages libvirt-clients and libxml2-utils); install it with `make test-deps` or hack/setup-libvirt.sh")
	}
	return p
}

// validateXML checks the domain XML in file against libvirt's schema.
func validateXML(t testing.TB, validator, file string) {
	t.Helper()
	out, err := exec.Command(validator, file, "domain").CombinedOutput()
	if err != nil {
		data, _ := os.ReadFile(file)
		t.Errorf("virt-xml-validate %s domain: %v\n%s\n%s", file, err, strings.TrimSpace(string(out)), data)
	}
}
