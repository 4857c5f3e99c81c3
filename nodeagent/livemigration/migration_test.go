package livemigration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/nodeagent/internal/safepath"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestMigrateRequest(t *testing.T) {
	mem := func(q string) v1.DomainSpec {
		return v1.DomainSpec{Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}}
	}
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	i64 := func(v int64) *int64 { return &v }
	yes := func() *bool { b := true; return &b }
	for _, tc := range []struct {
		name  string
		agent Config
		spec  v1.DomainSpec
		cfg   *v1.MigrationConfiguration
		want  client.MigrateRequest
	}{
		{"agent defaults, small guest: one GiB's timeout", Config{}, mem("128Mi"), nil,
			client.MigrateRequest{MigrationUID: "m", Timeout: metav1.Duration{Duration: 150 * time.Second}, ProgressTimeout: metav1.Duration{Duration: 150 * time.Second}}},
		{"4 GiB guest", Config{BandwidthMiB: 64, AllowAutoConverge: true}, mem("4Gi"), nil,
			client.MigrateRequest{MigrationUID: "m", BandwidthMiB: 64, AutoConverge: true, Timeout: metav1.Duration{Duration: 600 * time.Second}, ProgressTimeout: metav1.Duration{Duration: 150 * time.Second}}},
		{"no timeout", Config{CompletionTimeoutPerGiB: -1, ProgressTimeout: -1}, mem("1Gi"), nil,
			client.MigrateRequest{MigrationUID: "m"}},
		{"the controller's migrationConfiguration wins", Config{BandwidthMiB: 64, ParallelConnections: 4}, mem("2Gi"),
			&v1.MigrationConfiguration{BandwidthPerMigration: q("32Mi"), CompletionTimeoutPerGiB: i64(10), ProgressTimeout: i64(30), AllowPostCopy: yes(), UnsafeMigrationOverride: yes()},
			client.MigrateRequest{MigrationUID: "m", BandwidthMiB: 32, PostCopy: true, Unsafe: true, ParallelConnections: 4, Timeout: metav1.Duration{Duration: 20 * time.Second}, ProgressTimeout: metav1.Duration{Duration: 30 * time.Second}}},
		{"bandwidth below 1 MiB/s and a zero timeout", Config{}, mem("1Gi"),
			&v1.MigrationConfiguration{BandwidthPerMigration: q("100Ki"), CompletionTimeoutPerGiB: i64(0), ProgressTimeout: i64(0)},
			client.MigrateRequest{MigrationUID: "m", BandwidthMiB: 1}},
	} {
		vmi := &v1.VirtualMachineInstance{Spec: v1.VirtualMachineInstanceSpec{Domain: tc.spec},
			Status: v1.VirtualMachineInstanceStatus{MigrationState: &v1.VirtualMachineInstanceMigrationState{MigrationUID: "m", MigrationConfiguration: tc.cfg}}}
		if diff := cmp.Diff(tc.want, tc.agent.MigrateRequest(vmi)); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tc.name, diff)
		}
	}
}

// The migration sockets' directories are resolved as the launcher sees its
// own file system: its image's /var/run is a link to /run, and a link that
// leads out of its root stays inside it.
func TestLauncherDirsInRoot(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"run/kubevirt", "run/libvirt", "var", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/run", filepath.Join(root, "var", "run")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(root, "run", "kubevirt", "migrationproxy")); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/var/run/libvirt":                 filepath.Join(root, "run", "libvirt"),
		"/var/run/kubevirt/migrationproxy": filepath.Join(root, "etc"),
		"/../../etc":                       filepath.Join(root, "etc"),
	} {
		d, err := safepath.MkdirAllInRoot(root, path, 0o755)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		got, err := d.Stat()
		d.Close()
		wantFI, _ := os.Stat(want)
		if err != nil || !os.SameFile(got, wantFI) {
			t.Errorf("%s opened another directory than %s (%v)", path, want, err)
		}
	}
}
