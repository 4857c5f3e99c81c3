package nodeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/internal/safepath"
	"github.com/vmkit/vmkit/nodeagent/launcher"
	"github.com/vmkit/vmkit/nodeagent/migrationproxy"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Live migration, the node agents' side of KubeVirt's protocol. The
// migration controller (virt-controller) creates the target launcher pod
// on another node, lists it in status.activePods, labels the VMI
// kubevirt.io/migrationTargetNodeName=<target node> and fills
// status.migrationState (migrationUid, sourceNode, targetNode, targetPod).
// Then:
//
//   - The target agent (migrationTargetInformer) wires the target pod's
//     network, has the target launcher prepare (disks; it waits for the
//     incoming domain), starts its proxy listeners (TCP with mutual TLS) to
//     that launcher's libvirt and migration sockets, and writes
//     targetNodeAddress and targetDirectMigrationNodePorts. It writes
//     targetNodeDomainDetected when the incoming domain appears and
//     targetNodeDomainReadyTimestamp once it runs there.
//   - The source agent, seeing the target's ports, serves the proxy's
//     sockets in the source launcher's file system, asks the launcher to
//     migrate (with status.migrationState.migrationConfiguration's
//     bandwidth, completion timeout, auto-converge and post-copy, else the
//     agent's) and writes startTimestamp and mode. When the guest runs on
//     the target (the source launcher ended Migrated and the target
//     reported the domain ready) it writes completed and endTimestamp. A
//     migration that failed or was aborted gets failed, completed,
//     endTimestamp and failureReason (the guest runs on the source);
//     abortRequested aborts the migration under way, or ends one not
//     started yet.
//   - The target agent then switches the VMI over in one write (KubeVirt's
//     ackMigrationCompletion and finalCleanup): status.nodeName and the
//     kubevirt.io/nodeName label become its node, evacuationNodeName is
//     cleared, the migrationTargetNodeName label goes; it stops its
//     listeners. On failure it stops the target launcher and drops the
//     label.
//
// The source launcher's end (Shutoff, Migrated) never becomes a VMI phase.

// MigrationConfig lets the agent take part in live migrations.
type MigrationConfig struct {
	// Address is this node's migration address: the target proxies
	// listen on it and source agents connect to it (targetNodeAddress).
	Address string
	// ServerTLS secures the target proxies (the agent's serving
	// certificate; the migration proxy's client certificate, signed by the
	// installation's CA, required: installstrategy.MigrationClientCommonName,
	// which the REST API refuses); ClientTLS the source side (that client
	// certificate, the CA as roots). Both nil only with a loopback
	// Address.
	ServerTLS, ClientTLS *tls.Config
	// HandlerNamespace is the namespace of the node agents' pods
	// (label kubevirt.io=virt-handler). A source agent connects a launcher
	// only to a target address that is the IP of the running agent pod on
	// the migration's target node there. Required with ClientTLS; without
	// it (a loopback-only, plain TCP setup) the address is not looked up.
	HandlerNamespace string
	// BandwidthMiB limits each migration (MiB/s, the KubeVirt CR's
	// bandwidthPerMigration); 0 is unlimited.
	BandwidthMiB uint64
	// CompletionTimeoutPerGiB aborts a migration that has not completed
	// within this many seconds per GiB of the guest's memory (the KubeVirt
	// CR's completionTimeoutPerGiB); DefaultCompletionTimeoutPerGiB when
	// zero, none when negative.
	CompletionTimeoutPerGiB int64
	// ProgressTimeout aborts a migration whose data left has not shrunk
	// for this many seconds (the KubeVirt CR's progressTimeout);
	// DefaultProgressTimeout when zero, none when negative.
	ProgressTimeout int64
	// AllowAutoConverge and AllowPostCopy are the KubeVirt CR's: with
	// post-copy a migration past its completion timeout switches to
	// post-copy instead of being aborted.
	AllowAutoConverge, AllowPostCopy bool
	// ParallelConnections sends memory over that many connections when
	// above 1 (KubeVirt's parallel migration threads).
	ParallelConnections int
	// TargetReadyTimeout is how long the source waits, after its launcher
	// migrated the domain away, for the target to report it running
	// before the VMI fails (KubeVirt's 60 s); 60 s when zero.
	TargetReadyTimeout time.Duration
}

