package libvirt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	golibvirt "libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

var _ hypervisor.Migrator = (*Hypervisor)(nil)

// migrationFlags are the flags KubeVirt's launcher migrates with: live,
// peer to peer (the source libvirt talks to the destination's), the
// destination's definition made persistent; plus incremental block
// migration when local disks are copied, auto-converge and post-copy when
// allowed, paused when the guest is paused, parallel (multifd)
// connections when asked for.
func migrationFlags(opts hypervisor.MigrateOptions, paused bool) golibvirt.DomainMigrateFlags {
	flags := golibvirt.MIGRATE_LIVE | golibvirt.MIGRATE_PEER2PEER | golibvirt.MIGRATE_PERSIST_DEST
	if len(opts.Disks) > 0 {
		flags |= golibvirt.MIGRATE_NON_SHARED_INC
	}
	if opts.Unsafe {
		flags |= golibvirt.MIGRATE_UNSAFE
	}
	if opts.AutoConverge {
		flags |= golibvirt.MIGRATE_AUTO_CONVERGE
	}
	if opts.PostCopy {
		flags |= golibvirt.MIGRATE_POSTCOPY
	}
	if paused {
		flags |= golibvirt.MIGRATE_PAUSED
	}
	if opts.ParallelConnections > 1 {
		flags |= golibvirt.MIGRATE_PARALLEL
	}
	return flags
}

// migrationParams are virDomainMigrateToURI3's parameters for opts, with
// the domain's migratable definition (paths rewritten by opts.PathMap) as
// the destination's definition.
func migrationParams(opts hypervisor.MigrateOptions, name, migratableXML string) (*golibvirt.DomainMigrateParameters, error) {
	if opts.MigrateURI == "" {
		return nil, errors.New("migration URI is required")
	}
	disks, _, err := disksToCopy(migratableXML, opts)
	if err != nil {
		return nil, err
	}
	opts.Disks = disks
	if len(opts.Disks) > 0 && opts.DisksURI == "" {
		return nil, fmt.Errorf("disks %v are to be copied but no disks URI was given", opts.Disks)
	}
	xml := rewritePaths(migratableXML, opts.PathMap)
	p := &golibvirt.DomainMigrateParameters{
		URISet: true, URI: opts.MigrateURI,
		DestNameSet: true, DestName: name,
		DestXMLSet: true, DestXML: xml,
		PersistXMLSet: true, PersistXML: xml,
		BandwidthSet: opts.BandwidthMiB > 0, Bandwidth: opts.BandwidthMiB,
	}
	if opts.ParallelConnections > 1 {
		p.ParallelConnectionsSet, p.ParallelConnections = true, opts.ParallelConnections
	}
	if len(opts.Disks) > 0 {
		p.MigrateDisksSet, p.MigrateDisks = true, opts.Disks
		p.DisksURISet, p.DisksURI = true, opts.DisksURI
		// Not migrate_disks_detect_zeroes (KubeVirt's): libvirt 9.0
		// refuses it; it only skips zero blocks.
	}
	return p, nil
}

// disksToCopy returns opts.Disks plus the target devices of the disks
// under opts.CopyDisksUnder in the domain's definition, and whether a disk
// it does not copy is a file under opts.SharedDisksUnder.
func disksToCopy(domainXML string, opts hypervisor.MigrateOptions) (copied []string, shared bool, err error) {
	out := append([]string(nil), opts.Disks...)
	if len(opts.CopyDisksUnder) == 0 && len(opts.SharedDisksUnder) == 0 {
		return out, false, nil
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(domainXML); err != nil {
		return nil, false, fmt.Errorf("reading the domain's definition: %w", err)
	}
	if dom.Devices == nil {
		return out, false, nil
	}
	under := func(path string, dirs []string) bool {
		return slices.ContainsFunc(dirs, func(dir string) bool {
			return dir != "" && strings.HasPrefix(filepath.Clean(path), filepath.Clean(dir)+"/")
		})
	}
	for _, d := range dom.Devices.Disks {
		if d.Device == "cdrom" || d.Source == nil || d.Target == nil || slices.Contains(out, d.Target.Dev) {
			continue
		}
		var path string
		switch {
		case d.Source.File != nil:
			path = d.Source.File.File
		case d.Source.Block != nil:
			path = d.Source.Block.Dev
		default:
			continue
		}
		switch {
		case under(path, opts.CopyDisksUnder):
			out = append(out, d.Target.Dev)
		case d.Source.File != nil && under(path, opts.SharedDisksUnder):
			shared = true
		}
	}
	return out, shared, nil
}

// rewritePaths replaces each key of m in xml by its value, longest keys
// first (so /a/b is rewritten before /a).
func rewritePaths(xml string, m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			keys = append(keys, k)
		}
	}
	// Longest first; ties in any order (equal keys cannot exist).
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && len(keys[j]) > len(keys[j-1]); j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	pairs := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		pairs = append(pairs, k, m[k])
	}
	if len(pairs) == 0 {
		return xml
	}
	return strings.NewReplacer(pairs...).Replace(xml)
}

