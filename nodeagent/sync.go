package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// sync brings one VMI's domain and status together. It returns how soon
// the VMI should be looked at again (0: only on its next event).
func (a *Agent) sync(ctx context.Context, key string) (time.Duration, error) {
	if isOrphanKey(key) {
		return a.syncGone(ctx, key) // a launcher without a VMI here (orphans.go)
	}
	if isTargetKey(key) {
		return a.migration.SyncTarget(ctx, strings.TrimPrefix(key, targetKeyPrefix)) // nodeagent/livemigration
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	vmi, err := a.lister.VirtualMachineInstances(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return a.syncGone(ctx, key)
	}
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	if uid, ok := a.deleted[key]; ok && uid.uid != vmi.UID {
		// An older VMI of the same name left; stop its launcher too.
		a.mu.Unlock()
		if again, err := a.stopAndClean(ctx, key, nil, uid.uid, uid.grace); err != nil || again > 0 {
			return again, err
		}
	} else {
		delete(a.deleted, key)
		a.mu.Unlock()
	}
	if vmi.Status.NodeName != a.cfg.NodeName {
		return 0, nil // labelled for this node but not (yet) placed here
	}
	a.notePods(vmi)
	if vmi.DeletionTimestamp != nil || vmi.IsFinal() {
		return a.stopAndClean(ctx, key, vmi, vmi.UID, gracePeriod(vmi))
	}
	if vmi.Status.Phase != v1.Scheduled && vmi.Status.Phase != v1.Running {
		return 0, nil
	}

	c := a.client(vmi.UID)
	obs := observation{now: a.now()}
	st, err := c.State(ctx)
	switch {
	case client.IsGone(err):
		final, ferr := a.readFinal(vmi.UID)
		switch {
		case ferr == nil:
			obs.launcher = &final
		case vmi.Status.Phase == v1.Scheduled:
			return a.cfg.StartPollInterval, nil // the launcher is still starting
		case errors.Is(ferr, os.ErrNotExist):
			obs.launcherGone = true
		default:
			return 0, ferr
		}
	case err != nil:
		a.metrics.CountLauncherError("state")
		a.reportTimeout(vmi, err)
		return 0, fmt.Errorf("VMI %s: %w", key, err)
	default:
		if !st.Started && !st.Final && !st.StopRequested {
			if err := a.prepareLauncher(ctx, vmi, c); err != nil {
				a.metrics.CountLauncherError("prepare")
				a.recorder.Eventf(vmi, corev1.EventTypeWarning, "SyncFailed", "The launcher's devices and disks could not be given to its user: %v", err)
				return 0, fmt.Errorf("preparing the launcher of VMI %s: %w", key, err)
			}
			if _, err := a.wireNetwork(ctx, vmi, c); err != nil {
				if !isNetworkError(err) {
					a.metrics.CountLauncherError("network")
					a.reportTimeout(vmi, err)
					return 0, fmt.Errorf("wiring the network of VMI %s: %w", key, err)
				}
				a.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonNetworkSetupFailed, "The network could not be set up: %v", err)
				obs.networkErr = err
				status := calculateStatus(vmi, obs)
				return a.cfg.PollInterval, a.writeStatus(ctx, key, vmi, status, false)
			}
			synced, err := c.Sync(ctx, vmi)
			if errors.Is(err, client.ErrNotReady) && a.now().Sub(scheduledAt(vmi)) < notReadyGrace {
				// A container disk or kernel-boot file the pod's containers
				// are still copying in: wait for it, quietly.
				return a.cfg.StartPollInterval, nil
			}
			if err != nil {
				a.metrics.CountLauncherError("sync")
				a.recorder.Eventf(vmi, corev1.EventTypeWarning, "SyncFailed", "The launcher could not start the domain: %v", err)
				return 0, fmt.Errorf("syncing VMI %s: %w", key, err)
			}
			st = synced
			if st.Started {
				a.recorder.Event(vmi, corev1.EventTypeNormal, "Started", "VirtualMachineInstance started.")
			}
		} else if cpu, mem := moreSockets(vmi, st.CPUTopology), moreMemory(vmi, st.Memory); st.Started && !st.Final && !st.StopRequested && (cpu || mem) {
			// KubeVirt's LiveUpdate: the VM controller gave the running VMI
			// more CPU sockets, or the VMI controller grew the launcher pod
			// and set status.memory.guestRequested; the launcher hot-plugs
			// them.
			before := st
			synced, err := c.Sync(ctx, vmi)
			if err != nil {
				a.metrics.CountLauncherError("sync")
				a.recorder.Eventf(vmi, corev1.EventTypeWarning, "SyncFailed", "The launcher could not hot-plug CPUs or memory: %v", err)
				return 0, fmt.Errorf("hot-plugging CPUs or memory of VMI %s: %w", key, err)
			}
			st = synced
			if cpu {
				a.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonCPUHotplugged, "CPU sockets hot-plugged: %d → %d", before.CPUTopology.Sockets, st.CPUTopology.Sockets)
			}
			if mem {
				a.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonMemoryHotplugged, "Guest memory requested: %s → %s", before.Memory.GuestRequested, vmi.Status.Memory.GuestRequested)
			}
		}
		if st.Started && !st.Final && !st.StopRequested && client.ExpandPending(vmi, &st) {
			// KubeVirt's ExpandDisks: a claim grew; the launcher grows
			// the guest's disk.
			synced, err := c.Sync(ctx, vmi)
			if err != nil {
				a.metrics.CountLauncherError("sync")
				a.recorder.Eventf(vmi, corev1.EventTypeWarning, "SyncFailed", "The launcher could not grow the disks of claims that grew: %v", err)
				return 0, fmt.Errorf("expanding the disks of VMI %s: %w", key, err)
			}
			st = synced
		}
		if st.Started && !st.Final && !st.StopRequested && running(st.State) && a.hotplugNeeded(vmi, &st) {
			synced, hs, err := a.syncHotplug(ctx, vmi, c, st)
			if err != nil {
				a.metrics.CountLauncherError("hotplug")
				a.recorder.Eventf(vmi, corev1.EventTypeWarning, "SyncFailed", "Hot-plugging volumes: %v", err)
				return 0, fmt.Errorf("hot-plugging volumes of VMI %s: %w", key, err)
			}
			st, obs.hotplug = synced, hs
		}
		if st.Started && !st.Final && !st.StopRequested && a.lostAdvertiser(vmi) {
			// Wired with IPv6 before this agent started: wiring again
			// changes nothing and starts the router advertisements.
			if _, err := a.wireNetwork(ctx, vmi, c); err != nil {
				klog.FromContext(ctx).Error(err, "restarting the IPv6 router advertisements", "vmi", key)
			}
			// Not when the start wired it: that is unknown after a restart.
			a.mu.Lock()
			delete(a.wiredAt, vmi.UID)
			a.mu.Unlock()
		}
		obs.launcher = &st
	}
	if a.migration.IsSource(vmi) {
		handled, again, err := a.migration.SyncSource(ctx, key, vmi, c, obs.launcher)
		if handled || err != nil {
			return again, err
		}
	}
	if st := obs.launcher; st != nil && st.Final && st.Reason == hypervisor.ReasonMigrated {
		// The guest migrated away: not a phase of this VMI; the VMI leaves
		// this node when the migration is written completed.
		return a.cfg.PollInterval, nil
	}
	if st := obs.launcher; st != nil {
		a.metrics.SetDomainState(vmi, string(st.State))
		if st.Started && !st.Final && running(st.State) {
			// A paused guest's agent cannot answer: keep what it said last.
			poll := st.State != hypervisor.StatePaused
			obs.agent = a.guestAgent(ctx, key, vmi, c, poll)
		}
	}
	obs.network = a.networkOf(vmi.UID)
	status := calculateStatus(vmi, obs)
	vmi, annotated := a.withStartSteps(vmi, obs.launcher)
	if err := a.writeStatus(ctx, key, vmi, status, annotated); err != nil {
		return 0, err
	}
	a.accessCredentialsEvent(vmi, &status)
	a.ioErrorEvent(vmi, &status)
	if status.Phase != vmi.Status.Phase {
		// KubeVirt's events of a phase change (reason Stopped, which
		// tools wait for), the failure's own reason beside.
		switch status.Phase {
		case v1.Failed:
			a.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonStopped, "The VirtualMachineInstance crashed. %s: %s", status.Reason, failureMessage(obs))
		case v1.Succeeded:
			a.recorder.Event(vmi, corev1.EventTypeNormal, ReasonStopped, "The VirtualMachineInstance was shut down.")
		}
	}
	return a.cfg.PollInterval, nil
}

