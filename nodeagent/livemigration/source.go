package livemigration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/internal/procfs"
	"github.com/vmkit/vmkit/nodeagent/internal/safepath"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/migrationproxy"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// IsSource reports whether this node is the source of vmi's migration in
// progress (or of one that ended and was not written yet): SyncSource's
// to drive.
func (m *Migrator) IsSource(vmi *v1.VirtualMachineInstance) bool {
	s := vmi.Status.MigrationState
	node := m.b.NodeName()
	return m.proxy != nil && s != nil && s.SourceNode == node && vmi.Status.NodeName == node && s.MigrationUID != "" && !Done(s)
}

// SyncSource drives the source side of the migration of vmi (namespace/name
// key, whose launcher is c) given the launcher's status (st, nil when the
// launcher is gone without a final status). It reports whether it handled
// the VMI (it wrote it, or must not have its phase written: the caller then
// writes nothing else this time) and how soon to look again.
func (m *Migrator) SyncSource(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, c *client.Client, st *client.Status) (bool, time.Duration, error) {
	state := vmi.Status.MigrationState
	log := klog.FromContext(ctx).WithValues("vmi", key, "migration", state.MigrationUID)
	var mig *client.MigrationStatus
	if st != nil && st.Migration != nil && st.Migration.Role == "source" && st.Migration.UID == state.MigrationUID {
		mig = st.Migration
	}
	updated := vmi.DeepCopy()
	ms := updated.Status.MigrationState
	now := metav1.NewTime(m.now())
	switch {
	case mig != nil && mig.Completed:
		// The guest left: completed once the target runs it (the target
		// agent then switches the VMI over).
		if ms.StartTimestamp == nil {
			ms.StartTimestamp = mig.StartTimestamp
		}
		if ms.TargetNodeDomainReadyTimestamp == nil {
			end := now
			if mig.EndTimestamp != nil {
				end = *mig.EndTimestamp
			}
			if m.now().Sub(end.Time) < m.targetReadyTimeout() {
				return true, m.poll, m.updateVMI(ctx, vmi, updated)
			}
			ms.Completed, ms.Failed, ms.EndTimestamp = true, true, &end
			ms.FailureReason = "the domain was never observed running on the target after the migration completed"
			enterPhase(&updated.Status, v1.Failed, ReasonMigrationFailed, now)
			m.b.Eventf(vmi, corev1.EventTypeWarning, ReasonMigrated, "The VirtualMachineInstance's domain was never observed on the target after the migration completed within the timeout period.")
			m.proxy.StopSource(string(vmi.UID))
			return true, 0, m.updateVMI(ctx, vmi, updated)
		}
		ms.Completed, ms.EndTimestamp, ms.Mode = true, mig.EndTimestamp, mig.Mode
		if ms.EndTimestamp == nil {
			ms.EndTimestamp = &now
		}
		if err := m.updateVMI(ctx, vmi, updated); err != nil {
			return true, 0, err
		}
		m.proxy.StopSource(string(vmi.UID))
		if p := mig.Progress; p != nil {
			log.Info("migrated", "target", ms.TargetNode, "elapsed", p.Elapsed, "downtime", p.Downtime)
		}
		return true, m.poll, nil
	case mig != nil && mig.Failed && mig.EndTimestamp != nil:
		ms.Failed, ms.Completed, ms.EndTimestamp, ms.Mode, ms.FailureReason = true, true, mig.EndTimestamp, mig.Mode, mig.FailureReason
		if ms.StartTimestamp == nil {
			ms.StartTimestamp = mig.StartTimestamp
		}
		if err := m.updateVMI(ctx, vmi, updated); err != nil {
			return true, 0, err
		}
		m.proxy.StopSource(string(vmi.UID))
		m.b.Eventf(vmi, corev1.EventTypeWarning, ReasonMigrated, "VirtualMachineInstance migration uid %s failed. reason:%s", state.MigrationUID, mig.FailureReason)
		return true, m.poll, nil // the guest runs here: the ordinary sync goes on
	case st == nil || st.Final:
		return false, 0, nil // the launcher ended otherwise: the ordinary sync reports it
	case state.AbortRequested:
		if mig == nil {
			// Not started: nothing to abort; the migration ends failed.
			ms.Failed, ms.Completed, ms.EndTimestamp = true, true, &now
			ms.FailureReason = "Migration aborted before it started"
			m.proxy.StopSource(string(vmi.UID))
			m.b.Eventf(vmi, corev1.EventTypeNormal, ReasonMigrating, "Migration %s aborted before it started.", state.MigrationUID)
			return true, m.poll, m.updateVMI(ctx, vmi, updated)
		}
		if mig.AbortStatus == "" {
			if _, err := c.AbortMigration(ctx); err != nil && !errors.Is(err, hypervisor.ErrNoMigration) {
				var lerr *client.Error
				if !errors.As(err, &lerr) || lerr.Code != 409 {
					return true, 0, fmt.Errorf("aborting the migration of %s: %w", key, err)
				}
			}
			m.b.Eventf(vmi, corev1.EventTypeNormal, ReasonMigrating, "Aborting the migration of the VirtualMachineInstance.")
		}
		return false, m.poll, nil
	case mig != nil:
		// Under way.
		if ms.StartTimestamp == nil || ms.Mode == "" {
			ms.StartTimestamp, ms.Mode = mig.StartTimestamp, mig.Mode
			return true, m.poll, m.updateVMI(ctx, vmi, updated)
		}
		return false, m.poll, nil
	case !st.Started || state.TargetNodeAddress == "" || len(state.TargetDirectMigrationNodePorts) == 0:
		return false, m.poll, nil // waiting for the target's ports
	}
	// Start: check the migration, then the proxy's sockets in the
	// launcher's file system, then the launcher's migration.
	if err := m.verifyMigration(ctx, vmi); err != nil {
		var bad *unverifiedMigration
		if !errors.As(err, &bad) {
			return false, 0, fmt.Errorf("migration of %s: %w", key, err)
		}
		log.Info("refusing a migration that cannot be verified", "reason", err.Error())
		m.b.Eventf(vmi, corev1.EventTypeWarning, ReasonMigrated, "VirtualMachineInstance migration uid %s refused: %v", state.MigrationUID, err)
		ms.Failed, ms.Completed, ms.EndTimestamp, ms.FailureReason = true, true, &now, err.Error()
		return true, 0, m.updateVMI(ctx, vmi, updated)
	}
	info, err := c.MigrationInfo(ctx)
	if err != nil {
		return false, 0, fmt.Errorf("migration of %s: %w", key, err)
	}
	pid, root, err := launcherRoot(ctx, c)
	if err != nil {
		return false, 0, fmt.Errorf("migration of %s: %w", key, err)
	}
	uid := string(vmi.UID)
	// The sockets' directory is opened once, resolved as the launcher
	// sees its own file system (its /var/run may be a link to /run), and
	// the proxy binds in it without resolving a path again.
	owner, group, err := procfs.User(pid)
	var dir *safepath.Dir
	if err == nil {
		dir, err = safepath.MkdirAllInRoot(root, filepath.Join(info.ShareDir, client.MigrationProxyDir), 0o755)
	}
	if err == nil {
		// The sockets are the launcher user's alone (its libvirt and QEMU
		// connect to them), not the world's.
		err = m.proxy.StartSource(uid, migrationproxy.Source{
			TargetAddress: state.TargetNodeAddress, Ports: state.TargetDirectMigrationNodePorts, UID: owner, GID: group,
			Dir: dir, SocketName: func(port int) string { return filepath.Base(client.MigrationSocket(info.ShareDir, uid, port)) },
		})
	}
	if err != nil {
		m.b.Eventf(vmi, corev1.EventTypeWarning, ReasonMigrated, "VirtualMachineInstance migration uid %s failed. reason:%v", state.MigrationUID, err)
		ms.Failed, ms.Completed, ms.EndTimestamp, ms.FailureReason = true, true, &now, err.Error()
		return true, 0, errors.Join(err, m.updateVMI(ctx, vmi, updated))
	}
	req := m.cfg.MigrateRequest(vmi)
	started, err := c.Migrate(ctx, req)
	if err != nil {
		return false, 0, fmt.Errorf("starting the migration of %s: %w", key, err)
	}
	log.Info("migrating", "target", state.TargetNode, "address", state.TargetNodeAddress, "ports", state.TargetDirectMigrationNodePorts)
	m.b.Eventf(vmi, corev1.EventTypeNormal, ReasonMigrating, "VirtualMachineInstance is migrating.")
	if m := started.Migration; m != nil {
		ms.StartTimestamp, ms.Mode = m.StartTimestamp, m.Mode
	}
	return true, m.poll, m.updateVMI(ctx, vmi, updated)
}