// KubeVirt's defaults of completionTimeoutPerGiB and progressTimeout.
const (
	DefaultCompletionTimeoutPerGiB = 150
	DefaultProgressTimeout         = 150
)

// Events of migrations (KubeVirt's reasons).
const (
	ReasonPreparingTarget = "PreparingTarget"
	ReasonMigrating       = "Migrating"
	ReasonMigrated        = "Migrated"
	// ReasonMigrationFailed is a VMI's phase reason when its guest
	// migrated away but the target never reported it running.
	ReasonMigrationFailed = "MigrationFailed"
)

// targetKeyPrefix starts the queue key of a VMI this node is the
// migration target of.
const targetKeyPrefix = "migration-target:"

func isTargetKey(key string) bool { return strings.HasPrefix(key, targetKeyPrefix) }

// migrationDone is KubeVirt's isMigrationDone: ended and completed or failed.
func migrationDone(s *v1.VirtualMachineInstanceMigrationState) bool {
	return s == nil || (s.EndTimestamp != nil && (s.Completed || s.Failed))
}

// newMigrationProxy returns the agent's proxy manager, nil without
// Config.Migration.
func newMigrationProxy(cfg *MigrationConfig) (*migrationproxy.Manager, error) {
	if cfg == nil {
		return nil, nil
	}
	if cfg.Address == "" {
		return nil, errors.New("nodeagent: Migration.Address is required")
	}
	if cfg.ClientTLS != nil && cfg.HandlerNamespace == "" {
		return nil, errors.New("nodeagent: Migration.HandlerNamespace is required with Migration.ClientTLS (target addresses are checked against the node agents' pods)")
	}
	return migrationproxy.New(migrationproxy.Config{ListenAddress: cfg.Address, ServerTLS: cfg.ServerTLS, ClientTLS: cfg.ClientTLS})
}

// enqueueTarget queues a VMI of the migration target informer.
func (a *Agent) enqueueTarget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		a.queue.Add(targetKeyPrefix + key)
	}
}

