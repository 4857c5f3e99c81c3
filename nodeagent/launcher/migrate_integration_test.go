package launcher_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/internal/podsim"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/migrationproxy"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func ptr[T any](v T) *T { return &v }

// The live migration of a real guest between two launchers on this
// machine, each in its own pod (see nodeagent/internal/podsim: a mount
// namespace, a non-root session libvirtd with its own host UUID), through
// two migrationproxy managers (the source and the target node agent's)
// over mutual TLS, which reach the launchers' sockets through
// /proc/<launcher pid>/root as the node agent does.
func TestLiveMigrationBetweenLaunchers(t *testing.T) {
	guest := podsim.Require(t)
	base, bin := podsim.Base(t)

	uid := types.UID("6a1c0d5e-0000-4000-8000-" + fmt.Sprintf("%012d", time.Now().UnixNano()%1e12))
	vmi := podsim.VMI(uid)
	// Room for memory hotplug (a virtio-mem device), as KubeVirt's
	// default maxGuest gives every guest of 1Gi or more: what was plugged
	// before the migration is the target's.
	gi, maxGuest := resource.MustParse("1Gi"), resource.MustParse("2Gi")
	vmi.Spec.Domain.Memory = &v1.Memory{Guest: &gi, MaxGuest: &maxGuest}
	initrd := podsim.TickerInitramfs(t, guest.IdleInitramfs)

	src := podsim.Start(t, base, "a", bin, vmi, guest.Kernel, initrd)
	dst := podsim.Start(t, base, "b", bin, vmi, guest.Kernel, initrd)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	// The guest boots on the source and ticks.
	st := podsim.Sync(ctx, t, src, vmi)
	if !st.Started {
		t.Fatalf("source: domain not started: %+v", st)
	}
	srcTicks := podsim.WatchTicks(ctx, t, src.Client)
	before := srcTicks.WaitAbove(t, 2, 60*time.Second, "the guest ticking on the source")
	t.Logf("guest runs on the source, uptime %.2f s", before)
	// 256Mi more asked of the guest (the ticker guest has no virtio_mem
	// driver: it plugs none of it, but the request travels).
	plugged := vmi.DeepCopy()
	plugged.Spec.Domain.Memory.Guest = ptr(resource.MustParse("1280Mi"))
	plugged.Status.Memory = &v1.MemoryStatus{GuestAtBoot: &gi, GuestRequested: plugged.Spec.Domain.Memory.Guest}
	if st := podsim.Sync(ctx, t, src, plugged); st.Memory == nil || st.Memory.GuestRequested.String() != "1280Mi" {
		t.Fatalf("source memory after the hotplug: %+v, want 1280Mi requested", st.Memory)
	}
	vmi = plugged

	// The target launcher waits for the incoming domain.
	info, err := dst.Client.PrepareMigrationTarget(ctx, vmi)
	if err != nil {
		t.Fatalf("preparing the target: %v", err)
	}
	if info.LibvirtSocket != podsim.Root+"/run/libvirt/libvirt-sock" || info.ShareDir != podsim.Root+"/share" || info.Domain != "default_vm-mig" {
		t.Errorf("target info = %+v", info)
	}
	if _, err := dst.Client.PrepareMigrationTarget(ctx, vmi); err != nil {
		t.Errorf("preparing the target again: %v", err)
	}

	// The node agents' proxies, with mutual TLS between them.
	serverTLS, clientTLS := podsim.TLS(t)
	targetProxy, err := migrationproxy.New(migrationproxy.Config{ListenAddress: "127.0.0.1", ServerTLS: serverTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer targetProxy.Close()
	sourceProxy, err := migrationproxy.New(migrationproxy.Config{ListenAddress: "127.0.0.1", ClientTLS: clientTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer sourceProxy.Close()
	dstRoot := podsim.ProcRoot(ctx, t, dst.Client)
	// at is the socket at path in the launcher's root, its directory opened
	// once as the node agent does.
	at := func(root, path string) migrationproxy.Socket {
		d, err := migrationproxy.OpenDir(root + filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		return migrationproxy.Socket{Dir: d, Name: filepath.Base(path)}
	}
	ports, err := targetProxy.StartTarget(string(uid), map[int]migrationproxy.Socket{
		migrationproxy.LibvirtPort:         at(dstRoot, info.LibvirtSocket),
		migrationproxy.DirectMigrationPort: at(dstRoot, client.MigrationSocket(info.ShareDir, string(uid), client.DirectMigrationPort)),
		migrationproxy.BlockMigrationPort:  at(dstRoot, client.MigrationSocket(info.ShareDir, string(uid), client.BlockMigrationPort)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srcInfo, err := src.Client.MigrationInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srcRoot := podsim.ProcRoot(ctx, t, src.Client)
	if err := os.MkdirAll(srcRoot+filepath.Join(srcInfo.ShareDir, client.MigrationProxyDir), 0o755); err != nil {
		t.Fatal(err)
	}
	srcDir := at(srcRoot, client.MigrationSocket(srcInfo.ShareDir, string(uid), 0)).Dir
	err = sourceProxy.StartSource(string(uid), migrationproxy.Source{TargetAddress: "127.0.0.1", Ports: ports, UID: podsim.QEMUUID, GID: podsim.QEMUUID,
		Dir: srcDir, SocketName: func(port int) string {
			return filepath.Base(client.MigrationSocket(srcInfo.ShareDir, string(uid), port))
		}})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("AbortLeavesTheGuestOnTheSource", func(t *testing.T) {
		// 1 MiB/s: the guest's memory takes far longer than the abort.
		if _, err := src.Client.Migrate(ctx, client.MigrateRequest{MigrationUID: "m-abort", BandwidthMiB: 1}); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		detected := podsim.WaitStatus(ctx, t, dst.Client, 60*time.Second, "the incoming domain on the target", func(s client.Status) bool {
			podsim.FailIfMigrationFailed(ctx, t, src)
			return s.Migration != nil && s.Migration.DomainDetected
		})
		if detected.Started {
			t.Fatalf("target adopted the domain during the migration: %+v", detected)
		}
		// The target's console is attached as soon as the incoming domain
		// exists, before the guest's state arrives.
		if console, err := dst.Client.Console(ctx, false); err != nil {
			t.Errorf("the target's console during the migration: %v, want a session", err)
		} else {
			console.Close()
		}
		if _, err := src.Client.AbortMigration(ctx); err != nil {
			t.Fatalf("abort: %v", err)
		}
		st := podsim.WaitStatus(ctx, t, src.Client, 60*time.Second, "the aborted migration's end", func(s client.Status) bool {
			return s.Migration != nil && s.Migration.EndTimestamp != nil
		})
		if m := st.Migration; !m.Failed || m.Completed || m.AbortStatus != client.AbortSucceeded {
			t.Errorf("source migration after abort = %+v, want failed, abort succeeded", m)
		}
		if st.Final || st.State != hypervisor.StateRunning {
			t.Errorf("source after abort: %+v, want the guest running", st)
		}
		after := srcTicks.WaitAbove(t, srcTicks.Last()+2, 30*time.Second, "the guest ticking on the source after the abort")
		t.Logf("guest still runs on the source after the abort, uptime %.2f s", after)
		podsim.WaitStatus(ctx, t, dst.Client, 30*time.Second, "the target waiting again", func(s client.Status) bool {
			return s.Migration != nil && !s.Migration.DomainDetected && !s.Started && !s.Final
		})
		// Another abort has nothing to abort.
		var lerr *client.Error
		if _, err := src.Client.AbortMigration(ctx); !errors.As(err, &lerr) || lerr.Code != 409 {
			t.Errorf("abort without a migration: %v, want 409", err)
		}
	})

	t.Run("MigrateKeepsTheGuestRunning", func(t *testing.T) {
		defer func() {
			if t.Failed() {
				t.Logf("target launcher's log:\n%s", dst.Log())
			}
		}()
		last := srcTicks.Last()
		start := time.Now()
		if _, err := src.Client.Migrate(ctx, client.MigrateRequest{MigrationUID: "m-1"}); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		// A console session on the target from the moment the incoming
		// domain exists: the guest's output after the switch-over comes
		// through it.
		podsim.WaitStatus(ctx, t, dst.Client, 60*time.Second, "the incoming domain on the target", func(s client.Status) bool {
			podsim.FailIfMigrationFailed(ctx, t, src)
			return s.Migration != nil && (s.Migration.DomainDetected || s.Started)
		})
		dstTicks := podsim.WatchTicks(ctx, t, dst.Client)
		// The source launcher exits cleanly with the final state Migrated.
		timeout := time.After(3 * time.Minute)
	wait:
		for {
			select {
			case <-src.Done:
				break wait
			case <-timeout:
				t.Fatalf("the source launcher did not exit after the migration; its log:\n%s", src.Log())
			case <-time.After(time.Second):
				podsim.FailIfMigrationFailed(ctx, t, src)
			}
		}
		if src.Err != nil {
			t.Errorf("source launcher exit: %v; log:\n%s", src.Err, src.Log())
		}
		elapsed := time.Since(start)
		final, err := client.ReadFinalDir(filepath.Join(src.Dir, "share", "sockets", string(uid)))
		if err != nil {
			t.Fatalf("source final state: %v", err)
		}
		if final.State != hypervisor.StateShutoff || final.Reason != hypervisor.ReasonMigrated || final.Succeeded() {
			t.Errorf("source final state = %s (%s), succeeded %v; want Shutoff (Migrated), not a success", final.State, final.Reason, final.Succeeded())
		}
		if m := final.Migration; m == nil || !m.Completed || m.Failed || m.UID != "m-1" || m.Progress == nil {
			t.Fatalf("source final migration = %+v, want completed m-1 with progress", final.Migration)
		}
		t.Logf("migration: %v end to end, libvirt job %v, downtime %v, %d MiB sent", elapsed, final.Migration.Progress.Elapsed, final.Migration.Progress.Downtime, final.Migration.Progress.DataProcessed>>20)

		// The target adopted the domain: the same guest goes on ticking.
		st := podsim.WaitStatus(ctx, t, dst.Client, 30*time.Second, "the target running the guest", func(s client.Status) bool {
			return s.Started && s.State == hypervisor.StateRunning
		})
		if m := st.Migration; m == nil || !m.Completed || m.Role != "target" {
			t.Errorf("target migration = %+v, want completed", st.Migration)
		}
		if m := st.Memory; m == nil || m.GuestAtBoot.String() != "1Gi" || m.GuestRequested.String() != "1280Mi" {
			t.Errorf("target memory = %+v, want 1Gi at boot and 1280Mi requested, as on the source", st.Memory)
		}
		up := dstTicks.WaitAbove(t, last+1, 60*time.Second, "the guest ticking on the target")
		t.Logf("the guest ticks on the target: uptime %.2f s, last seen on the source %.2f s", up, last)
		if up > last+elapsed.Seconds()+30 {
			t.Errorf("uptime on the target %.2f s is not the source's guest's (%.2f s before a %v migration)", up, last, elapsed)
		}
		// The migrated guest stops like any other.
		if _, err := dst.Client.Kill(ctx); err != nil {
			t.Errorf("kill on the target: %v", err)
		}
		select {
		case <-dst.Done:
		case <-time.After(time.Minute):
			t.Errorf("the target launcher did not exit after kill; log:\n%s", dst.Log())
		}
	})
}
