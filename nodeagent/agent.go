// Package nodeagent is the job of virt-handler: it runs on every node,
// watches the VirtualMachineInstances scheduled there (label
// kubevirt.io/nodeName=<node>), drives the launcher of each (see
// nodeagent/launcher) through its command socket, and reports the domain's
// state on the VMI: Scheduled → Running, shut down → Succeeded, crashed or
// launcher gone without a clean end → Failed with a reason, the Paused
// condition; and what the QEMU guest agent reports: the AgentConnected
// condition, status.guestOSInfo and status.interfaces. A deleted or final
// VMI's guest is shut down gracefully (the launcher destroys it after the
// grace period) and its socket directory is removed when the agent owns it.
// So is a launcher whose VMI was deleted, became final or left the node
// while the agent was not running (an orphan): the agent looks for them by
// their sockets at start and every Config.OrphanSweepInterval.
//
// It finds a launcher's command socket by the VMI's UID, each time it
// connects: under Config.ShareDir (launchers sharing the agent's directory,
// as nodeagent/localnode runs them) or in the sockets volume of a launcher
// pod under Config.KubeletPodsDir (a real kubelet), preferring one that
// accepts a connection. A pod's volume is the tenant's to write: the agent
// follows no symbolic link below those directories, reads at most 1 MiB
// of a launcher's answer, and sends nothing to a launcher that does not
// answer with the VMI's UID (nor, with Config.CheckLauncherPod, to one
// that does not run in the pod whose volume holds its socket).
//
// The agent keeps no state of its own: a restarted agent finds the running
// launchers by their sockets, and never stops a running guest or marks it
// Failed because it restarted. It keeps a heartbeat on its Node (annotation
// kubevirt.io/heartbeat and label kubevirt.io/schedulable) and serves the
// REST API of nodeagent/restapi (Handler: console, VNC, pause, unpause,
// soft reboot, reset, freeze, unfreeze, port-forward and the guest agent's
// reports), for which it is the restapi.Backend, with Prometheus
// metrics (Registry, nodeagent/metrics, whose Source it is): its own, and
// KubeVirt's per-VMI metrics (kubevirt_vmi_memory_*, kubevirt_vmi_vcpu_*,
// kubevirt_vmi_network_*, kubevirt_vmi_storage_*, ...) from each running
// domain's statistics, which it asks the launchers for when Prometheus
// scrapes it. With Config.Migration it takes part in live migrations as
// source and target: it is the livemigration.Backend of a
// livemigration.Migrator.
//
// It needs no cgo: the hypervisor lives in the launcher.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/livemigration"
	"github.com/vmkit/vmkit/nodeagent/metrics"
	"github.com/vmkit/vmkit/nodeagent/network"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/scheme"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	listers "github.com/vmkit/vmkit/vmapi/generated/listers/vmapi/v1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Config configures an Agent. NodeName, Client, Kube and ShareDir are
