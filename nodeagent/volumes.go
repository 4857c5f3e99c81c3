package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	"github.com/vmkit/vmkit/nodeagent/internal/mountns"
	"github.com/vmkit/vmkit/nodeagent/internal/procfs"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Volume hotplug without attachment pods. KubeVirt starts a pod per
// hotplug that mounts the claim on the node, then bind-mounts it from
// there into the launcher; its users find that slow at scale
// (kubevirt#16628). The node agent already enters launcher pods'
// namespaces: it resolves the claim to its node-local PersistentVolume
// and mounts the volume's directory (or device) straight into the running
// launcher's mount namespace at <HotplugDiskDir>/<volume>, where the
// launcher attaches it to the guest. The mount lives in the launcher
// container's namespace only: nothing is left on the node when the pod
// goes. A volume that leaves the spec is unmounted once the guest released
// its disk.

// Reasons of hotplugged volumes' status.volumeStatus, as KubeVirt's.
const (
	// ReasonVolumeReady: the guest has the disk.
	ReasonVolumeReady = "VolumeReady"
	// ReasonVolumeMountedToPod: the claim is mounted into the launcher.
	ReasonVolumeMountedToPod = "VolumeMountedToPod"
	// ReasonVolumeDetaching: the guest was asked to release the disk.
	ReasonVolumeDetaching = "VolumeDetaching"
	// ReasonVolumeMountFailed: the claim cannot be mounted (yet).
	ReasonVolumeMountFailed = "VolumeMountFailed"
	// ReasonMemoryDumpFailed: the memory dump onto the volume failed.
	ReasonMemoryDumpFailed = "MemoryDumpFailed"
)

// hotplugState is what syncHotplug found: the volumes mounted into the
// launcher and why the others are not.
type hotplugState struct {
	mounted  map[string]bool
	problems map[string]string
}

// hotpluggable lists the volumes of vmi the agent mounts into its running
// launcher, by name, with their claims: hotpluggable volumes that have a
// disk, and memoryDump volumes.
func hotpluggable(vmi *v1.VirtualMachineInstance) map[string]string {
	var out map[string]string
	for i := range vmi.Spec.Volumes {
		vol := &vmi.Spec.Volumes[i]
		claim := v1.HotplugClaim(vol)
		if claim == "" || vol.MemoryDump == nil && !slices.ContainsFunc(vmi.Spec.Domain.Devices.Disks, func(d v1.Disk) bool { return d.Name == vol.Name }) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[vol.Name] = claim
	}
	return out
}

// memoryDumpStatus is the volumeStatus of memoryDump volume vs, as the
// launcher's dump d stands (KubeVirt's phases and memoryDumpVolume).
func memoryDumpStatus(vs *v1.VolumeStatus, claim string, d *client.MemoryDump) {
	start := metav1.NewTime(d.Start)
	vs.MemoryDumpVolume = &v1.DomainMemoryDumpInfo{StartTimestamp: &start, ClaimName: claim, TargetFileName: d.TargetFileName}
	switch {
	case d.End.IsZero():
		vs.Phase, vs.Reason, vs.Message = v1.MemoryDumpVolumeInProgress, "", "Memory dump in progress"
	case d.Error != "":
		end := metav1.NewTime(d.End)
		vs.MemoryDumpVolume.EndTimestamp = &end
		vs.Phase, vs.Reason, vs.Message = v1.MemoryDumpVolumeFailed, ReasonMemoryDumpFailed, "Memory dump failed: "+d.Error
	default:
		end := metav1.NewTime(d.End)
		vs.MemoryDumpVolume.EndTimestamp = &end
		vs.Phase, vs.Reason, vs.Message = v1.MemoryDumpVolumeCompleted, "", "Memory dump completed successfully"
	}
}