// unverifiedMigration is a migration in a VMI's status that the source
// agent cannot match with the API's objects: it is refused, not retried.
type unverifiedMigration struct{ err error }

func (e *unverifiedMigration) Error() string { return e.err.Error() }
func (e *unverifiedMigration) Unwrap() error { return e.err }

// verifyMigration checks what vmi's status.migrationState says before the
// source agent connects the launcher to another node: only vmkit's
// components write a VMI's status, but the agent does not rely on that
// alone (a status forged where the admission policy is missing would
// otherwise open a tunnel with the agent's identity to any address). The
// migration must be a VirtualMachineInstanceMigration of that UID for this
// VMI that has not ended, and the target address the IP of the running
// node agent pod on the target node (Migration.HandlerNamespace).
func (m *Migrator) verifyMigration(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	state := vmi.Status.MigrationState
	migs, err := m.client.KubevirtV1().VirtualMachineInstanceMigrations(vmi.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("reading the migrations of namespace %s: %w", vmi.Namespace, err)
	}
	var mig *v1.VirtualMachineInstanceMigration
	for i := range migs.Items {
		if migs.Items[i].UID == state.MigrationUID {
			mig = &migs.Items[i]
		}
	}
	switch {
	case mig == nil:
		return &unverifiedMigration{fmt.Errorf("status.migrationState.migrationUid %s: no VirtualMachineInstanceMigration of that UID in namespace %s", state.MigrationUID, vmi.Namespace)}
	case mig.Spec.VMIName != vmi.Name:
		return &unverifiedMigration{fmt.Errorf("status.migrationState.migrationUid %s: VirtualMachineInstanceMigration %s/%s migrates %q, not %q", state.MigrationUID, mig.Namespace, mig.Name, mig.Spec.VMIName, vmi.Name)}
	case mig.DeletionTimestamp != nil || mig.IsFinal():
		return &unverifiedMigration{fmt.Errorf("status.migrationState.migrationUid %s: VirtualMachineInstanceMigration %s/%s has ended", state.MigrationUID, mig.Namespace, mig.Name)}
	}
	ns := m.cfg.HandlerNamespace
	if ns == "" {
		return nil // plain TCP on loopback only (migrationproxy refuses more)
	}
	pods, err := m.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: v1.AppLabel + "=" + v1.VirtHandlerValue,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", state.TargetNode).String(),
	})
	if err != nil {
		return fmt.Errorf("finding the node agent on node %s: %w", state.TargetNode, err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != state.TargetNode || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		for _, ip := range p.Status.PodIPs {
			if ip.IP == state.TargetNodeAddress {
				return nil
			}
		}
	}
	return &unverifiedMigration{fmt.Errorf("status.migrationState.targetNodeAddress %s is not the address of a running node agent pod on node %s (namespace %s)", state.TargetNodeAddress, state.TargetNode, ns)}
}

