package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/launcher/internal/accesscred"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Live migration, as KubeVirt's launchers do it. The target launcher
// (PrepareMigrationTarget) prepares the disks as for a start, defines
// nothing, and waits for the domain the source's libvirt creates in its
// libvirt; once that domain runs it adopts it (console, state) and is an
// ordinary launcher from then on. The source launcher (Migrate) asks its
// libvirt for a peer-to-peer migration to the destination libvirt reached
// through the node agents' proxy, whose sockets the source agent creates in
// <ShareDir>/migrationproxy/ (MigrationSocket); when the guest runs on the
// target the source's domain is shut off with reason Migrated and the
// launcher ends with that final state, which the node agent never turns into
// a VMI phase: the guest left, it did not stop.

// Directories returns the launcher's directories, as MigrationTargetInfo
// reports them.
func (l *Launcher) Directories() client.MigrationTargetInfo {
	return client.MigrationTargetInfo{
		LibvirtSocket: l.cfg.LibvirtSocket, ShareDir: l.cfg.ShareDir, EphemeralDiskDir: l.cfg.EphemeralDiskDir,
		PrivateDir: l.cfg.PrivateDir, ContainerDiskDir: l.cfg.ContainerDiskDir,
	}
}

// errMigration: the launcher is not in a state that allows the migration
// command (409).
var errMigration = errors.New("migration not possible")

// PrepareMigrationTarget makes the launcher the target of vmi's migration:
// it prepares the disks as a start would (the container disk overlays over
// the images this pod's sidecars serve, empty disks, the generated ISOs, so
// that a block migration finds them), creates the migration socket directory
// and waits for the incoming domain instead of defining one. Calling it
// again returns the same information.
func (l *Launcher) PrepareMigrationTarget(ctx context.Context, vmi *v1.VirtualMachineInstance) (client.MigrationTargetInfo, error) {
	if string(vmi.UID) != l.cfg.UID {
		return client.MigrationTargetInfo{}, fmt.Errorf("migration target for VMI %s/%s: UID %s is not this launcher's VMI %s", vmi.Namespace, vmi.Name, vmi.UID, l.cfg.UID)
	}
	if l.cfg.LibvirtSocket == "" {
		return client.MigrationTargetInfo{}, fmt.Errorf("VMI %s: this launcher cannot be a migration target: its libvirt socket is unknown (Config.LibvirtSocket): %w", l.key(), errMigration)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	info := l.Directories()
	info.Domain = vmi.DomainName()
	switch {
	case l.final != nil:
		return info, errFinal
	case l.incoming != "":
		return info, nil
	case l.domain != "" || l.stopping:
		return info, fmt.Errorf("VMI %s: the launcher already runs a domain or is stopping: %w", l.key(), errMigration)
	}
	vmi = l.withNetworkMACs(vmi)
	opts, created, err := l.prepare(ctx, vmi)
	l.createdAt = append(l.createdAt, created...)
	if err != nil {
		return info, fmt.Errorf("preparing VMI %s as a migration target: %w", l.key(), err)
	}
	// The incoming QEMU connects to this pod's passt as it starts.
	if err := l.passtLocked(ctx, vmi, opts.PasstSocket); err != nil {
		return info, fmt.Errorf("preparing VMI %s as a migration target: %w", l.key(), err)
	}
	dir := filepath.Join(l.cfg.ShareDir, client.MigrationProxyDir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return info, fmt.Errorf("VMI %s: %w", l.key(), err)
	}
	l.createdAt = append(l.createdAt, dir)
	l.incoming, l.opts, l.vmi = info.Domain, opts, vmi.DeepCopy()
	now := metav1.Now()
	l.migration = &client.MigrationStatus{Role: "target", Mode: "PreCopy", StartTimestamp: &now}
	select {
	case <-l.synced:
	default:
		close(l.synced)
	}
	klog.FromContext(ctx).Info("waiting for the incoming domain", "vmi", l.key(), "domain", info.Domain)
	return info, nil
}

// pollIncoming follows the incoming domain of a migration target: it
// appears paused (reason Migrated) when the migration starts, runs when it
// completed (or stays paused by the user when a paused guest migrated), and
// disappears when the migration failed, after which the launcher waits for
// the next attempt.
func (l *Launcher) pollIncoming(ctx context.Context, name string) {
	st, err := l.h.State(ctx, name)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.incoming != name || l.final != nil {
		return
	}
	m := l.migration
	switch {
	case errors.Is(err, hypervisor.ErrNotFound):
		if m.DomainDetected {
			klog.FromContext(ctx).Info("the incoming domain disappeared: the migration failed; waiting for another", "vmi", l.key())
			m.DomainDetected = false
		}
		return
	case err != nil:
		klog.FromContext(ctx).Error(err, "incoming domain state", "vmi", l.key())
		return
	}
	if !l.console.Live() {
		// Connect to the incoming guest's serial console before its state
		// arrives, as a domain that starts here is attached before it runs:
		// nothing the guest prints after the switch-over is lost, and the
		// UART's state arrives with its console connected (QEMU's 16550
		// resumes a transmission the source had to retry, post_load, only
		// through a connected character device; otherwise the guest's
		// console stays silent). Tried again at every poll until a session
		// reads: the domain may be listed before QEMU made its socket, and
		// the session of a failed attempt's domain ends with its QEMU.
		l.attachSerial(ctx, name)
	}
	m.DomainDetected = true
	l.last = st
	arrived := st.State == hypervisor.StateRunning || (st.State == hypervisor.StatePaused && st.Reason == hypervisor.ReasonUser)
	if !arrived {
		return
	}
	// The guest runs here now: adopt the domain.
	l.incoming, l.domain, l.started = "", name, true
	// What the guest has hot-plugged came with it: go on from there.
	l.cpuTopology = topologyOf(l.vmi)
	if err := l.adoptMemoryLocked(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "plugged memory of the migrated domain", "vmi", l.key())
	}
	if accesscred.ForGuestAgent(l.vmi) {
		// The guest's access credentials are this launcher's to keep now.
		go l.syncAccessCredentials(klog.NewContext(l.runCtx, klog.FromContext(ctx)), l.vmi)
	}
	if hasPasstBinding(l.vmi) {
		go l.refreshPasstLink(klog.NewContext(l.runCtx, klog.FromContext(ctx)), name)
	}
	now := metav1.Now()
	m.Completed, m.EndTimestamp = true, &now
	klog.FromContext(ctx).Info("the migrated domain runs here", "vmi", l.key(), "state", st)
}

