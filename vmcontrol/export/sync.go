package export

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	exportv1 "github.com/vmkit/vmkit/vmapi/export/v1beta1"
	snapshotv1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// Condition reasons (KubeVirt's).
const (
	ReasonInitializing         = "Initializing"
	ReasonPodPending           = "PodPending"
	ReasonPodReady             = "PodReady"
	ReasonPodCompleted         = "PodCompleted"
	ReasonInUse                = "InUse"
	ReasonVMNotFound           = "VMNotFound"
	ReasonPVCNotFound          = "PVCNotFound"
	ReasonPVCBound             = "PVCBound"
	ReasonPVCPending           = "PVCPending"
	ReasonVMNoVolumes          = "VMNoVolumes"
	ReasonSnapshotNotFound     = "VMSnapshotNotFound"
	ReasonSnapshotNoVolumes    = "VMSnapshotNoVolumes"
	ReasonUnknownSourceKind    = "UnknownSourceKind"
	snapshotGroup              = "snapshot.kubevirt.io"
	kindVirtualMachine         = "VirtualMachine"
	kindPersistentVolumeClaim  = "PersistentVolumeClaim"
	kindVirtualMachineSnapshot = "VirtualMachineSnapshot"
)

// source is what an export's source resolved to.
type source struct {
	vm      *v1.VirtualMachine // a VM source
	volumes []exportVolume
	// blocked, when set, is why no server runs now: the Ready condition's
	// reason and message, and whether the phase is Skipped (for good)
	// rather than Pending.
	blocked     string
	message     string
	skipped     bool
	claimsPhase corev1.PersistentVolumeClaimPhase // the worst of the claims
	claimsKnown bool
}

