package podtemplate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNewDefaults(t *testing.T) {
	r, err := New(Config{LauncherImage: "virt-launcher"})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		LauncherImage:                 "virt-launcher",
		ImagePullPolicy:               corev1.PullIfNotPresent,
		ShareDir:                      "/var/run/kubevirt",
		EphemeralDiskDir:              "/var/run/kubevirt-ephemeral-disks",
		ContainerDiskDir:              "/var/run/kubevirt/container-disks",
		HotplugDiskDir:                "/var/run/kubevirt/hotplug-disks",
		OVMFPath:                      "/usr/share/OVMF",
		QEMUTimeout:                   240 * time.Second,
		TerminationGracePeriodSeconds: 30,
		LessPVCSpaceToleration:        10,
		CPUAllocationRatio:            10,
		Overhead:                      OverheadPolicy{Ratio: 1},
	}
	if diff := cmp.Diff(want, r.Config(), cmpopts.IgnoreFields(Config{}, "ClaimVolumeMode"), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if r.qemuTimeout != "240s" {
		t.Errorf("--qemu-timeout %q, want 240s", r.qemuTimeout)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no image", func(c *Config) { c.LauncherImage = "" }, "Config.LauncherImage: required"},
		{"image with space", func(c *Config) { c.LauncherImage = "a b" }, `Config.LauncherImage: "a b" contains white space`},
		{"pull policy", func(c *Config) { c.ImagePullPolicy = "Sometimes" }, `Config.ImagePullPolicy: "Sometimes" is not Always, IfNotPresent or Never`},
		{"pull secret", func(c *Config) { c.ImagePullSecrets = []string{"ok", "Not_OK"} }, `Config.ImagePullSecrets[1]: "Not_OK"`},
		{"relative dir", func(c *Config) { c.ShareDir = "var/run" }, `Config.ShareDir: "var/run" must be a clean absolute path other than /`},
		{"unclean dir", func(c *Config) { c.ContainerDiskDir = "/var/run/../x" }, `Config.ContainerDiskDir: "/var/run/../x" must be a clean`},
		{"root dir", func(c *Config) { c.EphemeralDiskDir = "/" }, `Config.EphemeralDiskDir: "/" must be`},
		{"negative timeout", func(c *Config) { c.QEMUTimeout = -time.Second }, "Config.QEMUTimeout: -1s must not be negative"},
		{"negative grace", func(c *Config) { c.TerminationGracePeriodSeconds = -1 }, "Config.TerminationGracePeriodSeconds: -1 must not be negative"},
		{"toleration", func(c *Config) { c.LessPVCSpaceToleration = 101 }, "Config.LessPVCSpaceToleration: 101 is more than 100 percent"},
		{"ratio", func(c *Config) { c.CPUAllocationRatio = -2 }, "Config.CPUAllocationRatio: -2 must be at least 1"},
		{"overhead ratio", func(c *Config) { c.Overhead.Ratio = 0.5 }, "Config.Overhead.Ratio: 0.5 must be between 1 and 100"},
		{"overhead NaN", func(c *Config) { c.Overhead.Ratio = math.NaN() }, "Config.Overhead.Ratio: NaN"},
		{"overhead extra", func(c *Config) { c.Overhead.Extra = resource.MustParse("-1Mi") }, "Config.Overhead.Extra: -1Mi must not be negative"},
		{"reserved label", func(c *Config) { c.ExtraLabels = map[string]string{"kubevirt.io": "x"} }, `Config.ExtraLabels: "kubevirt.io" is set by the renderer`},
		{"bad label value", func(c *Config) { c.ExtraLabels = map[string]string{"team": "a b"} }, `Config.ExtraLabels: value of "team"`},
		{"empty feature gate", func(c *Config) { c.FeatureGates = []string{HostDiskGate, ""} }, `Config.FeatureGates[1]: "" is not a feature gate name`},
		{"feature gates in one string", func(c *Config) { c.FeatureGates = []string{"HostDisk,Snapshot"} }, `Config.FeatureGates[0]: "HostDisk,Snapshot" is not a feature gate name`},
		{"reserved annotation", func(c *Config) { c.ExtraAnnotations = map[string]string{"kubevirt.io/domain": "x"} }, `Config.ExtraAnnotations: "kubevirt.io/domain" is set by the renderer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			tt.edit(&cfg)
			r, err := New(cfg)
			if err == nil {
				t.Fatalf("New accepted the config: %+v", r.Config())
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "podtemplate: ") {
				t.Errorf("error %q, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestNewReportsEveryBadField(t *testing.T) {
	_, err := New(Config{ShareDir: "x", CPUAllocationRatio: -1})
	for _, field := range []string{"LauncherImage", "ShareDir", "CPUAllocationRatio"} {
		if err == nil || !strings.Contains(err.Error(), "Config."+field) {
			t.Errorf("error %v does not name Config.%s", err, field)
		}
	}
}

func TestRendererKeepsItsOwnConfig(t *testing.T) {
	labels := map[string]string{"team": "a"}
	secrets := []string{"s1"}
	gates := []string{HostDiskGate}
	r, err := New(Config{LauncherImage: "img", ExtraLabels: labels, ImagePullSecrets: secrets, FeatureGates: gates})
	if err != nil {
		t.Fatal(err)
	}
	labels["team"] = "changed"
	secrets[0] = "changed"
	gates[0] = "changed"
	got := r.Config()
	if got.ExtraLabels["team"] != "a" || got.ImagePullSecrets[0] != "s1" || got.FeatureGates[0] != HostDiskGate {
		t.Errorf("the caller's later changes reached the renderer: %v %v %v", got.ExtraLabels, got.ImagePullSecrets, got.FeatureGates)
	}
	got.ExtraLabels["team"] = "changed again"
	if r.Config().ExtraLabels["team"] != "a" {
		t.Error("Config() returns the renderer's own map")
	}
}

func TestQEMUTimeoutRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Millisecond:        "1s",
		90 * time.Second:        "90s",
		5*time.Minute + 1:       "301s",
		240 * time.Second / 2:   "120s",
		time.Duration(0):        "240s", // the default
		1500 * time.Millisecond: "2s",
	} {
		r := newTestRenderer(t, func(c *Config) { c.QEMUTimeout = d })
		if r.qemuTimeout != want {
			t.Errorf("QEMUTimeout %v: --qemu-timeout %s, want %s", d, r.qemuTimeout, want)
		}
	}
}