// Migrate starts migrating the running domain to the target reached through
// the migration sockets under ShareDir and returns at once; Status().Migration
// follows it. When the guest runs on the target the launcher ends with the
// final state Shutoff (Migrated). A migration that fails or is aborted
// leaves the guest running here. A request for the migration already under
// way (same UID) changes nothing; one for a migration that ended is refused.
func (l *Launcher) Migrate(ctx context.Context, req client.MigrateRequest) (client.Status, error) {
	m, ok := l.h.(hypervisor.Migrator)
	if !ok {
		return l.Status(), fmt.Errorf("VMI %s: the hypervisor cannot migrate: %w", l.key(), errMigration)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.final != nil:
		return *l.final, errFinal
	case l.migration != nil && l.migration.Role == "source" && l.migration.UID == req.MigrationUID && req.MigrationUID != "":
		if l.migration.EndTimestamp == nil {
			return l.statusLocked(), nil // under way
		}
		return l.statusLocked(), fmt.Errorf("VMI %s: migration %s already ended: %w", l.key(), req.MigrationUID, errMigration)
	case l.migrating:
		return l.statusLocked(), fmt.Errorf("VMI %s: another migration is under way: %w", l.key(), errMigration)
	case !l.started || l.stopping:
		return l.statusLocked(), fmt.Errorf("VMI %s: no running domain to migrate: %w", l.key(), errMigration)
	}
	scheme := "qemu+unix:///system"
	if l.cfg.LibvirtSession {
		scheme = "qemu+unix:///session"
	}
	opts := hypervisor.MigrateOptions{
		DestURI:             scheme + "?socket=" + client.MigrationSocket(l.cfg.ShareDir, l.cfg.UID, 0),
		MigrateURI:          "unix://" + client.MigrationSocket(l.cfg.ShareDir, l.cfg.UID, client.DirectMigrationPort),
		DisksURI:            "unix://" + client.MigrationSocket(l.cfg.ShareDir, l.cfg.UID, client.BlockMigrationPort),
		CopyDisksUnder:      l.localDiskDirs(),
		SharedDisksUnder:    []string{filepath.Join(l.cfg.PrivateDir, "vmi-disks"), l.cfg.HotplugDiskDir},
		BandwidthMiB:        req.BandwidthMiB,
		AutoConverge:        req.AutoConverge,
		PostCopy:            req.PostCopy,
		Unsafe:              req.Unsafe,
		ParallelConnections: req.ParallelConnections,
		PathMap:             req.PathMap,
	}
	now := metav1.Now()
	l.migration = &client.MigrationStatus{UID: req.MigrationUID, Role: "source", Mode: "PreCopy", StartTimestamp: &now}
	l.migrating = true
	mctx, cancel := context.WithCancelCause(l.runCtx)
	l.cancelMigration = func() { cancel(errors.New("the launcher is stopping")) }
	mon := monitor{timeout: req.Timeout.Duration, progressTimeout: req.ProgressTimeout.Duration, postCopy: req.PostCopy, cancel: cancel}
	go l.runMigration(klog.NewContext(mctx, klog.FromContext(ctx)), mon, m, l.domain, opts)
	return l.statusLocked(), nil
}