// syncMigrationTarget prepares this node as the target of a VMI's
// migration and reports the target's side (see the comment above).
func (a *Agent) syncMigrationTarget(ctx context.Context, key string) (time.Duration, error) {
	vmiKey := strings.TrimPrefix(key, targetKeyPrefix)
	ns, name, err := cache.SplitMetaNamespaceKey(vmiKey)
	if err != nil {
		return 0, nil
	}
	vmi, err := a.targetLister.VirtualMachineInstances(ns).Get(name)
	if apierrors.IsNotFound(err) {
		a.stopTargetProxies(vmiKey)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if a.proxy == nil {
		return 0, nil // this agent does not take part in migrations
	}
	state := vmi.Status.MigrationState
	if state == nil || state.TargetNode != a.cfg.NodeName || vmi.Labels[v1.MigrationTargetNodeNameLabel] != a.cfg.NodeName {
		return 0, nil
	}
	log := klog.FromContext(ctx).WithValues("vmi", vmiKey, "migration", state.MigrationUID)
	if vmi.DeletionTimestamp != nil || vmi.IsFinal() {
		a.stopTarget(vmi)
		return 0, nil
	}
	if migrationDone(state) {
		return 0, a.finishTarget(ctx, vmi)
	}
	a.notePods(vmi) // the target pod, once virt-controller lists it
	c := a.client(vmi.UID)
	st, err := c.State(ctx)
	if launcher.IsGone(err) {
		return a.cfg.PollInterval, nil // the target pod is starting
	}
	if err != nil {
		return 0, fmt.Errorf("migration target %s: %w", vmiKey, err)
	}
	updated := vmi.DeepCopy()
	ms := updated.Status.MigrationState
	ports := a.proxy.TargetPorts(string(vmi.UID))
	if ports == nil {
		if st.Final {
			return 0, fmt.Errorf("migration target %s: the target launcher ended: %s", vmiKey, st.Message)
		}
		// A non-root target launcher's QEMU opens the same devices and
		// disks as the source's: /dev/kvm, /dev/net/tun, Block claims.
		if err := a.prepareLauncher(ctx, vmi, c); err != nil {
			a.metrics.launcherErrors.WithLabelValues("prepare").Inc()
			a.recorder.Eventf(vmi, corev1.EventTypeWarning, "SyncFailed", "The migration target's devices and disks could not be given to its user: %v", err)
			return 0, fmt.Errorf("preparing the launcher of migration target %s: %w", vmiKey, err)
		}
		if _, err := a.wireNetwork(ctx, vmi, c); err != nil {
			a.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonNetworkSetupFailed, "The migration target's network could not be set up: %v", err)
			return 0, fmt.Errorf("wiring the network of migration target %s: %w", vmiKey, err)
		}
		info, err := c.PrepareMigrationTarget(ctx, vmi)
		if err != nil {
			a.recorder.Eventf(vmi, corev1.EventTypeWarning, "SyncFailed", "The migration target could not be prepared: %v", err)
			return 0, fmt.Errorf("preparing migration target %s: %w", vmiKey, err)
		}
		_, root, err := launcherRoot(ctx, c)
		if err != nil {
			return 0, fmt.Errorf("migration target %s: %w", vmiKey, err)
		}
		uid := string(vmi.UID)
		// Each socket's directory is opened once, resolved as the
		// launcher sees its own file system; the proxy never follows a
		// path in it again (the launcher's user could swap it for a link
		// to another socket of the node).
		sockets := map[int]migrationproxy.Socket{}
		for port, p := range map[int]string{
			migrationproxy.LibvirtPort:         info.LibvirtSocket,
			migrationproxy.DirectMigrationPort: launcher.MigrationSocket(info.ShareDir, uid, launcher.DirectMigrationPort),
			migrationproxy.BlockMigrationPort:  launcher.MigrationSocket(info.ShareDir, uid, launcher.BlockMigrationPort),
		} {
			dir, err := safepath.OpenInRoot(root, filepath.Dir(p))
			if err != nil {
				for _, s := range sockets {
					_ = s.Dir.Close()
				}
				return 0, fmt.Errorf("migration target %s: %s in the launcher's root %s: %w", vmiKey, p, root, err)
			}
			sockets[port] = migrationproxy.Socket{Dir: dir, Name: filepath.Base(p)}
		}
		ports, err = a.proxy.StartTarget(uid, sockets)
		if err != nil {
			return 0, fmt.Errorf("migration target %s: %w", vmiKey, err)
		}
		a.mu.Lock()
		a.targets[vmiKey] = vmi.UID
		a.mu.Unlock()
		log.Info("migration target listening", "address", a.cfg.Migration.Address, "ports", ports)
	}
	if ms.TargetNodeAddress != a.cfg.Migration.Address || !equality.Semantic.DeepEqual(ms.TargetDirectMigrationNodePorts, ports) {
		ms.TargetNodeAddress, ms.TargetDirectMigrationNodePorts = a.cfg.Migration.Address, ports
		a.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonPreparingTarget, "Migration Target is listening at %s, on ports: %s", a.cfg.Migration.Address, portList(ports))
	}
	if m := st.Migration; m != nil && m.Role == "target" && (m.DomainDetected || st.Started) {
		ms.TargetNodeDomainDetected = true
	}
	if st.Started && running(st.State) && ms.TargetNodeDomainReadyTimestamp == nil {
		now := metav1.NewTime(a.now())
		ms.TargetNodeDomainReadyTimestamp = &now
		log.Info("the migrated domain runs on the target")
	}
	if err := a.updateVMI(ctx, vmi, updated); err != nil {
		return 0, err
	}
	return a.cfg.PollInterval, nil
}