// required.
type Config struct {
	// NodeName is the Node this agent runs on.
	NodeName string
	// Client reads and writes VMIs; Kube writes the Node and events.
	Client versioned.Interface
	Kube   kubernetes.Interface
	// ShareDir is where launchers sharing the agent's directory have their
	// command sockets: <ShareDir>/sockets/<VMI UID>/launcher.sock (the
	// launchers' --kubevirt-share-dir as seen from the node; how
	// nodeagent/localnode runs them).
	ShareDir string
	// KubeletPodsDir is the kubelet's pods directory as seen from the
	// agent (default /var/lib/kubelet/pods). A launcher in a launcher pod
	// serves its command socket in the pod's sockets emptyDir:
	// <KubeletPodsDir>/<pod UID>/volumes/kubernetes.io~empty-dir/sockets/<VMI UID>/launcher.sock.
	// The agent looks there too and never deletes anything under it (the
	// kubelet removes a pod's volumes).
	KubeletPodsDir string
	// HostMountNamespace is the node's mount namespace, where hostPath and
	// local PersistentVolumes lie, as a path such as /proc/<pid>/ns/mnt.
	// Empty: the namespace the agent was started from (its container
	// runtime's, for an agent in a pod with hostPID; its own on the node).
	// Hotplugged claims are mounted from there into the launchers
	// (volumes.go).
	HostMountNamespace string
	// CPUManagerStateFile is the kubelet's CPU manager checkpoint as seen
	// from the agent (default DefaultCPUManagerStateFile). Every heartbeat
	// labels the node kubevirt.io/cpumanager (and cpumanager) "true" when
	// its policyName is static, "false" otherwise or when it cannot be
	// read, as KubeVirt's virt-handler does: launcher pods of VMIs with
	// dedicated CPUs select the label.
	CPUManagerStateFile string
	// Workers is the number of VMIs synced concurrently (default 3).
	Workers int
	// PollInterval is how often the domain of each VMI is checked (default 1s).
	PollInterval time.Duration
	// StartPollInterval is how often a VMI whose start waits on its pod is
	// checked: the launcher not serving yet, or a container disk still
	// being copied in (default 200ms, and at most PollInterval). Each
	// check is one connect on a UNIX socket, and the start's next step
	// follows it: the start timeline showed the default PollInterval's
	// half-second average wait there (docs/performance.md, "Start latency").
	StartPollInterval time.Duration
	// AgentPollInterval is how often the QEMU guest agent of each running
	// VMI is asked whether it answers, for the guest's OS and interfaces
	// (default 10s; every PollInterval until it first answers, in the
	// VMI's first two minutes of Running).
	AgentPollInterval time.Duration
	// HeartbeatInterval is how often the Node's heartbeat is written,
	// jittered by up to 20% (default 1m, as KubeVirt).
	HeartbeatInterval time.Duration
	// ResyncPeriod of the VMI informer (default 12h).
	ResyncPeriod time.Duration
	// OrphanSweepInterval is how often the agent looks for orphan
	// launchers: launchers whose VMI was deleted, became final or left
	// this node while the agent was not running, which it stops as those
	// of deleted VMIs. It always looks once its cache has synced; then
	// every OrphanSweepInterval, jittered by up to 20% (default
	// DefaultOrphanSweepInterval, 5m), or never again when negative.
	OrphanSweepInterval time.Duration
	// Recorder records events on VMIs; one writing to Kube when nil.
	Recorder record.EventRecorder
	// Registerer, when set, gets the agent's metrics too (they are always
	// on Registry()).
	Registerer prometheus.Registerer
	// Migration lets the agent take part in live migrations as source
	// and target (nodeagent/livemigration); without it the agent leaves
	// migrations alone.
	Migration *livemigration.Config
	// CheckLauncherPod makes the agent check, on each connection to a
	// launcher in a launcher pod's sockets volume, that the process serving
	// the socket (SO_PEERCRED) runs in that pod: its /proc/<pid>/cgroup
	// names the pod's UID, as the kubelet names pod cgroups (see
	// launcher.ResolveOptions.CheckPeerPod). It needs the host's PID
	// namespace (virt-handler's hostPID). Off, a socket in a pod's volume
	// is trusted to be that pod's launcher's; a launcher of another VMI is
	// refused either way (its UID).
	CheckLauncherPod bool
	// StatsTimeout bounds how long a scrape of the agent's metrics waits
	// for the launchers' domain statistics, KubeVirt's per-VMI metrics
	// (default metrics.DefaultStatsTimeout, 5s). A launcher that has not
	// answered by then is left out of that scrape.
	StatsTimeout time.Duration
}