// localDiskDirs are the directories of the disks a migration copies: the
// launcher's own (overlays, empty disks, cloud-init ISOs, config ISOs);
// claims (<PrivateDir>/vmi-disks, hotplugged ones in HotplugDiskDir) are
// shared: the VMI migrates only when they are ReadWriteMany (or shared
// host disks).
func (l *Launcher) localDiskDirs() []string {
	priv := l.cfg.PrivateDir
	return []string{l.cfg.EphemeralDiskDir, filepath.Join(priv, "config-map-disks"), filepath.Join(priv, "secret-disks"),
		filepath.Join(priv, "downwardapi-disks"), filepath.Join(priv, "service-account-disk")}
}

// monitor is KubeVirt's migration monitor: the completion and progress
// timeouts.
type monitor struct {
	timeout, progressTimeout time.Duration
	postCopy                 bool
	cancel                   context.CancelCauseFunc
	// interval between looks; 1 s when zero.
	interval time.Duration
}

// errTimeout is the cause of a migration aborted by a timeout.
type errTimeout struct{ msg string }

func (e errTimeout) Error() string { return e.msg }

func (l *Launcher) runMigration(ctx context.Context, mon monitor, m hypervisor.Migrator, name string, opts hypervisor.MigrateOptions) {
	defer mon.cancel(nil)
	log := klog.FromContext(ctx).WithValues("vmi", l.key())
	log.Info("migrating", "destination", opts.DestURI, "memory", opts.MigrateURI, "copyDisksUnder", opts.CopyDisksUnder)
	done := make(chan struct{})
	go l.followMigration(ctx, mon, m, name, done)
	result, err := m.Migrate(ctx, name, opts)
	close(done)
	var timeout errTimeout
	if cause := context.Cause(ctx); err != nil && errors.As(cause, &timeout) {
		err = fmt.Errorf("%s: %w", timeout.msg, err)
	}
	now := metav1.Now()
	l.mu.Lock()
	mig := l.migration
	l.migrating = false
	l.cancelMigration = nil
	mig.EndTimestamp = &now
	if err != nil {
		mig.Failed = true
		mig.FailureReason = err.Error()
		if mig.AbortStatus == client.AbortInProgress {
			mig.AbortStatus = client.AbortSucceeded
			mig.FailureReason = "Live migration aborted: " + err.Error()
		}
		l.mu.Unlock()
		log.Error(err, "migration failed; the guest keeps running here")
		return
	}
	mig.Completed = true
	mig.Progress = &result
	l.mu.Unlock()
	log.Info("migration completed: the guest runs on the target", "elapsed", result.Elapsed, "downtime", result.Downtime)
	l.end(context.WithoutCancel(ctx), hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonMigrated}, "the domain migrated to the target")
}