// ReasonLauncherUnresponsive is the reason of the event recorded when the
// launcher of a VMI did not answer a call within its deadline
// (launcher.CallTimeout, launcher.SyncTimeout).
const ReasonLauncherUnresponsive = "LauncherUnresponsive"

// reportTimeout records a LauncherUnresponsive event on the VMI when err is
// a call to its launcher that ran out of time. The sync fails and is
// retried with back-off, so the worker is free for other VMIs.
func (a *Agent) reportTimeout(vmi *v1.VirtualMachineInstance, err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		a.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonLauncherUnresponsive, "The launcher did not answer in time: %v", err)
	}
}

// writeStatus writes status if it differs from the VMI's, or if annotated
// (the caller changed vmi's annotations), with Update: the VMI has no status
// subresource, as in KubeVirt.
func (a *Agent) writeStatus(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, status v1.VirtualMachineInstanceStatus, annotated bool) error {
	if !annotated && equality.Semantic.DeepEqual(status, vmi.Status) {
		return nil
	}
	updated := vmi.DeepCopy()
	updated.Status = status
	if _, err := a.cfg.Client.KubevirtV1().VirtualMachineInstances(vmi.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of VMI %s: %w", key, err)
	}
	if vmi.Status.Phase != status.Phase {
		klog.FromContext(ctx).Info("VMI phase changed", "vmi", key, "from", vmi.Status.Phase, "to", status.Phase, "reason", status.Reason)
	}
	return nil
}