// finishTarget ends this node's part of a migration that completed or
// failed. On success the VMI becomes this node's: status.nodeName and the
// kubevirt.io/nodeName label, evacuationNodeName cleared, the target label
// removed, in one write. On failure the target launcher is stopped
// (virt-controller deletes its pod) and the target label removed. The
// listeners stop either way.
func (a *Agent) finishTarget(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	key, _ := cache.MetaNamespaceKeyFunc(vmi)
	a.stopTargetProxies(key)
	updated := vmi.DeepCopy()
	delete(updated.Labels, v1.MigrationTargetNodeNameLabel)
	if vmi.Status.MigrationState.Failed {
		if _, err := a.client(vmi.UID).Shutdown(ctx); err != nil && !launcher.IsGone(err) {
			return fmt.Errorf("stopping the target launcher of failed migration %s: %w", key, err)
		}
		return a.updateVMI(ctx, vmi, updated)
	}
	switched := vmi.Status.NodeName != a.cfg.NodeName
	updated.Status.NodeName = a.cfg.NodeName
	updated.Labels[v1.NodeNameLabel] = a.cfg.NodeName
	updated.Status.EvacuationNodeName = ""
	if err := a.updateVMI(ctx, vmi, updated); err != nil {
		return err
	}
	if switched {
		klog.FromContext(ctx).Info("the VMI migrated here", "vmi", key, "from", vmi.Status.NodeName)
		a.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonMigrated, "The VirtualMachineInstance migrated to node %s.", a.cfg.NodeName)
	}
	return nil
}

func (a *Agent) stopTarget(vmi *v1.VirtualMachineInstance) {
	key, _ := cache.MetaNamespaceKeyFunc(vmi)
	a.stopTargetProxies(key)
}

func (a *Agent) stopTargetProxies(key string) {
	a.mu.Lock()
	uid, ok := a.targets[key]
	delete(a.targets, key)
	a.mu.Unlock()
	if ok && a.proxy != nil {
		a.proxy.StopTarget(string(uid))
	}
}

// isMigrationSource reports whether this node is the source of vmi's
// migration in progress (or of one that ended and was not written yet).
func (a *Agent) isMigrationSource(vmi *v1.VirtualMachineInstance) bool {
	s := vmi.Status.MigrationState
	return a.proxy != nil && s != nil && s.SourceNode == a.cfg.NodeName && vmi.Status.NodeName == a.cfg.NodeName && s.MigrationUID != "" && !migrationDone(s)
}

