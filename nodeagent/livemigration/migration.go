// Package livemigration is the node agents' side of KubeVirt's live
// migration protocol: a Migrator takes part in the migrations of VMIs as
// their source or target node. The migration controller (virt-controller)
// creates the target launcher pod on another node, lists it in
// status.activePods, labels the VMI
// kubevirt.io/migrationTargetNodeName=<target node> and fills
// status.migrationState (migrationUid, sourceNode, targetNode, targetPod).
// Then:
//
//   - The target agent (the VMIs of Options.Targets) wires the target pod's
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
//
// The node agent (nodeagent.Agent) is the Migrator's Backend: it syncs the
// VMIs of Options.Targets with SyncTarget and has SyncSource drive the
// migrations of the VMIs IsSource reports; the proxies between the nodes
// are nodeagent/migrationproxy's.
package livemigration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/internal/safepath"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/migrationproxy"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	listers "github.com/vmkit/vmkit/vmapi/generated/listers/vmapi/v1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Config lets a node agent take part in live migrations (virt-handler's
// --migration-* flags).
type Config struct {
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

// reasonNetworkSetupFailed is the reason of the event recorded when a
// target launcher's pod network could not be wired: the one the node agent
// records for any launcher's, nodeagent.ReasonNetworkSetupFailed (which
// this package cannot import).
const reasonNetworkSetupFailed = "NetworkSetupFailed"

// Done is KubeVirt's isMigrationDone: there is no migration, or it ended,
// completed or failed.
func Done(s *v1.VirtualMachineInstanceMigrationState) bool {
	return s == nil || (s.EndTimestamp != nil && (s.Completed || s.Failed))
}

// Migrator is a node agent's part in live migrations: the target side of
// the migrations to its node and the source side of those from it. Create
// it with New; Close stops its proxies.
type Migrator struct {
	b       Backend
	cfg     *Config // nil: the node takes no part in migrations
	client  versioned.Interface
	kube    kubernetes.Interface
	targets listers.VirtualMachineInstanceLister
	poll    time.Duration
	now     func() time.Time
	proxy   *migrationproxy.Manager // nil without cfg

	mu sync.Mutex
	// listening are the VMI UIDs of the target listeners, by VMI key.
	listening map[string]types.UID
}

// New checks opts and returns the Migrator of the node agent b; without
// opts.Config it takes part in no migration.
func New(b Backend, opts Options) (*Migrator, error) {
	m := &Migrator{
		b: b, cfg: opts.Config, client: opts.Client, kube: opts.Kube, targets: opts.Targets,
		poll: opts.PollInterval, now: opts.Now, listening: map[string]types.UID{},
	}
	if m.poll <= 0 {
		m.poll = time.Second
	}
	if m.now == nil {
		m.now = time.Now
	}
	cfg := opts.Config
	if cfg == nil {
		return m, nil
	}
	if cfg.Address == "" {
		return nil, errors.New("livemigration: Config.Address is required")
	}
	if cfg.ClientTLS != nil && cfg.HandlerNamespace == "" {
		return nil, errors.New("livemigration: Config.HandlerNamespace is required with Config.ClientTLS (target addresses are checked against the node agents' pods)")
	}
	proxy, err := migrationproxy.New(migrationproxy.Config{ListenAddress: cfg.Address, ServerTLS: cfg.ServerTLS, ClientTLS: cfg.ClientTLS})
	if err != nil {
		return nil, err
	}
	m.proxy = proxy
	return m, nil
}

// Close stops the proxies of the migrations under way on this node.
func (m *Migrator) Close() {
	if m.proxy != nil {
		m.proxy.Close()
	}
}

// SyncTarget prepares this node as the target of the migration of the VMI
// namespace/name key (one of Options.Targets) and reports the target's
// side (see the package comment). It returns how soon the VMI should be
// looked at again (0: only on its next event).
func (m *Migrator) SyncTarget(ctx context.Context, vmiKey string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(vmiKey)
	if err != nil {
		return 0, nil
	}
	vmi, err := m.targets.VirtualMachineInstances(ns).Get(name)
	if apierrors.IsNotFound(err) {
		m.stopTargetProxies(vmiKey)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if m.proxy == nil {
		return 0, nil // this agent does not take part in migrations
	}
	node := m.b.NodeName()
	state := vmi.Status.MigrationState
	if state == nil || state.TargetNode != node || vmi.Labels[v1.MigrationTargetNodeNameLabel] != node {
		return 0, nil
	}
	log := klog.FromContext(ctx).WithValues("vmi", vmiKey, "migration", state.MigrationUID)
	if vmi.DeletionTimestamp != nil || vmi.IsFinal() {
		m.stopTarget(vmi)
		return 0, nil
	}
	if Done(state) {
		return 0, m.finishTarget(ctx, vmi)
	}
	m.b.NoteLauncherPods(vmi) // the target pod, once virt-controller lists it
	c := m.b.Launcher(vmi.UID)
	st, err := c.State(ctx)
	if client.IsGone(err) {
		return m.poll, nil // the target pod is starting
	}
	if err != nil {
		return 0, fmt.Errorf("migration target %s: %w", vmiKey, err)
	}
	updated := vmi.DeepCopy()
	ms := updated.Status.MigrationState
	ports := m.proxy.TargetPorts(string(vmi.UID))
	if ports == nil {
		if st.Final {
			return 0, fmt.Errorf("migration target %s: the target launcher ended: %s", vmiKey, st.Message)
		}
		// A non-root target launcher's QEMU opens the same devices and
		// disks as the source's: /dev/kvm, /dev/net/tun, Block claims.
		if err := m.b.PrepareLauncher(ctx, vmi, c); err != nil {
			m.b.CountLauncherError("prepare")
			m.b.Eventf(vmi, corev1.EventTypeWarning, "SyncFailed", "The migration target's devices and disks could not be given to its user: %v", err)
			return 0, fmt.Errorf("preparing the launcher of migration target %s: %w", vmiKey, err)
		}
		if err := m.b.WireNetwork(ctx, vmi, c); err != nil {
			m.b.Eventf(vmi, corev1.EventTypeWarning, reasonNetworkSetupFailed, "The migration target's network could not be set up: %v", err)
			return 0, fmt.Errorf("wiring the network of migration target %s: %w", vmiKey, err)
		}
		info, err := c.PrepareMigrationTarget(ctx, vmi)
		if err != nil {
			m.b.Eventf(vmi, corev1.EventTypeWarning, "SyncFailed", "The migration target could not be prepared: %v", err)
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
			migrationproxy.DirectMigrationPort: client.MigrationSocket(info.ShareDir, uid, client.DirectMigrationPort),
			migrationproxy.BlockMigrationPort:  client.MigrationSocket(info.ShareDir, uid, client.BlockMigrationPort),
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
		ports, err = m.proxy.StartTarget(uid, sockets)
		if err != nil {
			return 0, fmt.Errorf("migration target %s: %w", vmiKey, err)
		}
		m.mu.Lock()
		m.listening[vmiKey] = vmi.UID
		m.mu.Unlock()
		log.Info("migration target listening", "address", m.cfg.Address, "ports", ports)
	}
	if ms.TargetNodeAddress != m.cfg.Address || !equality.Semantic.DeepEqual(ms.TargetDirectMigrationNodePorts, ports) {
		ms.TargetNodeAddress, ms.TargetDirectMigrationNodePorts = m.cfg.Address, ports
		m.b.Eventf(vmi, corev1.EventTypeNormal, ReasonPreparingTarget, "Migration Target is listening at %s, on ports: %s", m.cfg.Address, portList(ports))
	}
	if mig := st.Migration; mig != nil && mig.Role == "target" && (mig.DomainDetected || st.Started) {
		ms.TargetNodeDomainDetected = true
	}
	if st.Started && running(st.State) && ms.TargetNodeDomainReadyTimestamp == nil {
		now := metav1.NewTime(m.now())
		ms.TargetNodeDomainReadyTimestamp = &now
		log.Info("the migrated domain runs on the target")
	}
	if err := m.updateVMI(ctx, vmi, updated); err != nil {
		return 0, err
	}
	return m.poll, nil
}

// finishTarget ends this node's part of a migration that completed or
// failed. On success the VMI becomes this node's: status.nodeName and the
// kubevirt.io/nodeName label, evacuationNodeName cleared, the target label
// removed, in one write. On failure the target launcher is stopped
// (virt-controller deletes its pod) and the target label removed. The
// listeners stop either way.
func (m *Migrator) finishTarget(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	key, _ := cache.MetaNamespaceKeyFunc(vmi)
	m.stopTargetProxies(key)
	updated := vmi.DeepCopy()
	delete(updated.Labels, v1.MigrationTargetNodeNameLabel)
	if vmi.Status.MigrationState.Failed {
		if _, err := m.b.Launcher(vmi.UID).Shutdown(ctx); err != nil && !client.IsGone(err) {
			return fmt.Errorf("stopping the target launcher of failed migration %s: %w", key, err)
		}
		return m.updateVMI(ctx, vmi, updated)
	}
	node := m.b.NodeName()
	switched := vmi.Status.NodeName != node
	updated.Status.NodeName = node
	updated.Labels[v1.NodeNameLabel] = node
	updated.Status.EvacuationNodeName = ""
	if err := m.updateVMI(ctx, vmi, updated); err != nil {
		return err
	}
	if switched {
		klog.FromContext(ctx).Info("the VMI migrated here", "vmi", key, "from", vmi.Status.NodeName)
		m.b.Eventf(vmi, corev1.EventTypeNormal, ReasonMigrated, "The VirtualMachineInstance migrated to node %s.", node)
	}
	return nil
}

func (m *Migrator) stopTarget(vmi *v1.VirtualMachineInstance) {
	key, _ := cache.MetaNamespaceKeyFunc(vmi)
	m.stopTargetProxies(key)
}

func (m *Migrator) stopTargetProxies(key string) {
	m.mu.Lock()
	uid, ok := m.listening[key]
	delete(m.listening, key)
	m.mu.Unlock()
	if ok && m.proxy != nil {
		m.proxy.StopTarget(string(uid))
	}
}

// enterPhase moves s to phase p for reason, recording when.
func enterPhase(s *v1.VirtualMachineInstanceStatus, p v1.VirtualMachineInstancePhase, reason string, now metav1.Time) {
	if s.Phase == p {
		return
	}
	s.Phase, s.Reason = p, reason
	s.PhaseTransitionTimestamps = append(s.PhaseTransitionTimestamps, v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: now})
}

// updateVMI writes updated (status, labels) when it differs from vmi.
func (m *Migrator) updateVMI(ctx context.Context, vmi, updated *v1.VirtualMachineInstance) error {
	if equality.Semantic.DeepEqual(vmi.Status, updated.Status) && equality.Semantic.DeepEqual(vmi.Labels, updated.Labels) {
		return nil
	}
	if _, err := m.client.KubevirtV1().VirtualMachineInstances(vmi.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return nil
}

// launcherRoot is the launcher's PID and its root directory as the agent
// reaches it (/proc/<pid>/root): its sockets are in its own file system.
func launcherRoot(ctx context.Context, c *client.Client) (int, string, error) {
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

// running reports whether a domain in this state has a guest that runs
// (paused, by the user or by an I/O error, counts; shut off or crashed
// does not), as the node agent's status reads it.
func running(st hypervisor.State) bool {
	switch st {
	case hypervisor.StateRunning, hypervisor.StateBlocked, hypervisor.StatePaused, hypervisor.StateShuttingDown, hypervisor.StatePMSuspended:
		return true
	}
	return false
}