// hotplugNeeded reports whether a sync of vmi must look at hotplugged
// volumes: its spec or status has some, its launcher reports some (or
// memory dumps), or the agent mounted some.
func (a *Agent) hotplugNeeded(vmi *v1.VirtualMachineInstance, st *client.Status) bool {
	if len(hotpluggable(vmi)) > 0 || len(st.HotplugVolumes) > 0 || len(st.MemoryDumps) > 0 ||
		slices.ContainsFunc(vmi.Status.VolumeStatus, func(vs v1.VolumeStatus) bool { return vs.HotplugVolume != nil }) {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hotplugMounts[vmi.UID]
}

// syncHotplug mounts the claims of vmi's hotpluggable volumes into its
// running launcher, has the launcher attach and detach their disks, and
// unmounts the claims of volumes the guest released. It returns the
// launcher's status after that, and what it found.
func (a *Agent) syncHotplug(ctx context.Context, vmi *v1.VirtualMachineInstance, c *client.Client, st client.Status) (client.Status, *hotplugState, error) {
	dir := hotplugDir(&st)
	pid, devices, hs, err := a.mountHotplugged(ctx, vmi, c, dir)
	if err != nil {
		return st, nil, err
	}
	want := hotpluggable(vmi)
	if client.HotplugPending(vmi, &st) {
		synced, err := c.Sync(ctx, vmi)
		if err != nil {
			return st, hs, fmt.Errorf("hot-plugging volumes: %w", err)
		}
		st = synced
	}
	inGuest := map[string]bool{}
	for _, v := range st.HotplugVolumes {
		inGuest[v.Name] = v.Attached || v.Detaching
	}
	for name := range hs.mounted {
		if _, ok := want[name]; ok || inGuest[name] {
			continue
		}
		if err := a.unmountClaim(pid, filepath.Join(dir, name), slices.Contains(devices, name)); err != nil {
			return st, hs, fmt.Errorf("unmounting hotplugged volume %s: %w", name, err)
		}
		delete(hs.mounted, name)
		a.recorder.Eventf(vmi, corev1.EventTypeNormal, "SuccessfulUnmountVolume", "Unmounted hotplugged volume %s from the launcher", name)
	}
	a.mu.Lock()
	a.hotplugMounts[vmi.UID] = len(hs.mounted) > 0
	a.mu.Unlock()
	return st, hs, nil
}

// hotplugDir is where the launcher whose status is st wants hotplugged
// claims.
func hotplugDir(st *client.Status) string {
	if st.HotplugDiskDir == "" {
		return client.DefaultHotplugDiskDir
	}
	return st.HotplugDiskDir
}

// mountHotplugged mounts the claims of vmi's hotpluggable volumes that
// are not yet into the launcher c, under dir. It returns the launcher's
// PID, the volumes under dir that are device nodes, and which volumes are
// mounted (and why the others are not).
func (a *Agent) mountHotplugged(ctx context.Context, vmi *v1.VirtualMachineInstance, c *client.Client, dir string) (int, []string, *hotplugState, error) {
	pid, err := c.PID(ctx)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("finding the launcher process: %w", err)
	}
	if pid <= 0 {
		return 0, nil, nil, errors.New("hot-plugging volumes: the launcher runs in a PID namespace the node agent cannot see (virt-handler needs hostPID)")
	}
	points, err := mountns.MountPoints(pid, dir)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading the launcher's mounts: %w", err)
	}
	devices, err := mountns.Devices(mountns.Path(pid), dir)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading the launcher's hotplugged devices: %w", err)
	}
	hs := &hotplugState{mounted: map[string]bool{}, problems: map[string]string{}}
	for _, p := range append(points, devices...) {
		hs.mounted[p] = true
	}
	for name, claim := range hotpluggable(vmi) {
		if hs.mounted[name] {
			continue
		}
		if err := a.mountClaim(ctx, vmi, pid, claim, filepath.Join(dir, name)); err != nil {
			hs.problems[name] = err.Error()
			continue
		}
		hs.mounted[name] = true
		a.recorder.Eventf(vmi, corev1.EventTypeNormal, "SuccessfulMountVolume", "Mounted claim %s of hotplugged volume %s into the launcher", claim, name)
	}
	return pid, devices, hs, nil
}