// followMigration records the job's progress every second until done,
// and applies the monitor's timeouts as KubeVirt's launcher does: past the
// completion timeout it switches to post-copy when allowed, else aborts;
// it aborts when the data left has not shrunk for the progress timeout.
func (l *Launcher) followMigration(ctx context.Context, mon monitor, m hypervisor.Migrator, name string, done <-chan struct{}) {
	interval := mon.interval
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	start := time.Now()
	lastProgress, watermark, seen := start, uint64(0), false
	log := klog.FromContext(ctx).WithValues("vmi", l.key())
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		now := time.Now()
		p, err := m.MigrationProgress(ctx, name)
		if err == nil {
			if !seen || p.DataRemaining < watermark {
				watermark, lastProgress, seen = p.DataRemaining, now, true
			}
			l.mu.Lock()
			if l.migrating && l.migration != nil {
				l.migration.Progress = &p
			}
			l.mu.Unlock()
		}
		l.mu.Lock()
		postCopy := l.migration != nil && l.migration.Mode == "PostCopy"
		l.mu.Unlock()
		switch {
		case postCopy:
			// Post-copy cannot be aborted: the target runs the guest.
		case mon.progressTimeout > 0 && now.Sub(lastProgress) > mon.progressTimeout:
			msg := fmt.Sprintf("Live migration stuck for %d seconds and has been aborted", int(now.Sub(lastProgress).Seconds()))
			log.Info(msg)
			mon.cancel(errTimeout{msg})
			return
		case mon.timeout > 0 && now.Sub(start) > mon.timeout && mon.postCopy:
			if err := m.StartPostCopy(ctx, name); err != nil {
				log.Error(err, "switching the migration to post-copy")
				continue
			}
			log.Info("the migration did not complete in time: switched to post-copy", "after", now.Sub(start))
			l.mu.Lock()
			if l.migration != nil {
				l.migration.Mode = "PostCopy"
			}
			l.mu.Unlock()
		case mon.timeout > 0 && now.Sub(start) > mon.timeout:
			msg := fmt.Sprintf("Live migration is not completed after %d seconds and has been aborted", int(mon.timeout.Seconds()))
			log.Info(msg)
			mon.cancel(errTimeout{msg})
			return
		}
	}
}

// AbortMigration aborts the migration under way; the guest keeps running
// here. Without one it fails (409).
func (l *Launcher) AbortMigration(ctx context.Context) (client.Status, error) {
	m, ok := l.h.(hypervisor.Migrator)
	l.mu.Lock()
	if !ok || !l.migrating {
		defer l.mu.Unlock()
		return l.statusLocked(), fmt.Errorf("VMI %s: %w", l.key(), hypervisor.ErrNoMigration)
	}
	if l.migration.AbortStatus == client.AbortInProgress {
		defer l.mu.Unlock()
		return l.statusLocked(), nil
	}
	l.migration.AbortStatus = client.AbortInProgress
	name := l.domain
	l.mu.Unlock()
	if err := m.AbortMigration(ctx, name); err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.migrating {
			l.migration.AbortStatus = client.AbortFailed
		}
		return l.statusLocked(), fmt.Errorf("aborting the migration of VMI %s: %w", l.key(), err)
	}
	return l.Status(), nil
}

// migrationHandlers adds the migration routes to mux:
//
//	PUT /v1/migration/target   body: the VMI; MigrationTargetInfo
//	PUT /v1/migrate            body: MigrateRequest; Status
//	PUT /v1/migration/abort    Status
//	GET /v1/migration/info     MigrationTargetInfo (the launcher's directories)
func (l *Launcher) migrationHandlers(mux *http.ServeMux) {
	mux.HandleFunc("PUT /v1/migration/target", func(w http.ResponseWriter, r *http.Request) {
		var vmi v1.VirtualMachineInstance
		if err := decodeBody(r, 8<<20, &vmi); err != nil {
			writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: "decoding the VMI: " + err.Error(), Status: l.Status()})
			return
		}
		info, err := l.PrepareMigrationTarget(r.Context(), &vmi)
		if err != nil {
			replyMigration(w, l.Status(), err)
			return
		}
		writeJSON(w, http.StatusOK, info)
	})
	mux.HandleFunc("GET /v1/migration/info", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, l.Directories())
	})
	mux.HandleFunc("PUT /v1/migrate", func(w http.ResponseWriter, r *http.Request) {
		var req client.MigrateRequest
		if err := decodeBody(r, 1<<20, &req); err != nil {
			writeJSON(w, http.StatusBadRequest, client.ErrorBody{Error: "decoding the migration request: " + err.Error(), Status: l.Status()})
			return
		}
		st, err := l.Migrate(r.Context(), req)
		replyMigration(w, st, err)
	})
	mux.HandleFunc("PUT /v1/migration/abort", func(w http.ResponseWriter, r *http.Request) {
		st, err := l.AbortMigration(r.Context())
		replyMigration(w, st, err)
	})
}

func replyMigration(w http.ResponseWriter, st client.Status, err error) {
	if errors.Is(err, errMigration) || errors.Is(err, hypervisor.ErrNoMigration) {
		writeJSON(w, http.StatusConflict, client.ErrorBody{Error: err.Error(), Status: st})
		return
	}
	reply(w, st, err)
}

// decodeBody decodes r's JSON body, at most limit bytes, into v.
func decodeBody(r *http.Request, limit int64, v any) error {
	return json.NewDecoder(io.LimitReader(r.Body, limit)).Decode(v)
}