// Agent is the node agent. Create it with New and call Run.
type Agent struct {
	cfg       Config
	factory   externalversions.SharedInformerFactory
	informer  cache.SharedIndexInformer
	lister    listers.VirtualMachineInstanceLister
	queue     workqueue.TypedRateLimitingInterface[string]
	recorder  record.EventRecorder
	metrics   *metrics.Metrics
	now       func() time.Time
	broadcast record.EventBroadcaster

	mu sync.Mutex
	// deleted remembers the UID of VMIs that left the informer, so their
	// launcher can still be found.
	deleted map[string]goneVMI
	// stopping records when the agent first asked a launcher to stop.
	stopping map[types.UID]time.Time
	// clients caches one launcher client per VMI UID.
	clients map[types.UID]*client.Client
	// agentPolls is the guest agent poll state per VMI UID.
	agentPolls map[types.UID]*agentPoll
	// networks is what wireNetwork did per VMI UID.
	networks map[types.UID][]network.Result
	// wiredAt is when wireNetwork wired each VMI's pod network, for its
	// start timeline.
	wiredAt map[types.UID]time.Time
	// advertisers are the IPv6 router advertisements the agent sends in
	// the VMIs' launcher pods, by VMI UID (network.go).
	advertisers network.Advertisers
	// hotplugMounts are the VMIs whose launchers have hotplugged claims
	// mounted (volumes.go).
	hotplugMounts map[types.UID]bool
	// launcherPods are, per VMI UID, the UIDs of the launcher pods on this
	// node its status.activePods ever listed: the only pods whose volumes
	// the agent looks in for the VMI's launcher (see podsOf).
	launcherPods map[types.UID]map[types.UID]bool

	// Live migration (migrationbackend.go): the informer of the VMIs this
	// node is the migration target of, and the agent's part in
	// migrations.
	targetFactory  externalversions.SharedInformerFactory
	targetInformer cache.SharedIndexInformer
	migration      *livemigration.Migrator
}

// New checks cfg and wires the agent's informer.
func New(cfg Config) (*Agent, error) {
	if cfg.NodeName == "" || cfg.Client == nil || cfg.Kube == nil || cfg.ShareDir == "" {
		return nil, errors.New("nodeagent: NodeName, Client, Kube and ShareDir are required")
	}
	if cfg.KubeletPodsDir == "" {
		cfg.KubeletPodsDir = DefaultKubeletPodsDir
	}
	if cfg.CPUManagerStateFile == "" {
		cfg.CPUManagerStateFile = DefaultCPUManagerStateFile
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 3
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.StartPollInterval <= 0 {
		cfg.StartPollInterval = 200 * time.Millisecond
	}
	cfg.StartPollInterval = min(cfg.StartPollInterval, cfg.PollInterval)
	if cfg.AgentPollInterval <= 0 {
		cfg.AgentPollInterval = 10 * time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = time.Minute
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = 12 * time.Hour
	}
	if cfg.OrphanSweepInterval == 0 {
		cfg.OrphanSweepInterval = DefaultOrphanSweepInterval
	}
	a := &Agent{
		cfg:           cfg,
		queue:         workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeagent"}),
		now:           time.Now,
		deleted:       map[string]goneVMI{},
		stopping:      map[types.UID]time.Time{},
		clients:       map[types.UID]*client.Client{},
		agentPolls:    map[types.UID]*agentPoll{},
		networks:      map[types.UID][]network.Result{},
		wiredAt:       map[types.UID]time.Time{},
		hotplugMounts: map[types.UID]bool{},
		launcherPods:  map[types.UID]map[types.UID]bool{},
	}
	// The VMIs this node is the migration target of (KubeVirt's
	// migration target controller's informer).
	a.targetFactory = externalversions.NewSharedInformerFactoryWithOptions(cfg.Client, cfg.ResyncPeriod,
		externalversions.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = v1.MigrationTargetNodeNameLabel + "=" + cfg.NodeName
		}))
	targets := a.targetFactory.Kubevirt().V1().VirtualMachineInstances()
	a.targetInformer = targets.Informer()
	migration, err := livemigration.New(a, livemigration.Options{
		Config: cfg.Migration, Client: cfg.Client, Kube: cfg.Kube, Targets: targets.Lister(),
		PollInterval: cfg.PollInterval, Now: a.now,
	})
	if err != nil {
		return nil, err
	}
	a.migration = migration
	a.metrics = metrics.New(a, cfg.StatsTimeout)
	if cfg.Registerer != nil {
		if err := a.metrics.Register(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("nodeagent: registering metrics: %w", err)
		}
	}
	a.recorder = cfg.Recorder
	if a.recorder == nil {
		a.broadcast = record.NewBroadcaster()
		a.recorder = a.broadcast.NewRecorder(scheme.Scheme, corev1.EventSource{Component: v1.VirtHandlerValue, Host: cfg.NodeName})
	}
	a.factory = externalversions.NewSharedInformerFactoryWithOptions(cfg.Client, cfg.ResyncPeriod,
		externalversions.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = v1.NodeNameLabel + "=" + cfg.NodeName
		}))
	vmis := a.factory.Kubevirt().V1().VirtualMachineInstances()
	a.informer, a.lister = vmis.Informer(), vmis.Lister()
	if _, err := a.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.enqueue,
		UpdateFunc: func(_, obj any) { a.enqueue(obj) },
		DeleteFunc: a.onDelete,
	}); err != nil {
		return nil, fmt.Errorf("nodeagent: %w", err)
	}
	if _, err := a.targetInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.enqueueTarget,
		UpdateFunc: func(_, obj any) { a.enqueueTarget(obj) },
		DeleteFunc: a.enqueueTarget,
	}); err != nil {
		return nil, fmt.Errorf("nodeagent: %w", err)
	}
	return a, nil
}

