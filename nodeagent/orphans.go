package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/livemigration"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Orphan launchers: a launcher whose VMI was deleted, became final or left
// this node while the agent was not watching (no delete event reached it)
// would run its guest forever. The agent looks for them once its cache has
// synced and then every Config.OrphanSweepInterval, and stops each through
// the queue, as a deleted VMI's launcher (stopAndClean).

const (
	// DefaultOrphanSweepInterval is how often the agent looks for orphan
	// launchers after the sweep at start.
	DefaultOrphanSweepInterval = 5 * time.Minute
	// orphanRetry is how soon a failed sweep is tried again.
	orphanRetry = 10 * time.Second
	// orphanStateTimeout bounds the wait for one launcher's state in a sweep.
	orphanStateTimeout = 10 * time.Second
	// orphanKeyPrefix starts the queue key of an orphan launcher,
	// "orphan:<VMI UID>": no VMI's namespace/name key looks like it.
	orphanKeyPrefix = "orphan:"
)

func orphanKey(uid types.UID) string { return orphanKeyPrefix + string(uid) }

func isOrphanKey(key string) bool { return strings.HasPrefix(key, orphanKeyPrefix) }

// launcherCandidates returns the socket directories of all launchers the
// agent can find, by VMI UID, in launcherDirs' order: every directory under
// <shareDir>/sockets (the agent's own, also when only a dead launcher's
// final state is left in it) and every directory in a launcher pod's
// sockets volume under podsDir that holds a command socket.
func launcherCandidates(shareDir, podsDir string) map[types.UID][]client.Location {
	found := map[types.UID][]client.Location{}
	local, _ := filepath.Glob(client.SocketDir(shareDir, "*")) // only a bad pattern errs
	for _, d := range local {
		if uid := filepath.Base(d); isDir(localLocation(shareDir, uid)) {
			found[types.UID(uid)] = nil
		}
	}
	socks, _ := filepath.Glob(filepath.Join(kubeletSocketDirPattern(podsDir, "*"), client.SocketFile))
	for _, s := range socks {
		uid := filepath.Base(filepath.Dir(s))
		found[types.UID(uid)] = nil
	}
	for uid := range found {
		found[uid] = launcherDirs(shareDir, podsDir, string(uid), nil)
	}
	return found
}

// wantsLauncher reports whether vmi, as the API server has it, still owns
// a launcher on node: not being deleted, not final, and placed on node or
// not placed yet (its launcher pod may start before the VMI is Scheduled),
// or migrating to node (the target launcher, before the switch-over).
func wantsLauncher(vmi *v1.VirtualMachineInstance, node string) bool {
	ms := vmi.Status.MigrationState
	target := ms != nil && ms.TargetNode == node && !livemigration.Done(ms)
	return vmi.DeletionTimestamp == nil && !vmi.IsFinal() &&
		(vmi.Status.NodeName == node || vmi.Status.NodeName == "" || target)
}

// runOrphanSweeps sweeps for orphan launchers now and then every
// OrphanSweepInterval (only once, retried until it succeeds, when the
// interval is negative), until ctx ends.
func (a *Agent) runOrphanSweeps(ctx context.Context) {
	log := klog.FromContext(ctx)
	for {
		next := a.cfg.OrphanSweepInterval
		if err := a.sweepOrphans(ctx); err != nil {
			log.Error(err, "looking for orphan launchers; trying again", "in", orphanRetry)
			if next < 0 || next > orphanRetry {
				next = orphanRetry
			}
		} else if next < 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.Jitter(next, 0.2)):
		}
	}
}

