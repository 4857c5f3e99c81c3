package hypervisor

import (
	"context"
	"errors"
	"time"
)

// Migrator is implemented by hypervisors that can live-migrate a domain to
// another hypervisor of the same kind (libvirt's peer-to-peer migration, as
// KubeVirt's launcher does it). It is separate from Hypervisor so that
// implementations without migration stay valid; callers check for it with a
// type assertion.
type Migrator interface {
	// Migrate live-migrates the named running (or paused) domain as opts
	// say and blocks until the migration ended: on success the domain runs
	// on the destination (the source's domain is then shut off with reason
	// Migrated) and Migrate returns the completed job's statistics (with
	// the switch-over's downtime); on failure or abort the domain keeps
	// running here. Cancelling ctx aborts the migration.
	Migrate(ctx context.Context, name string, opts MigrateOptions) (MigrationProgress, error)
	// AbortMigration aborts the named domain's migration in progress; the
	// domain keeps running here. Without one it fails with
	// ErrNoMigration.
	AbortMigration(ctx context.Context, name string) error
	// MigrationProgress reports the named domain's migration job.
	// Without one it fails with ErrNoMigration.
	MigrationProgress(ctx context.Context, name string) (MigrationProgress, error)
	// StartPostCopy switches the named domain's migration, started with
	// MigrateOptions.PostCopy, to post-copy: the guest runs on the
	// destination at once and fetches the memory left on demand. Without
	// a migration it fails with ErrNoMigration.
	StartPostCopy(ctx context.Context, name string) error
}

// ErrNoMigration: the domain has no migration in progress.
var ErrNoMigration = errors.New("no migration in progress")

// MigrateOptions say where and how Migrate moves a domain. The field names
// follow libvirt's migration parameters (virDomainMigrateToURI3).
type MigrateOptions struct {
	// DestURI is the destination hypervisor's connection URI as the source
	// hypervisor reaches it, for example
	// "qemu+unix:///system?socket=/var/run/kubevirt/migrationproxy/<uid>-source.sock"
	// (KubeVirt's; "qemu+unix:///session?..." for a non-root launcher).
	DestURI string
	// MigrateURI is where the source QEMU sends the guest's memory, for
	// example "unix:///var/run/kubevirt/migrationproxy/<uid>-49152-source.sock":
	// the destination QEMU listens at the same path in its own file system.
	MigrateURI string
	// Disks lists the target devices (vda, ...) of the local disks whose
	// contents are copied to the destination (block migration, libvirt's
	// non-shared-incremental: the destination has the backing images);
	// empty when every disk is shared.
	Disks []string
	// CopyDisksUnder adds to Disks every disk (not a CD-ROM) whose image
	// is a file or device under one of these directories, as the domain's
	// definition names it: the launcher's own disks (overlays, empty
	// disks, cloud-init and config ISOs), as opposed to shared claims.
	CopyDisksUnder []string
	// SharedDisksUnder are directories of disks on storage both nodes
	// have (claims: a VMI migrates only when they are ReadWriteMany), which
	// are not copied. libvirt refuses a file disk left in place unless its
	// file system is one it knows as shared (NFS, CephFS, GlusterFS...);
	// when a file disk lies under one of these the migration skips that
	// check (libvirt's VIR_MIGRATE_UNSAFE), as the claim vouches for it.
	SharedDisksUnder []string
	// DisksURI is where the disks are sent (NBD), for example
	// "unix:///var/run/kubevirt/migrationproxy/<uid>-49153-source.sock".
	// Required with Disks.
	DisksURI string
	// BandwidthMiB limits the transfer (MiB/s); 0 is unlimited.
	BandwidthMiB uint64
	// AutoConverge throttles the guest's vCPUs when it dirties memory
	// faster than it is sent.
	AutoConverge bool
	// PostCopy allows switching to post-copy (see StartPostCopy's caller).
	PostCopy bool
	// ParallelConnections, when above 1, sends memory over that many
	// connections (multifd).
	ParallelConnections int
	// Unsafe skips libvirt's safety checks (disk cache modes).
	Unsafe bool
	// PathMap rewrites file paths in the domain's definition for the
	// destination: every occurrence of a key (a directory, such as the
	// source launcher's ephemeral disk directory) becomes its value. Empty
	// when both sides lay their files out alike, as two launcher pods do;
	// two launchers on one machine with their own directories need it.
	PathMap map[string]string
}

// MigrationProgress is a snapshot of a migration job, as libvirt's job
// information reports it.
type MigrationProgress struct {
	// Elapsed is the job's time so far.
	Elapsed time.Duration
	// DataTotal, DataProcessed and DataRemaining count memory and disk
	// bytes.
	DataTotal, DataProcessed, DataRemaining uint64
	// MemoryBytesPerSecond is the current memory transfer rate.
	MemoryBytesPerSecond uint64
	// Iteration is the number of memory passes so far.
	Iteration uint64
	// Downtime is the expected (while running) or actual (once complete)
	// time the guest is paused at the switch-over.
	Downtime time.Duration
}