// MigrateRequest is the source launcher's request to migrate vmi (whose
// status.migrationState names the migration): the settings the controller
// copied into migrationState.migrationConfiguration (the KubeVirt CR's),
// else the agent's, cfg; the completion timeout scales with the guest's
// memory (spec.domain.memory.guest, else its memory request), counted as
// one GiB at least.
func (cfg *Config) MigrateRequest(vmi *v1.VirtualMachineInstance) client.MigrateRequest {
	req := client.MigrateRequest{
		MigrationUID: vmi.Status.MigrationState.MigrationUID, BandwidthMiB: cfg.BandwidthMiB,
		AutoConverge: cfg.AllowAutoConverge, PostCopy: cfg.AllowPostCopy, ParallelConnections: cfg.ParallelConnections,
	}
	perGiB := cfg.CompletionTimeoutPerGiB
	if perGiB == 0 {
		perGiB = DefaultCompletionTimeoutPerGiB
	}
	progress := cfg.ProgressTimeout
	if progress == 0 {
		progress = DefaultProgressTimeout
	}
	if c := vmi.Status.MigrationState.MigrationConfiguration; c != nil {
		if c.ProgressTimeout != nil {
			progress = *c.ProgressTimeout
			if progress == 0 {
				progress = -1
			}
		}
		if q := c.BandwidthPerMigration; q != nil {
			req.BandwidthMiB = uint64(max(q.Value(), 0)) >> 20
			if q.Value() > 0 && req.BandwidthMiB == 0 {
				req.BandwidthMiB = 1 // below 1 MiB/s: libvirt's smallest limit
			}
		}
		if c.CompletionTimeoutPerGiB != nil {
			perGiB = *c.CompletionTimeoutPerGiB
			if perGiB == 0 {
				perGiB = -1
			}
		}
		if c.AllowAutoConverge != nil {
			req.AutoConverge = *c.AllowAutoConverge
		}
		if c.AllowPostCopy != nil {
			req.PostCopy = *c.AllowPostCopy
		}
		if c.UnsafeMigrationOverride != nil {
			req.Unsafe = *c.UnsafeMigrationOverride
		}
	}
	if perGiB > 0 {
		gib := 1.0
		if mem := guestMemory(vmi); mem > 0 {
			gib = math.Max(1, float64(mem)/(1<<30))
		}
		req.Timeout = metav1.Duration{Duration: time.Duration(float64(perGiB)*gib) * time.Second}
	}
	if progress > 0 {
		req.ProgressTimeout = metav1.Duration{Duration: time.Duration(progress) * time.Second}
	}
	return req
}

// guestMemory is the guest's memory in bytes: spec.domain.memory.guest,
// else the memory request.
func guestMemory(vmi *v1.VirtualMachineInstance) int64 {
	if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil {
		return m.Guest.Value()
	}
	if q, ok := vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory]; ok {
		return q.Value()
	}
	return 0
}

func (m *Migrator) targetReadyTimeout() time.Duration {
	if t := m.cfg.TargetReadyTimeout; t > 0 {
		return t
	}
	return 60 * time.Second
}