// sweepOrphans finds the launchers on this node whose VMI is gone, final
// or elsewhere and queues them to be stopped and cleaned up after. A
// launcher of a VMI the informer has on this node is left to sync. For the
// others, the VMIs are read again from the API server (a VMI created a
// moment ago may not be in the informer yet; its launcher cannot exist
// before it, so one read after finding the launcher settles it). A
// launcher is stopped when its VMI does not want it any more
// (wantsLauncher), or when its VMI is not there and the launcher is in the
// agent's ShareDir. A launcher found only in a launcher pod's volume whose
// VMI the API server does not know is left alone: its pod is the garbage
// collector's and the kubelet's to remove (and on a machine running a
// kubelet of another cluster, it is that cluster's).
func (a *Agent) sweepOrphans(ctx context.Context) error {
	candidates := launcherCandidates(a.cfg.ShareDir, a.cfg.KubeletPodsDir)
	if len(candidates) == 0 {
		return nil
	}
	cached, err := a.lister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing cached VMIs: %w", err)
	}
	for _, vmi := range cached {
		if vmi.Status.NodeName == a.cfg.NodeName {
			delete(candidates, vmi.UID) // sync owns its launcher, live or not
		}
	}
	a.mu.Lock()
	for _, gone := range a.deleted {
		delete(candidates, gone.uid) // being stopped already
	}
	for uid := range a.stopping {
		delete(candidates, uid)
	}
	a.mu.Unlock()
	if len(candidates) == 0 {
		return nil
	}
	vmis, err := a.allVMIs(ctx)
	if err != nil {
		return err
	}
	uids := make([]types.UID, 0, len(candidates))
	for uid := range candidates {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	log := klog.FromContext(ctx)
	for _, uid := range uids {
		dirs := candidates[uid]
		own := len(dirs) > 0 && dirs[0] == localLocation(a.cfg.ShareDir, string(uid))
		grace := gracePeriod(&v1.VirtualMachineInstance{})
		vmiKey := "none"
		vmi, known := vmis[uid]
		switch {
		case known && wantsLauncher(vmi, a.cfg.NodeName):
			continue
		case known:
			grace, vmiKey = gracePeriod(vmi), vmi.Namespace+"/"+vmi.Name
		case !own:
			// Only in a launcher pod, of a VMI this API server does not
			// know: the pod's owner reference has the garbage collector
			// delete it and its kubelet stop the launcher. It may as
			// well be another cluster's kubelet on this machine.
			log.V(2).Info("leaving a launcher pod's launcher of an unknown VMI to its kubelet", "uid", uid, "dirs", dirs)
			continue
		}
		key := orphanKey(uid)
		st, live := a.orphanState(ctx, uid)
		switch {
		case live && st.UID != string(uid):
			log.Info("a launcher answers in another VMI's socket directory; leaving it", "uid", uid, "launcherUID", st.UID, "dirs", dirs)
			continue
		case live:
			a.metrics.OrphanLauncherFound()
			log.Info("orphan launcher: its VMI is gone, final or on another node; stopping it",
				"uid", uid, "vmi", vmiKey, "domain", st.Domain, "sockets", launcherSockets(a.cfg.ShareDir, a.cfg.KubeletPodsDir, string(uid), a.podsOf(uid)))
		case own:
			log.V(2).Info("removing the socket directory of a launcher that is gone", "uid", uid, "dir", dirs[0])
		default:
			// Only a dead launcher's socket in a pod's volume: the
			// kubelet's to remove.
			continue
		}
		a.mu.Lock()
		a.deleted[key] = goneVMI{uid: uid, grace: grace}
		a.mu.Unlock()
		a.queue.Add(key)
	}
	return nil
}

// orphanState asks the launcher of the VMI with the given UID for its
// state; live is false when no launcher answers.
func (a *Agent) orphanState(ctx context.Context, uid types.UID) (st client.Status, live bool) {
	ctx, cancel := context.WithTimeout(ctx, orphanStateTimeout)
	defer cancel()
	st, err := a.client(uid).State(ctx)
	if err != nil {
		var other *client.UIDMismatchError
		if errors.As(err, &other) {
			return client.Status{UID: other.Got}, true // another VMI's launcher answers
		}
		if !client.IsGone(err) {
			// It may be busy: stop it anyway; stopAndClean retries.
			a.metrics.CountLauncherError("state")
			return client.Status{UID: string(uid)}, true
		}
		a.forgetClient(uid)
		return st, false
	}
	return st, true
}

// allVMIs reads every VMI from the API server (not the informer, which
// holds only those labelled for this node and may lag), by UID.
func (a *Agent) allVMIs(ctx context.Context) (map[types.UID]*v1.VirtualMachineInstance, error) {
	out := map[types.UID]*v1.VirtualMachineInstance{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := a.cfg.Client.KubevirtV1().VirtualMachineInstances(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing VMIs: %w", err)
		}
		for i := range list.Items {
			out[list.Items[i].UID] = &list.Items[i]
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}