// mountHotpluggedTarget mounts the claims of vmi's hotplugged volumes into
// the launcher c of its migration target before the guest moves: the
// incoming QEMU opens their disks where the source's has them. Only
// shared (ReadWriteMany) claims get here: the VMI is LiveMigratable.
func (a *Agent) mountHotpluggedTarget(ctx context.Context, vmi *v1.VirtualMachineInstance, c *client.Client) error {
	if len(hotpluggable(vmi)) == 0 {
		return nil
	}
	st, err := c.State(ctx)
	if err != nil {
		return err
	}
	_, _, hs, err := a.mountHotplugged(ctx, vmi, c, hotplugDir(&st))
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(hs.problems)) {
		errs = append(errs, fmt.Errorf("hotplugged volume %s: %s", name, hs.problems[name]))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	a.mu.Lock()
	a.hotplugMounts[vmi.UID] = true
	a.mu.Unlock()
	return nil
}

// mountClaim gives the launcher (PID pid) the node-local volume of claim
// at dst: a Filesystem claim's directory, mounted there, whose disk.img a
// non-root launcher's user gets, as the launcher's own claims get theirs;
// a Block claim's device, as a device node of the launcher's user which
// its device cgroup allows.
func (a *Agent) mountClaim(ctx context.Context, vmi *v1.VirtualMachineInstance, pid int, claim, dst string) error {
	src, block, err := a.claimPath(ctx, vmi.Namespace, claim)
	if err != nil {
		return err
	}
	host, err := a.hostNamespace()
	if err != nil {
		return err
	}
	uid, gid, err := procfs.User(pid)
	if err != nil {
		return err
	}
	if block {
		rdev, err := mountns.Device(host, src, mountns.Path(pid), dst, uid, gid)
		if err != nil {
			return fmt.Errorf("giving the launcher the device of claim %s: %w", claim, err)
		}
		if err := deviceCgroup(host, pid, rdev, "allow"); err != nil {
			_, _ = mountns.Remove(mountns.Path(pid), dst)
			return fmt.Errorf("giving the launcher the device of claim %s: %w", claim, err)
		}
		return nil
	}
	if err := mountns.Bind(host, src, mountns.Path(pid), dst); err != nil {
		return fmt.Errorf("mounting claim %s into the launcher: %w", claim, err)
	}
	if uid == 0 {
		return nil
	}
	root, err := unix.Open(filepath.Join("/proc", strconv.Itoa(pid), "root"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the launcher's root file system: %w", err)
	}
	defer unix.Close(root)
	_, err = chownIn(root, filepath.Join(strings.TrimPrefix(dst, "/"), "disk.img"), uid, gid, unix.S_IFREG)
	return err
}

// unmountClaim takes a hotplugged claim away from the launcher: the mount,
// or the device node and its device cgroup rule.
func (a *Agent) unmountClaim(pid int, dst string, device bool) error {
	if !device {
		return mountns.Unmount(mountns.Path(pid), dst)
	}
	rdev, err := mountns.Remove(mountns.Path(pid), dst)
	if err != nil || rdev == 0 {
		return err
	}
	host, err := a.hostNamespace()
	if err != nil {
		return err
	}
	return deviceCgroup(host, pid, rdev, "deny")
}

// hostNamespace is Config.HostMountNamespace, else the namespace the agent
// was started from.
func (a *Agent) hostNamespace() (string, error) {
	if a.cfg.HostMountNamespace != "" {
		return a.cfg.HostMountNamespace, nil
	}
	return mountns.Outside()
}

// deviceCgroup allows (or denies) the block device rdev to the launcher
// (PID pid) in its cgroup v1 device controller, as the node's mount
// namespace host sees it; the runtime allowed only the pod's own devices.
// cgroup v2 controls devices with an eBPF program per cgroup, which vmkit
// does not replace yet: refused, saying so.
func deviceCgroup(host string, pid int, rdev uint64, verb string) error {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "devices") {
			rule := fmt.Sprintf("b %d:%d rwm", unix.Major(rdev), unix.Minor(rdev))
			file := "/sys/fs/cgroup/" + f[1] + f[2] + "/devices." + verb
			if err := mountns.WriteFile(host, file, []byte(rule)); err != nil {
				return fmt.Errorf("%s %q in the launcher's device cgroup (%s): %w", verb, rule, file, err)
			}
			return nil
		}
	}
	return errors.New("the launcher has no cgroup v1 device controller (the node runs cgroup v2, where devices are allowed by an eBPF program vmkit does not replace yet): hot-plug a Filesystem claim instead")
}

// errClaimNotBound: the claim is not bound to a volume yet.
var errClaimNotBound = errors.New("not bound to a PersistentVolume yet")