// Migrate implements hypervisor.Migrator with virDomainMigrateToURI3.
// The call is not bounded by Options.CallTimeout (a migration takes as
// long as it takes), only by ctx: when ctx ends the job is aborted.
func (h *Hypervisor) Migrate(ctx context.Context, name string, opts hypervisor.MigrateOptions) (hypervisor.MigrationProgress, error) {
	if opts.DestURI == "" {
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: destination URI is required", name)
	}
	conn, err := h.connection()
	if err != nil {
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: %w", name, err)
	}
	dom, err := conn.LookupDomainByName(name)
	if err != nil {
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: %w", name, translate(err))
	}
	defer dom.Free()
	state, _, err := dom.GetState()
	if err != nil {
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: %w", name, translate(err))
	}
	if state != golibvirt.DOMAIN_RUNNING && state != golibvirt.DOMAIN_PAUSED && state != golibvirt.DOMAIN_BLOCKED {
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: domain is not running: %w", name, hypervisor.ErrInvalidState)
	}
	xml, err := dom.GetXMLDesc(golibvirt.DOMAIN_XML_MIGRATABLE)
	if err != nil {
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: %w", name, translate(err))
	}
	disks, shared, err := disksToCopy(xml, opts)
	if err != nil {
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: %w", name, err)
	}
	opts.Disks, opts.CopyDisksUnder = disks, nil
	// libvirt tells shared storage by its file system's type (NFS,
	// CephFS, GlusterFS...) and refuses a file disk on any other ("Migration
	// without shared storage is unsafe"), although the claim says every
	// node has it.
	opts.Unsafe = opts.Unsafe || shared
	params, err := migrationParams(opts, name, xml)
	if err != nil {
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: %w", name, err)
	}
	flags := migrationFlags(opts, state == golibvirt.DOMAIN_PAUSED)
	done := make(chan error, 1)
	go func() { done <- dom.MigrateToURI3(opts.DestURI, params, flags) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Abort, then wait for MigrateToURI3 to return: the domain keeps
		// running here once it has.
		if aerr := dom.AbortJob(); aerr != nil {
			err = <-done
			if err == nil {
				break // it completed before the abort
			}
			return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: %w (abort: %v)", name, ctx.Err(), aerr)
		}
		<-done
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: %w", name, ctx.Err())
	}
	if err != nil {
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s (copying disks %v) to %s: %w", name, opts.Disks, opts.DestURI, translate(err))
	}
	var out hypervisor.MigrationProgress
	if info, err := dom.GetJobStats(golibvirt.DOMAIN_JOB_STATS_COMPLETED); err == nil {
		out = progress(info)
	}
	return out, nil
}

// AbortMigration implements hypervisor.Migrator with virDomainAbortJob.
func (h *Hypervisor) AbortMigration(ctx context.Context, name string) error {
	return h.onDomain(ctx, "abort migration of", name, func(d *golibvirt.Domain) error {
		info, err := d.GetJobInfo()
		if err != nil {
			return err
		}
		if info.Type != golibvirt.DOMAIN_JOB_UNBOUNDED {
			return hypervisor.ErrNoMigration
		}
		return d.AbortJob()
	})
}

// MigrationProgress implements hypervisor.Migrator with virDomainGetJobStats.
func (h *Hypervisor) MigrationProgress(ctx context.Context, name string) (hypervisor.MigrationProgress, error) {
	var out hypervisor.MigrationProgress
	err := h.onDomain(ctx, "migration progress of", name, func(d *golibvirt.Domain) error {
		info, err := d.GetJobStats(0)
		if err != nil {
			return err
		}
		if info.Type != golibvirt.DOMAIN_JOB_UNBOUNDED {
			return hypervisor.ErrNoMigration
		}
		out = progress(info)
		return nil
	})
	return out, err
}

// StartPostCopy implements hypervisor.Migrator with
// virDomainMigrateStartPostCopy.
func (h *Hypervisor) StartPostCopy(ctx context.Context, name string) error {
	return h.onDomain(ctx, "start post-copy of", name, func(d *golibvirt.Domain) error {
		info, err := d.GetJobInfo()
		if err != nil {
			return err
		}
		if info.Type != golibvirt.DOMAIN_JOB_UNBOUNDED {
			return hypervisor.ErrNoMigration
		}
		return d.MigrateStartPostCopy(0)
	})
}

func progress(info *golibvirt.DomainJobInfo) hypervisor.MigrationProgress {
	return hypervisor.MigrationProgress{
		Elapsed:              time.Duration(info.TimeElapsed) * time.Millisecond,
		DataTotal:            info.DataTotal,
		DataProcessed:        info.DataProcessed,
		DataRemaining:        info.DataRemaining,
		MemoryBytesPerSecond: info.MemBps,
		Iteration:            info.MemIteration,
		Downtime:             time.Duration(info.Downtime) * time.Millisecond,
	}
}