func (a *Agent) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		a.queue.Add(key)
	}
}

// onDelete remembers the UID of a VMI that is gone (or left this node), so
// that sync can still stop its launcher.
func (a *Agent) onDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	vmi, ok := obj.(*v1.VirtualMachineInstance)
	if !ok {
		return
	}
	key, _ := cache.MetaNamespaceKeyFunc(vmi)
	a.mu.Lock()
	a.deleted[key] = goneVMI{uid: vmi.UID, grace: gracePeriod(vmi)}
	a.mu.Unlock()
	a.queue.Add(key)
}

// goneVMI is what the agent keeps of a VMI that left its informer.
type goneVMI struct {
	uid   types.UID
	grace time.Duration
}

// client returns the cached launcher client of a VMI. It looks for the
// launcher's socket each time it connects: the launcher pod, and so its
// socket, appears after the VMI, and may be replaced. The client follows
// no symbolic link in a launcher pod's volume, which the tenant can
// write, and sends nothing to a launcher of another VMI (see
// launcher.ResolveOptions).
func (a *Agent) client(uid types.UID) *client.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.clients[uid]
	if !ok {
		name := client.SocketPath(a.cfg.ShareDir, string(uid)) + " or " +
			filepath.Join(kubeletSocketDirPattern(a.cfg.KubeletPodsDir, string(uid)), client.SocketFile)
		c = client.NewResolving(client.ResolveOptions{
			Name: name,
			UID:  string(uid),
			Locations: func() []client.Location {
				return launcherSockets(a.cfg.ShareDir, a.cfg.KubeletPodsDir, string(uid), a.podsOf(uid))
			},
			CheckPeerPod: a.cfg.CheckLauncherPod,
		})
		a.clients[uid] = c
	}
	return c
}

// DefaultKubeletPodsDir is where the kubelet keeps its pods' volumes.
const DefaultKubeletPodsDir = "/var/lib/kubelet/pods"

// DefaultCPUManagerStateFile is where the kubelet checkpoints its CPU
// manager's policy and assignments.
const DefaultCPUManagerStateFile = "/var/lib/kubelet/cpu_manager_state"

// socketsVolume is the launcher pod's emptyDir volume mounted at
// <share dir>/sockets (podtemplate's; TestSocketsVolumeIsPodtemplates
// keeps the two in step).
const socketsVolume = "sockets"

