package launcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// startMigratable is start with a launcher that knows its libvirt socket.
func startMigratable(t *testing.T) *fixture {
	t.Helper()
	return startWith(t, func(c *Config) {
		c.LibvirtSocket, c.LibvirtSession = "/run/libvirt/libvirt-sock", true
	})
}

func TestMigrationSourceEndsMigrated(t *testing.T) {
	f := startMigratable(t)
	ctx := context.Background()
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatal(err)
	}
	f.h.HoldMigrations()
	st, err := f.c.Migrate(ctx, client.MigrateRequest{MigrationUID: "m1", BandwidthMiB: 64, AutoConverge: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Migration == nil || st.Migration.Role != "source" || st.Migration.UID != "m1" || st.Migration.StartTimestamp == nil {
		t.Fatalf("migration after Migrate = %+v", st.Migration)
	}
	// The same migration again changes nothing; another is refused.
	if _, err := f.c.Migrate(ctx, client.MigrateRequest{MigrationUID: "m1"}); err != nil {
		t.Errorf("the same migration again: %v", err)
	}
	var lerr *client.Error
	if _, err := f.c.Migrate(ctx, client.MigrateRequest{MigrationUID: "m2"}); !errors.As(err, &lerr) || lerr.Code != 409 {
		t.Errorf("a second migration during the first: %v, want 409", err)
	}
	waitFor(t, func() bool { _, ok := f.h.LastMigration("ns_vm1"); return ok })
	opts, _ := f.h.LastMigration("ns_vm1")
	sock := client.MigrationSocket(f.cfg.ShareDir, f.cfg.UID, 0)
	if opts.DestURI != "qemu+unix:///session?socket="+sock || opts.MigrateURI != "unix://"+client.MigrationSocket(f.cfg.ShareDir, f.cfg.UID, client.DirectMigrationPort) ||
		opts.DisksURI != "unix://"+client.MigrationSocket(f.cfg.ShareDir, f.cfg.UID, client.BlockMigrationPort) || opts.BandwidthMiB != 64 || !opts.AutoConverge ||
		len(opts.CopyDisksUnder) == 0 || opts.CopyDisksUnder[0] != f.cfg.EphemeralDiskDir ||
		!slices.Equal(opts.SharedDisksUnder, []string{filepath.Join(f.cfg.PrivateDir, "vmi-disks"), f.cfg.HotplugDiskDir}) {
		t.Errorf("migration options = %+v", opts)
	}
	// The state poll must not end the launcher while migrating.
	time.Sleep(50 * time.Millisecond)
	if st, _ := f.c.State(ctx); st.Final {
		t.Fatal("the launcher ended during the migration")
	}
	f.h.ReleaseMigrations()
	var final client.Status
	select {
	case final = <-f.run:
	case <-time.After(5 * time.Second):
		t.Fatal("the launcher did not end after the migration")
	}
	if final.State != hypervisor.StateShutoff || final.Reason != hypervisor.ReasonMigrated || final.Succeeded() {
		t.Errorf("final = %s (%s), succeeded %v", final.State, final.Reason, final.Succeeded())
	}
	if m := final.Migration; m == nil || !m.Completed || m.Failed || m.EndTimestamp == nil {
		t.Errorf("final migration = %+v", final.Migration)
	}
	onDisk, err := client.ReadFinal(f.cfg.ShareDir, f.cfg.UID)
	if err != nil || onDisk.Migration == nil || !onDisk.Migration.Completed {
		t.Errorf("final.json = %+v, %v", onDisk, err)
	}
	f.run <- final // for the cleanup's wait
}

func TestMigrationAbortKeepsTheGuest(t *testing.T) {
	f := startMigratable(t)
	ctx := context.Background()
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatal(err)
	}
	var lerr *client.Error
	if _, err := f.c.AbortMigration(ctx); !errors.As(err, &lerr) || lerr.Code != 409 {
		t.Errorf("abort without a migration: %v, want 409", err)
	}
	f.h.HoldMigrations()
	if _, err := f.c.Migrate(ctx, client.MigrateRequest{MigrationUID: "m1"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := f.h.LastMigration("ns_vm1"); return ok })
	if _, err := f.c.AbortMigration(ctx); err != nil {
		t.Fatal(err)
	}
	var st client.Status
	waitFor(t, func() bool { st, _ = f.c.State(ctx); return st.Migration != nil && st.Migration.EndTimestamp != nil })
	if m := st.Migration; !m.Failed || m.Completed || m.AbortStatus != client.AbortSucceeded || m.FailureReason == "" {
		t.Errorf("migration after abort = %+v", m)
	}
	if st.Final || st.State != hypervisor.StateRunning {
		t.Errorf("after abort: %+v, want running", st)
	}
	// An ended migration is not started again.
	if _, err := f.c.Migrate(ctx, client.MigrateRequest{MigrationUID: "m1"}); !errors.As(err, &lerr) || lerr.Code != 409 {
		t.Errorf("the aborted migration again: %v, want 409", err)
	}
}