func (c *Controller) sync(ctx context.Context, key string) error {
	obj, exists, err := c.exports.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	export := obj.(*exportv1.VirtualMachineExport)
	if export.DeletionTimestamp != nil {
		return nil
	}
	now := c.cfg.Now()
	expiry := ExpirationTime(export)
	if !now.Before(expiry) {
		c.cfg.Recorder.Eventf(export, corev1.EventTypeNormal, ReasonExpired, "The export's time to live ended at %s: deleting it", expiry.UTC().Format(time.RFC3339))
		err := c.cfg.Exports.VirtualMachineExports(export.Namespace).Delete(ctx, export.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &export.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting expired VirtualMachineExport %s: %w", key, err)
		}
		return nil
	}

	status := &exportv1.VirtualMachineExportStatus{}
	if export.Status != nil {
		status = export.Status.DeepCopy()
	}
	// The API keeps seconds: compare and write what it keeps.
	status.TTLExpirationTime = &metav1.Time{Time: expiry.Truncate(time.Second)}
	tokenSecret := DefaultTokenSecretName(export)
	if export.Spec.TokenSecretRef != nil {
		tokenSecret = *export.Spec.TokenSecretRef
	} else if status.TokenSecretRef == nil || *status.TokenSecretRef != tokenSecret {
		// Once the status names it, an earlier sync created it: no request
		// per sync (syncs follow every pod, claim and VM event of the
		// namespace).
		if err := c.ensureTokenSecret(ctx, export, tokenSecret); err != nil {
			return err
		}
	}
	status.TokenSecretRef = &tokenSecret

	src := c.resolve(export)
	if src.vm != nil {
		status.VirtualMachineName = ptr.To(src.vm.Name)
	}
	if src.claimsKnown {
		setCondition(status, claimsCondition(src.claimsPhase), now)
	}
	pod, err := c.serverPod(export)
	if err != nil {
		return err
	}
	switch {
	case src.blocked != "":
		if pod != nil && pod.DeletionTimestamp == nil {
			// The source became busy (a VM started): stop serving it.
			if err := c.cfg.Kube.Pods(export.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting the export server pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
			c.cfg.Recorder.Eventf(export, corev1.EventTypeWarning, ReasonPodDeleted, "Deleted export server pod %s: %s", pod.Name, src.message)
		}
		status.Phase = exportv1.Pending
		if src.skipped {
			status.Phase = exportv1.Skipped
		}
		status.Links = nil
		setCondition(status, readyCondition(corev1.ConditionFalse, src.blocked, src.message), now)
	default:
		caBundle, err := c.cfg.Issuer.CABundle(ctx)
		if err != nil {
			return fmt.Errorf("VirtualMachineExport %s: %w", key, err)
		}
		if pod == nil {
			if pod, err = c.createServer(ctx, export, src, tokenSecret, expiry, caBundle); err != nil {
				return err
			}
		}
		status.ServiceName = ServiceName(export)
		status.Phase, status.Links = exportv1.Pending, nil
		switch {
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
			status.Phase = exportv1.Terminated
			setCondition(status, readyCondition(corev1.ConditionFalse, ReasonPodCompleted, ""), now)
		case pod.Status.Phase == corev1.PodRunning && podReady(pod):
			status.Phase = exportv1.Ready
			status.Links = &exportv1.VirtualMachineExportLinks{Internal: internalLinks(export, src.volumes, src.vm != nil, caBundle)}
			setCondition(status, readyCondition(corev1.ConditionTrue, ReasonPodReady, ""), now)
		default:
			setCondition(status, readyCondition(corev1.ConditionFalse, ReasonPodPending, ""), now)
		}
	}
	if export.Status == nil || !equality.Semantic.DeepEqual(export.Status, status) {
		updated := export.DeepCopy()
		updated.Status = status
		if _, err := c.cfg.Exports.VirtualMachineExports(export.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("updating the status of VirtualMachineExport %s: %w", key, err)
		}
	}
	return reconcile.After(expiry.Sub(now))
}

// resolve finds the export's source and its claims.
func (c *Controller) resolve(export *exportv1.VirtualMachineExport) source {
	ref := export.Spec.Source
	group := ptr.Deref(ref.APIGroup, "")
	ns := export.Namespace
	switch {
	case ref.Kind == kindPersistentVolumeClaim && group == "":
		claim := c.claim(ns, ref.Name)
		if claim == nil {
			return source{blocked: ReasonPVCNotFound, message: fmt.Sprintf("PersistentVolumeClaim %s/%s not found", ns, ref.Name)}
		}
		src := source{volumes: []exportVolume{{claim: claim, diskImage: isDiskImage(claim)}}}
		src.claimsPhase, src.claimsKnown = claim.Status.Phase, true
		if vmi := c.vmiUsing(ns, ref.Name); vmi != "" {
			src.blocked, src.message = ReasonInUse, fmt.Sprintf("PersistentVolumeClaim %s/%s is in use by VirtualMachineInstance %s", ns, ref.Name, vmi)
		} else if claim.Status.Phase != corev1.ClaimBound {
			src.blocked, src.message = ReasonPVCPending, fmt.Sprintf("PersistentVolumeClaim %s/%s is not bound", ns, ref.Name)
		}
		return src
	case ref.Kind == kindVirtualMachine && group == v1.GroupName:
		obj, ok, _ := c.vms.GetByKey(ns + "/" + ref.Name)
		if !ok {
			return source{blocked: ReasonVMNotFound, message: fmt.Sprintf("VirtualMachine %s/%s not found", ns, ref.Name)}
		}
		vm := obj.(*v1.VirtualMachine)
		src := source{vm: vm}
		if vmi, ok, _ := c.vmis.GetByKey(ns + "/" + vm.Name); ok && !vmi.(*v1.VirtualMachineInstance).IsFinal() {
			src.blocked, src.message = ReasonInUse, fmt.Sprintf("VirtualMachine %s/%s is running: stop it to export it", ns, vm.Name)
		}
		var missing []string
		if vm.Spec.Template != nil {
			for _, vol := range vm.Spec.Template.Spec.Volumes {
				name := claimOf(vol)
				if name == "" {
					continue
				}
				claim := c.claim(ns, name)
				if claim == nil {
					missing = append(missing, name)
					continue
				}
				src.volumes = append(src.volumes, exportVolume{claim: claim, diskImage: true})
				src.claimsPhase, src.claimsKnown = worse(src.claimsPhase, claim.Status.Phase, src.claimsKnown), true
			}
		}
		switch {
		case src.blocked != "":
		case len(missing) > 0:
			src.blocked, src.message = ReasonPVCNotFound, fmt.Sprintf("PersistentVolumeClaims of VirtualMachine %s/%s not found: %v", ns, vm.Name, missing)
		case len(src.volumes) == 0:
			src.blocked, src.skipped = ReasonVMNoVolumes, true
			src.message = fmt.Sprintf("VirtualMachine %s/%s has no PersistentVolumeClaim or DataVolume volumes to export", ns, vm.Name)
		case src.claimsPhase != corev1.ClaimBound:
			src.blocked, src.message = ReasonPVCPending, fmt.Sprintf("not every PersistentVolumeClaim of VirtualMachine %s/%s is bound", ns, vm.Name)
		}
		return src
	case ref.Kind == kindVirtualMachineSnapshot && group == snapshotGroup:
		if c.snapshots != nil {
			if obj, ok, _ := c.snapshots.GetByKey(ns + "/" + ref.Name); ok {
				// vmkit's snapshots hold no volume (no CSI snapshotter):
				// nothing to serve, as KubeVirt says of such a snapshot.
				snap := obj.(*snapshotv1.VirtualMachineSnapshot)
				src := source{blocked: ReasonSnapshotNoVolumes, skipped: true,
					message: fmt.Sprintf("VirtualMachineSnapshot %s/%s holds no volumes (no volume could be snapshotted)", ns, ref.Name)}
				if snap.Status != nil && snap.Status.VirtualMachineSnapshotContentName != nil {
					src.vm = &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: snap.Spec.Source.Name, Namespace: ns}}
				}
				return src
			}
		}
		return source{blocked: ReasonSnapshotNotFound, message: fmt.Sprintf("VirtualMachineSnapshot %s/%s not found", ns, ref.Name)}
	}
	return source{blocked: ReasonUnknownSourceKind, skipped: true,
		message: fmt.Sprintf("spec.source: kind %q of apiGroup %q cannot be exported: want VirtualMachine (kubevirt.io), PersistentVolumeClaim (core) or VirtualMachineSnapshot (snapshot.kubevirt.io)", ref.Kind, group)}
}