// kubeletSocketDirPattern is the glob pattern of the socket directories of
// the launcher pods of a VMI.
func kubeletSocketDirPattern(podsDir, uid string) string {
	return filepath.Join(podsDir, "*", "volumes", "kubernetes.io~empty-dir", socketsVolume, uid)
}

// notePods records the launcher pods on this node that vmi's
// status.activePods lists (virt-controller writes it; users cannot), from
// then on the only pods podsOf returns for it.
func (a *Agent) notePods(vmi *v1.VirtualMachineInstance) {
	a.mu.Lock()
	defer a.mu.Unlock()
	pods := a.launcherPods[vmi.UID]
	if pods == nil {
		pods = map[types.UID]bool{}
		a.launcherPods[vmi.UID] = pods
	}
	for pod, node := range vmi.Status.ActivePods {
		if node == a.cfg.NodeName {
			pods[pod] = true
		}
	}
}

// podsOf returns the pods in whose volumes the launcher of the VMI with the
// given UID may be: those its status.activePods listed (an empty, non-nil
// slice while it lists none), or nil, meaning any pod, for a VMI the agent
// never synced (an orphan of a VMI deleted while the agent was away, which
// the agent only asks for its state and stops). A pod that merely names
// the VMI's UID in its own volume never gets the VMI's spec.
func (a *Agent) podsOf(uid types.UID) []types.UID {
	a.mu.Lock()
	defer a.mu.Unlock()
	pods, known := a.launcherPods[uid]
	if !known {
		return nil
	}
	out := make([]types.UID, 0, len(pods))
	for p := range pods {
		out = append(out, p)
	}
	return out
}

func (a *Agent) forgetPods(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.launcherPods, uid)
}

// podSocketsDir is where a launcher pod's sockets volume is below the
// kubelet's pods directory.
func podSocketsDir(pod string) string {
	return filepath.Join(pod, "volumes", "kubernetes.io~empty-dir", socketsVolume)
}

// launcherDirs returns the existing socket directories of the launcher of
// the VMI with the given UID, in order of preference: the one under
// shareDir, then those in the volumes of the launcher pods under podsDir
// (only those of pods when it is not nil; see Agent.podsOf), most recently
// changed first (a newer pod's before a stale one's). A directory reached
// through a symbolic link below shareDir or podsDir is left out: a
// launcher pod's volume is the tenant's to write, and a link there could
// lead the agent to another VMI's launcher (review N3).
func launcherDirs(shareDir, podsDir, uid string, pods []types.UID) []client.Location {
	var dirs []client.Location
	if local := localLocation(shareDir, uid); isDir(local) {
		dirs = append(dirs, local)
	}
	if pods == nil {
		// Any pod's: the kubelet's directories below podsDir hold no
		// links; one that is not a directory is no pod.
		entries, _ := os.ReadDir(podsDir)
		pods = make([]types.UID, 0, len(entries))
		for _, e := range entries {
			if e.IsDir() {
				pods = append(pods, types.UID(e.Name()))
			}
		}
	}
	type dir struct {
		loc client.Location
		mod time.Time
	}
	found := make([]dir, 0, len(pods))
	for _, pod := range pods {
		loc := client.Location{Root: podsDir, Rel: filepath.Join(podSocketsDir(string(pod)), uid), Pod: string(pod)}
		if fi, err := loc.Stat(); err == nil && fi.IsDir() {
			found = append(found, dir{loc, fi.ModTime()})
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].mod.After(found[j].mod) })
	for _, d := range found {
		dirs = append(dirs, d.loc)
	}
	return dirs
}

// localLocation is the socket directory of a launcher sharing the agent's
// directory (<shareDir>/sockets/<uid>).
func localLocation(shareDir, uid string) client.Location {
	return client.Location{Root: shareDir, Rel: filepath.Join("sockets", uid)}
}

// launcherSockets returns the socket directories of the launcher of the VMI
// with the given UID that hold a command socket, in launcherDirs' order;
// the client uses the first that accepts a connection.
func launcherSockets(shareDir, podsDir, uid string, pods []types.UID) []client.Location {
	var socks []client.Location
	for _, d := range launcherDirs(shareDir, podsDir, uid, pods) {
		if d.HasSocket() {
			socks = append(socks, d)
		}
	}
	return socks
}