// syncMigrationSource drives the source side of vmi's migration given the
// launcher's status (st, nil when the launcher is gone without a final
// status). It reports whether it handled the VMI (it wrote it, or must not
// have its phase written: the caller then writes nothing else this time)
// and how soon to look again.
func (a *Agent) syncMigrationSource(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, c *launcher.Client, st *launcher.Status) (bool, time.Duration, error) {
	state := vmi.Status.MigrationState
	log := klog.FromContext(ctx).WithValues("vmi", key, "migration", state.MigrationUID)
	var mig *launcher.MigrationStatus
	if st != nil && st.Migration != nil && st.Migration.Role == "source" && st.Migration.UID == state.MigrationUID {
		mig = st.Migration
	}
	updated := vmi.DeepCopy()
	ms := updated.Status.MigrationState
	now := metav1.NewTime(a.now())
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
			if a.now().Sub(end.Time) < a.targetReadyTimeout() {
				return true, a.cfg.PollInterval, a.updateVMI(ctx, vmi, updated)
			}
			ms.Completed, ms.Failed, ms.EndTimestamp = true, true, &end
			ms.FailureReason = "the domain was never observed running on the target after the migration completed"
			a.enterPhase(&updated.Status, v1.Failed, ReasonMigrationFailed, now)
			a.recorder.Event(vmi, corev1.EventTypeWarning, ReasonMigrated, "The VirtualMachineInstance's domain was never observed on the target after the migration completed within the timeout period.")
			a.proxy.StopSource(string(vmi.UID))
			return true, 0, a.updateVMI(ctx, vmi, updated)
		}
		ms.Completed, ms.EndTimestamp, ms.Mode = true, mig.EndTimestamp, mig.Mode
		if ms.EndTimestamp == nil {
			ms.EndTimestamp = &now
		}
		if err := a.updateVMI(ctx, vmi, updated); err != nil {
			return true, 0, err
		}
		a.proxy.StopSource(string(vmi.UID))
		if p := mig.Progress; p != nil {
			log.Info("migrated", "target", ms.TargetNode, "elapsed", p.Elapsed, "downtime", p.Downtime)
		}
		return true, a.cfg.PollInterval, nil
	case mig != nil && mig.Failed && mig.EndTimestamp != nil:
		ms.Failed, ms.Completed, ms.EndTimestamp, ms.Mode, ms.FailureReason = true, true, mig.EndTimestamp, mig.Mode, mig.FailureReason
		if ms.StartTimestamp == nil {
			ms.StartTimestamp = mig.StartTimestamp
		}
		if err := a.updateVMI(ctx, vmi, updated); err != nil {
			return true, 0, err
		}
		a.proxy.StopSource(string(vmi.UID))
		a.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonMigrated, "VirtualMachineInstance migration uid %s failed. reason:%s", state.MigrationUID, mig.FailureReason)
		return true, a.cfg.PollInterval, nil // the guest runs here: the ordinary sync goes on
	case st == nil || st.Final:
		return false, 0, nil // the launcher ended otherwise: the ordinary sync reports it
	case state.AbortRequested:
		if mig == nil {
			// Not started: nothing to abort; the migration ends failed.
			ms.Failed, ms.Completed, ms.EndTimestamp = true, true, &now
			ms.FailureReason = "Migration aborted before it started"
			a.proxy.StopSource(string(vmi.UID))
			a.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonMigrating, "Migration %s aborted before it started.", state.MigrationUID)
			return true, a.cfg.PollInterval, a.updateVMI(ctx, vmi, updated)
		}
		if mig.AbortStatus == "" {
			if _, err := c.AbortMigration(ctx); err != nil && !errors.Is(err, hypervisor.ErrNoMigration) {
				var lerr *launcher.Error
				if !errors.As(err, &lerr) || lerr.Code != 409 {
					return true, 0, fmt.Errorf("aborting the migration of %s: %w", key, err)
				}
			}
			a.recorder.Event(vmi, corev1.EventTypeNormal, ReasonMigrating, "Aborting the migration of the VirtualMachineInstance.")
		}
		return false, a.cfg.PollInterval, nil
	case mig != nil:
		// Under way.
		if ms.StartTimestamp == nil || ms.Mode == "" {
			ms.StartTimestamp, ms.Mode = mig.StartTimestamp, mig.Mode
			return true, a.cfg.PollInterval, a.updateVMI(ctx, vmi, updated)
		}
		return false, a.cfg.PollInterval, nil
	case !st.Started || state.TargetNodeAddress == "" || len(state.TargetDirectMigrationNodePorts) == 0:
		return false, a.cfg.PollInterval, nil // waiting for the target's ports
	}
	// Start: check the migration, then the proxy's sockets in the
	// launcher's file system, then the launcher's migration.
	if err := a.verifyMigration(ctx, vmi); err != nil {
		var bad *unverifiedMigration
		if !errors.As(err, &bad) {
			return false, 0, fmt.Errorf("migration of %s: %w", key, err)
		}
		log.Info("refusing a migration that cannot be verified", "reason", err.Error())
		a.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonMigrated, "VirtualMachineInstance migration uid %s refused: %v", state.MigrationUID, err)
		ms.Failed, ms.Completed, ms.EndTimestamp, ms.FailureReason = true, true, &now, err.Error()
		return true, 0, a.updateVMI(ctx, vmi, updated)
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
	owner, group, err := launcherUser(pid)
	var dir *safepath.Dir
	if err == nil {
		dir, err = safepath.MkdirAllInRoot(root, filepath.Join(info.ShareDir, launcher.MigrationProxyDir), 0o755)
	}
	if err == nil {
		// The sockets are the launcher user's alone (its libvirt and QEMU
		// connect to them), not the world's.
		err = a.proxy.StartSource(uid, migrationproxy.Source{
			TargetAddress: state.TargetNodeAddress, Ports: state.TargetDirectMigrationNodePorts, UID: owner, GID: group,
			Dir: dir, SocketName: func(port int) string { return filepath.Base(launcher.MigrationSocket(info.ShareDir, uid, port)) },
		})
	}
	if err != nil {
		a.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonMigrated, "VirtualMachineInstance migration uid %s failed. reason:%v", state.MigrationUID, err)
		ms.Failed, ms.Completed, ms.EndTimestamp, ms.FailureReason = true, true, &now, err.Error()
		return true, 0, errors.Join(err, a.updateVMI(ctx, vmi, updated))
	}
	req := a.migrateRequest(vmi)
	started, err := c.Migrate(ctx, req)
	if err != nil {
		return false, 0, fmt.Errorf("starting the migration of %s: %w", key, err)
	}
	log.Info("migrating", "target", state.TargetNode, "address", state.TargetNodeAddress, "ports", state.TargetDirectMigrationNodePorts)
	a.recorder.Event(vmi, corev1.EventTypeNormal, ReasonMigrating, "VirtualMachineInstance is migrating.")
	if m := started.Migration; m != nil {
		ms.StartTimestamp, ms.Mode = m.StartTimestamp, m.Mode
	}
	return true, a.cfg.PollInterval, a.updateVMI(ctx, vmi, updated)
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
func (a *Agent) verifyMigration(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	state := vmi.Status.MigrationState
	migs, err := a.cfg.Client.KubevirtV1().VirtualMachineInstanceMigrations(vmi.Namespace).List(ctx, metav1.ListOptions{})
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
	ns := a.cfg.Migration.HandlerNamespace
	if ns == "" {
		return nil // plain TCP on loopback only (migrationproxy refuses more)
	}
	pods, err := a.cfg.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
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

// migrateRequest is the launcher's migration request for vmi: the
// settings the controller copied into migrationState.migrationConfiguration
// (the KubeVirt CR's), else the agent's.
func (a *Agent) migrateRequest(vmi *v1.VirtualMachineInstance) launcher.MigrateRequest {
	m := a.cfg.Migration
	req := launcher.MigrateRequest{
		MigrationUID: vmi.Status.MigrationState.MigrationUID, BandwidthMiB: m.BandwidthMiB,
		AutoConverge: m.AllowAutoConverge, PostCopy: m.AllowPostCopy, ParallelConnections: m.ParallelConnections,
	}
	perGiB := m.CompletionTimeoutPerGiB
	if perGiB == 0 {
		perGiB = DefaultCompletionTimeoutPerGiB
	}
	progress := m.ProgressTimeout
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

func (a *Agent) targetReadyTimeout() time.Duration {
	if t := a.cfg.Migration.TargetReadyTimeout; t > 0 {
		return t
	}
	return 60 * time.Second
}

func (a *Agent) enterPhase(s *v1.VirtualMachineInstanceStatus, p v1.VirtualMachineInstancePhase, reason string, now metav1.Time) {
	if s.Phase == p {
		return
	}
	s.Phase, s.Reason = p, reason
	s.PhaseTransitionTimestamps = append(s.PhaseTransitionTimestamps, v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: now})
}

// updateVMI writes updated (status, labels) when it differs from vmi.
func (a *Agent) updateVMI(ctx context.Context, vmi, updated *v1.VirtualMachineInstance) error {
	if equality.Semantic.DeepEqual(vmi.Status, updated.Status) && equality.Semantic.DeepEqual(vmi.Labels, updated.Labels) {
		return nil
	}
	if _, err := a.cfg.Client.KubevirtV1().VirtualMachineInstances(vmi.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return nil
}

// launcherRoot is the launcher's PID and its root directory as the agent
// reaches it (/proc/<pid>/root): its sockets are in its own file system.
func launcherRoot(ctx context.Context, c *launcher.Client) (int, string, error) {
	pid, err := c.PID(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("finding the launcher process: %w", err)
	}
	if pid <= 0 {
		return 0, "", errors.New("the launcher runs in a PID namespace the node agent cannot see (virt-handler needs hostPID)")
	}
	return pid, "/proc/" + strconv.Itoa(pid) + "/root", nil
}

func portList(ports map[string]int) string {
	keys := make([]string, 0, len(ports))
	for k := range ports {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}