// claimOf is the claim a VM volume uses: a persistentVolumeClaim's, or a
// dataVolume's (whose claim has its name).
func claimOf(vol v1.Volume) string {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName
	case vol.DataVolume != nil:
		return vol.DataVolume.Name
	}
	return ""
}

func (c *Controller) claim(namespace, name string) *corev1.PersistentVolumeClaim {
	obj, ok, _ := c.claims.GetByKey(namespace + "/" + name)
	if !ok {
		return nil
	}
	return obj.(*corev1.PersistentVolumeClaim)
}

// vmiUsing is the name of a VMI of the namespace, not final, whose volumes
// use the claim ("" if none).
func (c *Controller) vmiUsing(namespace, claim string) string {
	objs, _ := c.vmis.ByIndex(cache.NamespaceIndex, namespace)
	for _, obj := range objs {
		vmi := obj.(*v1.VirtualMachineInstance)
		if vmi.IsFinal() {
			continue
		}
		for _, vol := range vmi.Spec.Volumes {
			if claimOf(vol) == claim {
				return vmi.Name
			}
		}
	}
	return ""
}

// isDiskImage: a Block claim, or one CDI marked as holding a disk image.
func isDiskImage(claim *corev1.PersistentVolumeClaim) bool {
	if isBlock(claim) {
		return true
	}
	ct, ok := claim.Annotations[ContentTypeAnnotation]
	return ok && (ct == "kubevirt" || ct == "")
}

// worse orders claim phases Bound < Pending < Lost.
func worse(a, b corev1.PersistentVolumeClaimPhase, haveA bool) corev1.PersistentVolumeClaimPhase {
	rank := map[corev1.PersistentVolumeClaimPhase]int{corev1.ClaimBound: 0, corev1.ClaimPending: 1, corev1.ClaimLost: 2}
	if !haveA || rank[b] > rank[a] {
		return b
	}
	return a
}