func TestMigrationTargetAdoptsTheIncomingDomain(t *testing.T) {
	f := startMigratable(t)
	ctx := context.Background()
	vmi := testVMI()
	info, err := f.c.PrepareMigrationTarget(ctx, vmi)
	if err != nil {
		t.Fatal(err)
	}
	if info.Domain != "ns_vm1" || info.LibvirtSocket != "/run/libvirt/libvirt-sock" || info.ShareDir != f.cfg.ShareDir {
		t.Errorf("info = %+v", info)
	}
	// It prepared the disks (the empty disk exists) but defined nothing.
	if _, err := os.Stat(filepath.Join(f.cfg.EphemeralDiskDir, "empty-disks")); err != nil {
		t.Errorf("target disks: %v", err)
	}
	if _, err := f.h.State(ctx, "ns_vm1"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("the target defined the domain: %v", err)
	}
	// A sync would start the guest a second time: refused while a target.
	var lerr *client.Error
	if _, err := f.c.Sync(ctx, vmi); !errors.As(err, &lerr) || lerr.Code != 409 {
		t.Errorf("sync of a migration target: %v, want 409", err)
	}
	// The source's libvirt creates the domain, paused while memory arrives.
	xml, _ := f.h.XML("ns_vm1")
	if xml == "" {
		xml = `<domain type="qemu"><name>ns_vm1</name><memory>65536</memory><os><type>hvm</type></os></domain>`
	}
	if _, err := f.h.Incoming(ctx, xml); err != nil {
		t.Fatal(err)
	}
	var st client.Status
	waitFor(t, func() bool { st, _ = f.c.State(ctx); return st.Migration != nil && st.Migration.DomainDetected })
	if st.Started {
		t.Fatalf("adopted during the migration: %+v", st)
	}
	if err := f.h.Resume(ctx, "ns_vm1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { st, _ = f.c.State(ctx); return st.Started })
	if st.State != hypervisor.StateRunning || st.Domain != "ns_vm1" || !st.Migration.Completed {
		t.Errorf("after adoption: %+v %+v", st, st.Migration)
	}
	// From now on it is an ordinary launcher: the guest powers off, it ends.
	if err := f.h.SetState("ns_vm1", hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonShutdown}); err != nil {
		t.Fatal(err)
	}
	select {
	case final := <-f.run:
		if !final.Succeeded() {
			t.Errorf("final = %+v", final)
		}
		f.run <- final
	case <-time.After(5 * time.Second):
		t.Fatal("the launcher did not end")
	}
}

func TestMigrationTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		req        client.MigrateRequest
		remaining  uint64
		wantReason string // failure; "" for a switch to post-copy
	}{
		{"past the completion timeout with post-copy: switches", client.MigrateRequest{MigrationUID: "m", PostCopy: true, Timeout: metav1.Duration{Duration: time.Second}}, 0, ""},
		{"past the completion timeout: aborted", client.MigrateRequest{MigrationUID: "m", Timeout: metav1.Duration{Duration: time.Second}}, 0, "not completed after 1 seconds"},
		{"no progress: aborted", client.MigrateRequest{MigrationUID: "m", ProgressTimeout: metav1.Duration{Duration: time.Second}}, 4096, "stuck for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startMigratable(t)
			ctx := context.Background()
			if _, err := f.c.Sync(ctx, testVMI()); err != nil {
				t.Fatal(err)
			}
			f.h.HoldMigrations()
			if _, err := f.c.Migrate(ctx, tc.req); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { _, ok := f.h.LastMigration("ns_vm1"); return ok })
			f.h.MigrationRemaining("ns_vm1", tc.remaining)
			var st client.Status
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				st, _ = f.c.State(ctx)
				if st.Migration.EndTimestamp != nil || st.Migration.Mode == "PostCopy" {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if tc.wantReason == "" {
				if st.Migration.Mode != "PostCopy" || !f.h.PostCopy("ns_vm1") || st.Migration.Failed {
					t.Fatalf("migration = %+v, fake post-copy %v; want switched to post-copy", st.Migration, f.h.PostCopy("ns_vm1"))
				}
				f.h.ReleaseMigrations()
				select {
				case final := <-f.run:
					if final.Reason != hypervisor.ReasonMigrated || final.Migration.Mode != "PostCopy" {
						t.Errorf("final = %+v %+v", final, final.Migration)
					}
					f.run <- final
				case <-time.After(5 * time.Second):
					t.Fatal("the launcher did not end after the post-copy migration")
				}
				return
			}
			if m := st.Migration; !m.Failed || !strings.Contains(m.FailureReason, tc.wantReason) || st.State != hypervisor.StateRunning {
				t.Errorf("migration = %+v, state %s; want failed with %q, the guest running", m, st.State, tc.wantReason)
			}
		})
	}
}

// A passt guest that migrated here has its NIC, which libvirt does not
// list, taken down and up through QEMU's monitor, so that it renews its
// lease from this pod's passt; a domain without that NIC is left alone.
func TestRefreshPasstLink(t *testing.T) {
	f := startMigratable(t)
	ctx := context.Background()
	const withNIC = `<domain type="qemu" xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"><name>ns_vm1</name><memory>65536</memory><os><type>hvm</type></os>` +
		`<qemu:commandline><qemu:arg value="-device"/><qemu:arg value="virtio-net-pci,netdev=passt0,id=passt0-nic"/></qemu:commandline></domain>`
	for _, xml := range []string{withNIC, `<domain type="qemu"><name>ns_vm2</name><memory>65536</memory><os><type>hvm</type></os></domain>`} {
		if _, err := f.h.Incoming(ctx, xml); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"ns_vm1", "ns_vm2"} {
		if err := f.h.Resume(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	f.l.refreshPasstLink(ctx, "ns_vm1")
	if got, want := f.h.Links("ns_vm1"), []string{"passt0-nic=down", "passt0-nic=up"}; !slices.Equal(got, want) {
		t.Errorf("links of the passt guest = %q, want %q", got, want)
	}
	if d := time.Since(began); d < passtLinkDown {
		t.Errorf("the link was down %v, want at least %v", d, passtLinkDown)
	}
	f.l.refreshPasstLink(ctx, "ns_vm2")
	if got := f.h.Links("ns_vm2"); len(got) != 0 {
		t.Errorf("links of a domain without the passt NIC = %q, want none", got)
	}
}
