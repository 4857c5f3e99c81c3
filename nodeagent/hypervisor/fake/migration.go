package fake

import (
	"context"
	"fmt"
	"time"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

var _ hypervisor.Migrator = (*Hypervisor)(nil)

// fakeMigration is a migration in progress on a Hypervisor.
type fakeMigration struct {
	opts      hypervisor.MigrateOptions
	started   time.Time
	abort     chan struct{}
	aborted   bool
	postCopy  bool
	remaining uint64
}

// HoldMigrations makes the Hypervisor's migrations wait, in progress, until
// ReleaseMigrations, their context ends or they are aborted; by default a
// migration completes at once.
func (f *Hypervisor) HoldMigrations() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.migrationGate == nil {
		f.migrationGate = make(chan struct{})
	}
}

// ReleaseMigrations lets the held migrations complete.
func (f *Hypervisor) ReleaseMigrations() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.migrationGate != nil {
		close(f.migrationGate)
		f.migrationGate = nil
	}
}

// LastMigration returns the options of the last migration started on the
// named domain.
func (f *Hypervisor) LastMigration(name string) (hypervisor.MigrateOptions, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.lastMigration[name]
	return o, ok
}

// Migrate implements Migrator: the domain must be running or paused; when
// the migration completes the domain is shut off with reason Migrated, as
// libvirt leaves a source domain (and undefined with it, as with libvirt's
// migration of a transient copy: the Hypervisor keeps the definition, so that a
// test can read its state).
func (f *Hypervisor) Migrate(ctx context.Context, name string, opts hypervisor.MigrateOptions) (hypervisor.MigrationProgress, error) {
	f.mu.Lock()
	if err := f.begin(ctx, "Migrate", name); err != nil {
		f.mu.Unlock()
		return hypervisor.MigrationProgress{}, err
	}
	d, err := f.lookup("migrate", name)
	if err != nil {
		f.mu.Unlock()
		return hypervisor.MigrationProgress{}, err
	}
	if d.state.State != hypervisor.StateRunning && d.state.State != hypervisor.StatePaused {
		f.mu.Unlock()
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: domain is %s: %w", name, d.state.State, hypervisor.ErrInvalidState)
	}
	if d.migration != nil {
		f.mu.Unlock()
		return hypervisor.MigrationProgress{}, fmt.Errorf("migrate %s: a migration is in progress: %w", name, hypervisor.ErrInvalidState)
	}
	m := &fakeMigration{opts: opts, started: time.Now(), abort: make(chan struct{})}
	d.migration = m
	if f.lastMigration == nil {
		f.lastMigration = map[string]hypervisor.MigrateOptions{}
	}
	f.lastMigration[name] = opts
	gate := f.migrationGate
	f.mu.Unlock()

	var result error
	if gate != nil {
		select {
		case <-gate:
		case <-m.abort:
			result = fmt.Errorf("migrate %s: operation aborted: migration out job: canceled by client", name)
		case <-ctx.Done():
			result = fmt.Errorf("migrate %s: %w", name, ctx.Err())
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d.migration = nil
	if result != nil {
		return hypervisor.MigrationProgress{}, result
	}
	d.state = hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonMigrated}
	d.closeConsole()
	return hypervisor.MigrationProgress{Elapsed: time.Since(m.started)}, nil
}

// AbortMigration implements Migrator.
func (f *Hypervisor) AbortMigration(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "AbortMigration", name); err != nil {
		return err
	}
	d, err := f.lookup("abort migration", name)
	if err != nil {
		return err
	}
	if d.migration == nil || d.migration.aborted {
		return fmt.Errorf("abort migration of %s: %w", name, hypervisor.ErrNoMigration)
	}
	d.migration.aborted = true
	close(d.migration.abort)
	return nil
}

// MigrationProgress implements Migrator: the elapsed time of the
// migration in progress.
func (f *Hypervisor) MigrationProgress(ctx context.Context, name string) (hypervisor.MigrationProgress, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "MigrationProgress", name); err != nil {
		return hypervisor.MigrationProgress{}, err
	}
	d, err := f.lookup("migration progress", name)
	if err != nil {
		return hypervisor.MigrationProgress{}, err
	}
	if d.migration == nil {
		return hypervisor.MigrationProgress{}, fmt.Errorf("migration progress of %s: %w", name, hypervisor.ErrNoMigration)
	}
	return hypervisor.MigrationProgress{Elapsed: time.Since(d.migration.started), DataRemaining: d.migration.remaining}, nil
}

// StartPostCopy implements Migrator: it records the switch (PostCopies).
func (f *Hypervisor) StartPostCopy(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "StartPostCopy", name); err != nil {
		return err
	}
	d, err := f.lookup("start post-copy of", name)
	if err != nil {
		return err
	}
	if d.migration == nil {
		return fmt.Errorf("start post-copy of %s: %w", name, hypervisor.ErrNoMigration)
	}
	if !d.migration.opts.PostCopy {
		return fmt.Errorf("start post-copy of %s: the migration was not started with post-copy: %w", name, hypervisor.ErrInvalidState)
	}
	d.migration.postCopy = true
	return nil
}

// MigrationRemaining sets the data left that MigrationProgress reports
// for the named domain's migration.
func (f *Hypervisor) MigrationRemaining(name string, remaining uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.domains[name]; ok && d.migration != nil {
		d.migration.remaining = remaining
	}
}

// PostCopy reports whether the named domain's migration in progress was
// switched to post-copy.
func (f *Hypervisor) PostCopy(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.domains[name]
	return ok && d.migration != nil && d.migration.postCopy
}

// Incoming defines the named domain from domainXML in state Paused with
// reason Migrated, as libvirt shows a domain whose incoming migration is in
// progress on the destination; Resume (or SetState) finishes it.
func (f *Hypervisor) Incoming(ctx context.Context, domainXML string) (hypervisor.Domain, error) {
	dom, err := f.Define(ctx, domainXML)
	if err != nil {
		return dom, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.domains[dom.Name]
	d.state = hypervisor.DomainState{State: hypervisor.StatePaused, Reason: hypervisor.ReasonMigrated}
	dom.State = d.state
	return dom, nil
}