func (c *Controller) serverPod(export *exportv1.VirtualMachineExport) (*corev1.Pod, error) {
	obj, ok, err := c.pods.GetByKey(export.Namespace + "/" + ServiceName(export))
	if err != nil || !ok {
		return nil, err
	}
	pod := obj.(*corev1.Pod)
	if !metav1.IsControlledBy(pod, export) {
		return nil, fmt.Errorf("VirtualMachineExport %s/%s: pod %s exists and is not the export's", export.Namespace, export.Name, pod.Name)
	}
	return pod, nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ensureTokenSecret creates the export's token Secret unless it exists.
func (c *Controller) ensureTokenSecret(ctx context.Context, export *exportv1.VirtualMachineExport, name string) error {
	// Create only: virt-controller may create Secrets but not read them.
	secret := &corev1.Secret{
		ObjectMeta: objectMeta(export, name),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{exportv1.TokenSecretKey: []byte(newToken())},
	}
	if _, err := c.cfg.Kube.Secrets(export.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the token Secret %s/%s: %w", export.Namespace, name, err)
	}
	return nil
}

// createServer creates the Service, the serving Secret, the manifest
// ConfigMap (VM sources) and the server pod; what exists is kept.
func (c *Controller) createServer(ctx context.Context, export *exportv1.VirtualMachineExport, src source, tokenSecret string, expiry time.Time, caBundle string) (*corev1.Pod, error) {
	ns, log := export.Namespace, klog.FromContext(ctx)
	exists := func(err error) bool { return err == nil || apierrors.IsAlreadyExists(err) }
	if _, err := c.cfg.Kube.Services(ns).Create(ctx, renderService(export), metav1.CreateOptions{}); !exists(err) {
		return nil, fmt.Errorf("creating the export Service %s/%s: %w", ns, ServiceName(export), err)
	} else if err == nil {
		c.cfg.Recorder.Eventf(export, corev1.EventTypeNormal, ReasonServiceCreated, "Created export Service %s", ServiceName(export))
	}
	{
		// A Secret left by an earlier try is kept (AlreadyExists).
		host := ServiceName(export)
		certPEM, keyPEM, err := c.cfg.Issuer.Issue(ctx, []string{internalHost(export), host + "." + ns, host}, expiry.Add(time.Hour))
		if err != nil {
			return nil, fmt.Errorf("VirtualMachineExport %s/%s: %w", ns, export.Name, err)
		}
		secret := &corev1.Secret{
			ObjectMeta: objectMeta(export, tlsSecretName(export)),
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}
		if _, err := c.cfg.Kube.Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); !exists(err) {
			return nil, fmt.Errorf("creating the export's serving Secret %s/%s: %w", ns, secret.Name, err)
		}
	}
	if src.vm != nil {
		cm, err := renderManifestData(export, src.vm, caBundle)
		if err != nil {
			return nil, err
		}
		if _, err := c.cfg.Kube.ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); !exists(err) {
			return nil, fmt.Errorf("creating the export's manifest ConfigMap %s/%s: %w", ns, cm.Name, err)
		}
	}
	pod := renderPod(export, podConfig{
		image: c.cfg.Image, pullPolicy: c.cfg.ImagePullPolicy, tokenSecret: tokenSecret,
		deadline: expiry, volumes: src.volumes, manifests: src.vm != nil,
	})
	created, err := c.cfg.Kube.Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return pod, nil // the cache will bring it
	}
	if err != nil {
		return nil, fmt.Errorf("creating the export server pod %s/%s: %w", ns, pod.Name, err)
	}
	log.V(2).Info("created export server pod", "export", export.Namespace+"/"+export.Name, "pod", created.Name)
	c.cfg.Recorder.Eventf(export, corev1.EventTypeNormal, ReasonPodCreated, "Created export server pod %s", created.Name)
	return created, nil
}

func readyCondition(status corev1.ConditionStatus, reason, message string) exportv1.Condition {
	return exportv1.Condition{Type: exportv1.ConditionReady, Status: status, Reason: reason, Message: message}
}

func claimsCondition(phase corev1.PersistentVolumeClaimPhase) exportv1.Condition {
	switch phase {
	case corev1.ClaimBound:
		return exportv1.Condition{Type: exportv1.ConditionPVC, Status: corev1.ConditionTrue, Reason: ReasonPVCBound}
	case corev1.ClaimPending:
		return exportv1.Condition{Type: exportv1.ConditionPVC, Status: corev1.ConditionFalse, Reason: ReasonPVCPending}
	}
	return exportv1.Condition{Type: exportv1.ConditionPVC, Status: corev1.ConditionFalse, Reason: "Unknown"}
}

// setCondition puts c into status, keeping the transition time unless its
// status, reason or message changed.
func setCondition(status *exportv1.VirtualMachineExportStatus, c exportv1.Condition, now time.Time) {
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message {
			c.LastTransitionTime = metav1.NewTime(now)
			*old = c
		}
		return
	}
	c.LastTransitionTime = metav1.NewTime(now)
	status.Conditions = append(status.Conditions, c)
}