// syncGone stops the launcher of a VMI that no longer exists (or left this
// node), or of an orphan the sweep found, and cleans up after it.
func (a *Agent) syncGone(ctx context.Context, key string) (time.Duration, error) {
	a.mu.Lock()
	uid, ok := a.deleted[key]
	a.mu.Unlock()
	if !ok {
		return 0, nil
	}
	again, err := a.stopAndClean(ctx, key, nil, uid.uid, uid.grace)
	if err == nil && again == 0 {
		a.mu.Lock()
		if a.deleted[key] == uid {
			delete(a.deleted, key)
		}
		a.mu.Unlock()
	}
	return again, err
}

// notReadyGrace is how long the agent waits, from the VMI's Scheduled phase,
// for the files a domain needs from its launcher pod (launcher.ErrNotReady)
// before it reports the failed sync: image copies of many GiB take a while,
// a missing file in the image never comes.
const notReadyGrace = 3 * time.Minute

// scheduledAt is when the VMI entered phase Scheduled (its creation when it
// has no such transition).
func scheduledAt(vmi *v1.VirtualMachineInstance) time.Time {
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == v1.Scheduled {
			return t.PhaseTransitionTimestamp.Time
		}
	}
	return vmi.CreationTimestamp.Time
}

// Reasons of the events of a VMI's stop, KubeVirt's.
const (
	// ReasonStopped: the guest stopped (Normal: shut down; Warning: it
	// crashed or failed).
	ReasonStopped = "Stopped"
	// ReasonShuttingDown: the VMI is being deleted and the guest was asked
	// to shut down.
	ReasonShuttingDown = "ShuttingDown"
	// ReasonDeleted: the grace period passed and the guest was killed.
	ReasonDeleted = "Deleted"
)