// claimPath is where the volume bound to the claim namespace/name lies on
// this node: the path of a hostPath or local PersistentVolume (what
// node-local provisioners such as local-path-provisioner create) that this
// node may use. Other volume types need the kubelet to attach and mount
// them, which the agent does not do: they are refused, naming the type.
func (a *Agent) claimPath(ctx context.Context, namespace, name string) (path string, block bool, err error) {
	pvc, err := a.cfg.Kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", false, fmt.Errorf("reading claim %s: %w", name, err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		if err := a.selectNode(ctx, pvc); err != nil {
			return "", false, err
		}
		return "", false, fmt.Errorf("claim %s is %s: %w", name, pvc.Status.Phase, errClaimNotBound)
	}
	pv, err := a.cfg.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", false, fmt.Errorf("reading PersistentVolume %s of claim %s: %w", pvc.Spec.VolumeName, name, err)
	}
	block = pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock
	switch {
	case pv.Spec.HostPath != nil:
		path = pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
	default:
		return "", false, fmt.Errorf("PersistentVolume %s of claim %s is not a hostPath or local volume: the node agent hot-plugs node-local volumes only, which it mounts without the kubelet", pv.Name, name)
	}
	if aff := pv.Spec.NodeAffinity; aff != nil && aff.Required != nil {
		node, err := a.cfg.Kube.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return "", false, fmt.Errorf("reading node %s for the node affinity of PersistentVolume %s: %w", a.cfg.NodeName, pv.Name, err)
		}
		if ok, err := corev1helpers.MatchNodeSelectorTerms(node, aff.Required); err != nil || !ok {
			return "", false, fmt.Errorf("PersistentVolume %s of claim %s lies on another node than %s (its node affinity)", pv.Name, name, a.cfg.NodeName)
		}
	}
	return path, block, nil
}

// selectedNodeAnnotation is the annotation the scheduler puts on a claim of
// a WaitForFirstConsumer StorageClass to have it provisioned on the node
// of the pod that uses it.
const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// selectNode does for an unbound claim of a WaitForFirstConsumer
// StorageClass what the scheduler does for a pod's claims: it binds a
// matching volume of this node (bindStaticVolume), or else annotates the
// claim with this node, so the provisioner makes its volume here. A
// hotplugged claim has no pod of its own (KubeVirt's attachment pod is
// one) whose scheduling would.
func (a *Agent) selectNode(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if pvc.Spec.VolumeName != "" || pvc.Annotations[selectedNodeAnnotation] != "" || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil
	}
	sc, err := a.cfg.Kube.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading StorageClass %s of claim %s: %w", *pvc.Spec.StorageClassName, pvc.Name, err)
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return nil
	}
	if bound, err := a.bindStaticVolume(ctx, pvc); err != nil || bound {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, selectedNodeAnnotation, a.cfg.NodeName)
	if _, err := a.cfg.Kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Patch(ctx, pvc.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("selecting node %s for claim %s (StorageClass %s waits for a first consumer): %w", a.cfg.NodeName, pvc.Name, sc.Name, err)
	}
	return nil
}

