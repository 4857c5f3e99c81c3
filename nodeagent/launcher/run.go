package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// Run serves the command socket until the domain ends, then cleans up and
// returns the final status. Cancelling ctx stops the guest gracefully
// first. It returns an error when the socket cannot be served or no VMI
// was synced within Config.SyncTimeout.
func (l *Launcher) Run(ctx context.Context) (client.Status, error) {
	defer l.stopRun()
	log := klog.FromContext(ctx).WithValues("vmi", l.key(), "uid", l.cfg.UID)
	dir := client.SocketDir(l.cfg.ShareDir, l.cfg.UID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return client.Status{}, fmt.Errorf("launcher of VMI %s: %w", l.key(), err)
	}
	_ = os.Remove(client.FinalPath(l.cfg.ShareDir, l.cfg.UID))
	sock := client.SocketPath(l.cfg.ShareDir, l.cfg.UID)
	_ = os.Remove(sock) // a stale socket of an earlier launcher
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return client.Status{}, fmt.Errorf("launcher of VMI %s: %w", l.key(), err)
	}
	srv := &http.Server{Handler: l.Handler(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("launcher serving", "socket", sock)

	var timeout <-chan time.Time
	if l.cfg.SyncTimeout > 0 {
		t := time.NewTimer(l.cfg.SyncTimeout)
		defer t.Stop()
		timeout = t.C
	}
	tick := time.NewTicker(l.cfg.PollInterval)
	defer tick.Stop()
	var runErr error
loop:
	for {
		select {
		case <-l.done:
			break loop
		case err := <-serveErr:
			runErr = fmt.Errorf("launcher of VMI %s: serving %s: %w", l.key(), sock, err)
			l.stop(context.WithoutCancel(ctx), true)
			break loop
		case <-timeout:
			select {
			case <-l.synced:
			default:
				runErr = fmt.Errorf("launcher of VMI %s: no domain was synced within %v", l.key(), l.cfg.SyncTimeout)
				l.end(context.WithoutCancel(ctx), hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonFailed}, runErr.Error())
				break loop
			}
		case <-ctx.Done():
			l.mu.Lock()
			l.terminated = !l.stopping
			l.mu.Unlock()
			log.Info("stopping the guest", "grace", l.cfg.GracePeriod)
			l.stop(context.WithoutCancel(ctx), true)
			break loop
		case <-tick.C:
			l.poll(ctx)
		}
	}
	// Another caller's end (a Kill while Run's own stop ran) may still be
	// destroying the domain and removing the directories: the launcher
	// exits only once that is done and the final status is written.
	<-l.done
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	_ = os.Remove(sock)
	l.mu.Lock()
	final := *l.final
	l.mu.Unlock()
	log.Info("launcher done", "state", final.State, "reason", final.Reason)
	return final, runErr
}

// poll checks the domain's state and ends the launcher when it ended.
func (l *Launcher) poll(ctx context.Context) {
	l.mu.Lock()
	started, name, final, incoming, migrating := l.started, l.domain, l.final, l.incoming, l.migrating
	l.mu.Unlock()
	if incoming != "" && final == nil {
		l.pollIncoming(ctx, incoming)
		return
	}
	if !started || final != nil || migrating {
		return // a migration's end is runMigration's to record
	}
	st, err := l.h.State(ctx, name)
	if l.hypervisorLost(err) {
		l.abandon(ctx, err)
		return
	}
	switch {
	case errors.Is(err, hypervisor.ErrNotFound):
		l.end(ctx, hypervisor.DomainState{State: hypervisor.StateShutoff, Reason: hypervisor.ReasonUnknown}, "the domain disappeared")
	case err != nil:
		klog.FromContext(ctx).Error(err, "domain state", "vmi", l.key())
	case st.State == hypervisor.StateShutoff || st.State == hypervisor.StateCrashed:
		l.end(ctx, st, "")
	default:
		l.mu.Lock()
		l.last = st
		if l.pluggingLocked() {
			if err := l.refreshMemoryLocked(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "plugged memory", "vmi", l.key())
			}
		}
		l.mu.Unlock()
	}
}

// end records the final status, removes the domain and what the launcher
// created, and lets Run return. Only the first call does anything.
func (l *Launcher) end(ctx context.Context, st hypervisor.DomainState, msg string) {
	l.mu.Lock()
	if l.final != nil {
		l.mu.Unlock()
		return
	}
	final := l.statusLocked()
	final.State, final.Reason, final.Final, final.Message = st.State, st.Reason, true, msg
	l.final = &final
	name, defined := l.domain, l.domain != "" && !l.abandoned
	dirs := l.createdAt
	l.mu.Unlock()

	log := klog.FromContext(ctx).WithValues("vmi", l.key())
	l.cancelThaw()
	l.console.Close()
	if defined {
		if err := l.h.Destroy(ctx, name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			log.Error(err, "destroying the domain")
		}
		if err := l.h.Undefine(ctx, name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			log.Error(err, "undefining the domain")
		}
	}
	// The container disks' copies, in the pod's own directory for them
	// (seen at <dir>/<uid>/<name> or, where the sidecar's mount is the
	// per-VMI subdirectory, at <dir>/<name>): their sidecars exit once
	// these are gone, so the pod completes (a migration's source pod too).
	if l.cfg.ContainerDiskDir != "" {
		entries, _ := os.ReadDir(l.cfg.ContainerDiskDir)
		for _, e := range entries {
			dirs = append(dirs, filepath.Join(l.cfg.ContainerDiskDir, e.Name()))
		}
	}
	removeDirs(log, dirs)
	if err := writeFileAtomic(client.FinalPath(l.cfg.ShareDir, l.cfg.UID), final); err != nil {
		log.Error(err, "writing the final status")
	}
	close(l.done)
}

func writeFileAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// removeDirs removes the launcher's directories. The domain's helpers may
// still write into them just after the domain is gone (virtlogd flushing
// the serial log of a killed QEMU, the VNC socket of a QEMU that did not
// exit cleanly), so a directory that reappears within a second is removed
// again.
func removeDirs(log klog.Logger, dirs []string) {
	for attempt := 0; attempt < 10; attempt++ {
		left := false
		for _, d := range dirs {
			if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
				continue
			}
			left = true
			if err := os.RemoveAll(d); err != nil && attempt == 9 {
				log.Error(err, "removing", "path", d)
			}
		}
		if !left && attempt > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