// stopAndClean asks the launcher of the VMI with the given UID to stop the
// guest gracefully (the launcher destroys it after the grace period) and,
// kills it when grace has passed since the first request; once the
// launcher is gone, removes its socket directory. It returns a
// requeue delay while the launcher still runs. vmi, when the VMI still
// exists, gets KubeVirt's events of a deletion: ShuttingDown when the guest
// is asked to shut down, Deleted when it is killed.
func (a *Agent) stopAndClean(ctx context.Context, key string, vmi *v1.VirtualMachineInstance, uid types.UID, grace time.Duration) (time.Duration, error) {
	deleting := vmi != nil && vmi.DeletionTimestamp != nil && !vmi.IsFinal()
	c := a.client(uid)
	st, err := c.State(ctx)
	switch {
	case client.IsGone(err):
		a.forgetClient(uid)
		a.forgetGuestAgent(uid)
		a.forgetNetwork(uid)
		a.forgetPods(uid)
		a.metrics.Forget(key)
		a.mu.Lock()
		delete(a.stopping, uid)
		a.mu.Unlock()
		if err := a.removeSocketDir(uid); err != nil {
			return 0, fmt.Errorf("cleaning up after VMI %s: %w", key, err)
		}
		return 0, nil
	case err != nil:
		a.metrics.CountLauncherError("state")
		return 0, fmt.Errorf("VMI %s: %w", key, err)
	}
	if st.Final {
		return a.cfg.PollInterval, nil // the launcher is exiting
	}
	a.mu.Lock()
	since, asked := a.stopping[uid]
	if !asked {
		since = a.now()
		a.stopping[uid] = since
	}
	a.mu.Unlock()
	switch {
	case !asked || !st.StopRequested:
		klog.FromContext(ctx).Info("stopping the guest", "vmi", key, "uid", uid, "grace", grace)
		if _, err := c.Shutdown(ctx); err != nil && !client.IsGone(err) {
			a.metrics.CountLauncherError("shutdown")
			return 0, fmt.Errorf("stopping VMI %s: %w", key, err)
		}
		if deleting && !asked {
			a.recorder.Event(vmi, corev1.EventTypeNormal, ReasonShuttingDown, "Signaled Graceful Shutdown")
		}
	case a.now().Sub(since) >= grace:
		klog.FromContext(ctx).Info("grace period over: killing the guest", "vmi", key, "uid", uid)
		if _, err := c.Kill(ctx); err != nil && !client.IsGone(err) {
			a.metrics.CountLauncherError("kill")
			return 0, fmt.Errorf("killing VMI %s: %w", key, err)
		}
		if deleting {
			a.recorder.Event(vmi, corev1.EventTypeNormal, ReasonDeleted, "Signaled Deletion")
		}
	}
	return a.cfg.PollInterval, nil
}

// gracePeriod is how long the guest gets to shut down: the VMI's
// terminationGracePeriodSeconds, 30s when unset.
func gracePeriod(vmi *v1.VirtualMachineInstance) time.Duration {
	if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil && *g >= 0 {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

// accessCredentialsEvent records KubeVirt's event when the
// AccessCredentialsSynchronized condition changes: Normal
// AccessCredentialsSyncSuccess, Warning AccessCredentialsSyncFailed with
// the failure.
func (a *Agent) accessCredentialsEvent(vmi *v1.VirtualMachineInstance, status *v1.VirtualMachineInstanceStatus) {
	var cur *v1.VirtualMachineInstanceCondition
	for i := range status.Conditions {
		if status.Conditions[i].Type == v1.VirtualMachineInstanceAccessCredentialsSynchronized {
			cur = &status.Conditions[i]
		}
	}
	if cur == nil {
		return
	}
	if old := vmi.VMICondition(v1.VirtualMachineInstanceAccessCredentialsSynchronized); old != nil && old.Status == cur.Status && old.Message == cur.Message {
		return
	}
	if cur.Status == corev1.ConditionTrue {
		a.recorder.Event(vmi, corev1.EventTypeNormal, ReasonAccessCredentialsSyncSuccess, "Access credentials sync successful.")
	} else {
		a.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonAccessCredentialsSyncFailed, "Access credentials sync failed: %s", cur.Message)
	}
}

// ReasonCPUHotplugged is the reason of the event the node agent records
// when it hot-plugged CPU sockets into a running VMI.
const ReasonCPUHotplugged = "CPUHotplugged"

// ReasonMemoryHotplugged is the reason of the event the node agent records
// when it asked a running VMI's guest to plug more memory.
const ReasonMemoryHotplugged = "MemoryHotplugged"

// moreMemory reports whether the VMI's status asks for more guest memory
// than the launcher asked the guest for (cur, the launcher's status).
func moreMemory(vmi *v1.VirtualMachineInstance, cur *v1.MemoryStatus) bool {
	want := vmi.Status.Memory
	return want != nil && want.GuestRequested != nil && cur != nil && cur.GuestRequested != nil && want.GuestRequested.Cmp(*cur.GuestRequested) > 0
}

// moreSockets reports whether the VMI's spec asks for more CPU sockets
// than the guest has (cur, the launcher's status).
func moreSockets(vmi *v1.VirtualMachineInstance, cur *v1.CPUTopology) bool {
	cpu := vmi.Spec.Domain.CPU
	return cpu != nil && cur != nil && cpu.Sockets > cur.Sockets
}