// isDir reports whether loc is a directory, reached without links.
func isDir(loc client.Location) bool {
	fi, err := loc.Stat()
	return err == nil && fi.IsDir()
}

// readFinal reads the final status the launcher of the VMI with the given
// UID left, from the first of its directories that holds one; an error
// wrapping os.ErrNotExist when none does. A final status that is a link,
// or another VMI's, is an error.
func (a *Agent) readFinal(uid types.UID) (client.Status, error) {
	for _, d := range launcherDirs(a.cfg.ShareDir, a.cfg.KubeletPodsDir, string(uid), a.podsOf(uid)) {
		st, err := d.ReadFinal(string(uid))
		if !errors.Is(err, os.ErrNotExist) {
			return st, err
		}
	}
	return client.Status{}, fmt.Errorf("final status of VMI %s: %w", uid, os.ErrNotExist)
}

// removeSocketDir removes the socket directory of a launcher that is gone,
// <ShareDir>/sockets/<uid>, the only one the agent owns: a directory in a
// launcher pod's volume belongs to the kubelet, which removes it with the
// pod (the pod may still exist, and its launcher's final state with it).
func (a *Agent) removeSocketDir(uid types.UID) error {
	return os.RemoveAll(client.SocketDir(a.cfg.ShareDir, string(uid)))
}

func (a *Agent) forgetClient(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[uid]; ok {
		c.Close()
		delete(a.clients, uid)
	}
}

// Run starts the informer, the workers and the heartbeat (which marks the
// node schedulable), and blocks until ctx ends.
//
// It never marks the node unschedulable, as KubeVirt's virt-handler does at
// every start: launcher pods select kubevirt.io/schedulable=true, and a
// kubelet that restarts while the label is false re-admits its running
// pods against it and kills every VM on the node (KubeVirt's bug #11843).
// A node whose agent is gone is marked by the node controller once its
// heartbeat is stale; a new node has no label until the first heartbeat.
func (a *Agent) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	log := klog.FromContext(ctx).WithValues("node", a.cfg.NodeName)
	ctx = klog.NewContext(ctx, log)
	if a.broadcast != nil {
		a.broadcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.cfg.Kube.CoreV1().Events("")})
		defer a.broadcast.Shutdown()
	}
	defer a.queue.ShutDown()
	a.factory.Start(ctx.Done())
	defer a.factory.Shutdown()
	a.targetFactory.Start(ctx.Done())
	defer a.targetFactory.Shutdown()
	defer a.migration.Close()
	defer a.advertisers.StopAll()
	if !cache.WaitForCacheSync(ctx.Done(), a.informer.HasSynced, a.targetInformer.HasSynced) {
		return fmt.Errorf("nodeagent on %s: the VMI cache did not sync", a.cfg.NodeName)
	}
	log.Info("node agent started")
	var wg sync.WaitGroup
	for range a.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a.processNext(ctx) {
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait.JitterUntilWithContext(ctx, a.heartbeat, a.cfg.HeartbeatInterval, 0.2, true)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.runOrphanSweeps(ctx)
	}()
	<-ctx.Done()
	a.queue.ShutDown()
	wg.Wait()
	a.mu.Lock()
	for _, c := range a.clients {
		c.Close()
	}
	a.mu.Unlock()
	return nil
}

func (a *Agent) processNext(ctx context.Context) bool {
	key, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(key)
	start := a.now()
	requeue, err := a.sync(ctx, key)
	a.metrics.ObserveSync(time.Since(start))
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "sync failed", "vmi", key)
		a.queue.AddRateLimited(key)
	case requeue > 0:
		a.queue.Forget(key)
		a.queue.AddAfter(key, requeue)
	default:
		a.queue.Forget(key)
	}
	return true
}