// bindStaticVolume does for an unbound claim of a WaitForFirstConsumer
// class what the scheduler's volume binder does for a pod's: it binds the
// smallest Available PersistentVolume of the claim's class, mode and
// access modes that holds its request and lies on this node (a local
// volume), by setting the volume's claimRef; the PersistentVolume
// controller completes the binding. No such volume: false, and the
// provisioner is asked instead.
func (a *Agent) bindStaticVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	pvs, err := a.cfg.Kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("listing PersistentVolumes for claim %s: %w", pvc.Name, err)
	}
	node, err := a.cfg.Kube.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading node %s: %w", a.cfg.NodeName, err)
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	mode := corev1.PersistentVolumeFilesystem
	if pvc.Spec.VolumeMode != nil {
		mode = *pvc.Spec.VolumeMode
	}
	var best *corev1.PersistentVolume
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		pvMode := corev1.PersistentVolumeFilesystem
		if pv.Spec.VolumeMode != nil {
			pvMode = *pv.Spec.VolumeMode
		}
		size := pv.Spec.Capacity[corev1.ResourceStorage]
		switch {
		case pv.Status.Phase != corev1.VolumeAvailable, pv.Spec.ClaimRef != nil, pv.DeletionTimestamp != nil,
			pv.Spec.StorageClassName != *pvc.Spec.StorageClassName, pvMode != mode, size.Cmp(want) < 0,
			!slices.ContainsFunc(pvc.Spec.AccessModes, func(m corev1.PersistentVolumeAccessMode) bool { return slices.Contains(pv.Spec.AccessModes, m) }):
			continue
		}
		if aff := pv.Spec.NodeAffinity; aff != nil && aff.Required != nil {
			if ok, err := corev1helpers.MatchNodeSelectorTerms(node, aff.Required); err != nil || !ok {
				continue
			}
		}
		if best == nil || size.Cmp(best.Spec.Capacity[corev1.ResourceStorage]) < 0 {
			best = pv
		}
	}
	if best == nil {
		return false, nil
	}
	ref := corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
	patch, err := jsonpatch.Marshal(jsonpatch.Test("/metadata/resourceVersion", best.ResourceVersion), jsonpatch.Add("/spec/claimRef", ref))
	if err != nil {
		return false, err
	}
	if _, err := a.cfg.Kube.CoreV1().PersistentVolumes().Patch(ctx, best.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, fmt.Errorf("binding PersistentVolume %s to claim %s: %w", best.Name, pvc.Name, err)
	}
	return true, nil
}

// applyHotplugVolumes writes how each hotplugged volume stands into the
// status's volumeStatus: Ready with its target once the guest has the
// disk, MountedToPod once mounted, Detaching while the guest releases a
// volume that left the spec; a volume that cannot be mounted keeps the
// VMI controller's phase (Pending, Bound) and says why.
func applyHotplugVolumes(s *v1.VirtualMachineInstanceStatus, vmi *v1.VirtualMachineInstance, st *client.Status, hs *hotplugState) {
	if st == nil || hs == nil {
		return
	}
	want := hotpluggable(vmi)
	inLauncher := map[string]client.HotplugVolume{}
	for _, v := range st.HotplugVolumes {
		inLauncher[v.Name] = v
	}
	index := map[string]int{}
	for i := range s.VolumeStatus {
		index[s.VolumeStatus[i].Name] = i
	}
	for name := range want {
		i, ok := index[name]
		if !ok {
			continue // the VMI controller adds the entry first
		}
		vs := &s.VolumeStatus[i]
		lv := inLauncher[name]
		if j := slices.IndexFunc(st.MemoryDumps, func(d client.MemoryDump) bool { return d.Volume == name }); j >= 0 {
			memoryDumpStatus(vs, want[name], &st.MemoryDumps[j])
			continue
		}
		switch {
		case lv.Attached:
			vs.Phase, vs.Reason, vs.Target = v1.VolumeReady, ReasonVolumeReady, lv.Target
			vs.Message = fmt.Sprintf("Successfully attach hotplugged volume %s to VM", name)
		case hs.mounted[name]:
			vs.Phase, vs.Reason = v1.HotplugVolumeMounted, ReasonVolumeMountedToPod
			vs.Message = lv.Message
			if vs.Message == "" {
				vs.Message = fmt.Sprintf("Volume %s mounted into the launcher pod", name)
			}
		case hs.problems[name] != "":
			vs.Reason, vs.Message = ReasonVolumeMountFailed, hs.problems[name]
		}
	}
	var kept []v1.VolumeStatus
	for _, vs := range s.VolumeStatus {
		if _, ok := want[vs.Name]; ok || vs.HotplugVolume == nil {
			kept = append(kept, vs)
			continue
		}
		// A hotplugged volume that left the spec: shown while it leaves.
		if lv, ok := inLauncher[vs.Name]; ok && lv.Detaching || hs.mounted[vs.Name] {
			vs.Phase, vs.Reason = v1.HotplugVolumeDetaching, ReasonVolumeDetaching
			vs.Message = fmt.Sprintf("Detaching hotplugged volume %s from the VM", vs.Name)
			if lv.Message != "" {
				vs.Message = lv.Message
			}
			kept = append(kept, vs)
		}
	}
	s.VolumeStatus = kept
}
