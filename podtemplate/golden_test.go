package podtemplate

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

var update = flag.Bool("update", false, "rewrite the golden pods under testdata/")

const goldenHeader = "# Rendered by podtemplate from testdata/%s; regenerate with `go test ./podtemplate -update`.\n"

// goldenCase is one VMI (testdata/<vmi>.vmi.yaml) rendered into
// testdata/<name>.pod.yaml.
type goldenCase struct {
	name string
	// vmi names the input file when it differs from name.
	vmi string
	// emulation renders with Config.EmulationAllowed.
	emulation bool
	// featureGates renders with these Config.FeatureGates.
	featureGates []string
	// migration renders a migration target for testdata/<name>.migration.yaml.
	migration bool
	// level is the strictest Pod Security level that admits the pod:
	// "restricted", "baseline" or "privileged".
	level string
}

var goldenCases = []goldenCase{
	{name: "containerdisk-minimal", level: "restricted"},
	{name: "containerdisk-emulation", vmi: "containerdisk-minimal", emulation: true, level: "restricted"},
	{name: "containerdisk-root", vmi: "containerdisk-minimal", featureGates: []string{RootGate}, level: "baseline"}, // root, NET_BIND_SERVICE
	{name: "pvc-cloudinit-two-nics", level: "restricted"},
	{name: "dedicated-cpus", level: "restricted"},
	{name: "dedicated-cpus-root", vmi: "dedicated-cpus", featureGates: []string{RootGate}, level: "privileged"}, // SYS_NICE to pin vCPUs
	{name: "kernel-boot", level: "restricted"},
	{name: "migration-target", migration: true, level: "restricted"},
	{name: "storage-kinds", featureGates: []string{HostDiskGate}, level: "privileged"}, // a hostPath volume for the host disk
	{name: "probes", level: "restricted"},
	{name: "passt", level: "restricted"}, // the Localhost seccomp profile and ip_unprivileged_port_start 0 are both allowed
}

func (c goldenCase) vmiFile() string {
	if c.vmi != "" {
		return c.vmi + ".vmi.yaml"
	}
	return c.name + ".vmi.yaml"
}

// testConfig is the Config of the golden pods. Claims named block-* are
// block devices.
func testConfig() Config {
	return Config{
		LauncherImage: "quay.io/kubevirt/virt-launcher:v1.5.0",
		ClaimVolumeMode: func(_, claim string) (corev1.PersistentVolumeMode, error) {
			if len(claim) > 6 && claim[:6] == "block-" {
				return corev1.PersistentVolumeBlock, nil
			}
			return corev1.PersistentVolumeFilesystem, nil
		},
	}
}

func newTestRenderer(t testing.TB, edit func(*Config)) *Renderer {
	t.Helper()
	cfg := testConfig()
	if edit != nil {
		edit(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// readObject decodes a testdata YAML file strictly: a field the types do not
// know is an error, not a silent drop.
func readObject(t testing.TB, file string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("testdata/%s: %v", file, err)
	}
}

// renderer is the Renderer of a golden case: testConfig with the case's
// emulation and feature gates.
func (c goldenCase) renderer(t testing.TB) *Renderer {
	t.Helper()
	return newTestRenderer(t, func(cfg *Config) {
		cfg.EmulationAllowed = c.emulation
		cfg.FeatureGates = c.featureGates
	})
}

// renderGolden renders a golden case's pod.
func renderGolden(t testing.TB, c goldenCase) *corev1.Pod {
	t.Helper()
	r := c.renderer(t)
	vmi := &v1.VirtualMachineInstance{}
	readObject(t, c.vmiFile(), vmi)
	var pod *corev1.Pod
	var err error
	if c.migration {
		migration := &v1.VirtualMachineInstanceMigration{}
		readObject(t, c.name+".migration.yaml", migration)
		pod, err = r.RenderMigrationTargetPod(vmi, migration)
	} else {
		pod, err = r.RenderLaunchPod(vmi)
	}
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return pod
}

// TestGoldenPods compares every golden case's pod with its committed YAML;
// `go test ./podtemplate -update` rewrites the files, and the diff under
// testdata/ is the behaviour change a reviewer reads.
func TestGoldenPods(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			pod := renderGolden(t, c)
			out, err := yaml.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			header := fmt.Sprintf(goldenHeader, c.vmiFile())
			if c.emulation {
				header += "# With Config.EmulationAllowed.\n"
			}
			if len(c.featureGates) > 0 {
				header += fmt.Sprintf("# With Config.FeatureGates %q.\n", c.featureGates)
			}
			if c.migration {
				header += "# As the target of testdata/" + c.name + ".migration.yaml.\n"
			}
			got := []byte(header + string(out))
			file := filepath.Join("testdata", c.name+".pod.yaml")
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run `go test ./podtemplate -update` to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s differs from the rendered pod (-file +rendered); if the change is intended, run `go test ./podtemplate -update`:\n%s", file, diff)
			}
			checkPodProperties(t, pod)
		})
	}
}
