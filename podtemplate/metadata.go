package podtemplate

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const (
	// podNamePrefix starts the name of every launcher pod: the API server
	// completes virt-launcher-<vmi name>- with five random characters.
	podNamePrefix = "virt-launcher-"
	// defaultContainerAnnotation makes kubectl logs and exec pick compute.
	defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"
	// migrationJobNameAnnotation on a migration target pod holds the
	// migration's name (KubeVirt's annotation).
	migrationJobNameAnnotation = "kubevirt.io/migrationJobName"
)

// reservedKeys are labels and annotations that vmkit's components, as
// KubeVirt's, set themselves on launcher pods or VMIs and read back. A
// VMI's own are never copied to its pod, where a controller would take
// them for its own: to the migration controller a pod labelled
// kubevirt.io/migrationJobUID and annotated kubevirt.io/migrationJobName is
// that migration's target. (KubeVirt copies them; #35 N11.) Other
// kubevirt.io/ keys are copied, as KubeVirt copies them: users label VMs
// kubevirt.io/vm or kubevirt.io/domain and select launcher pods by them
// (the annotation kubevirt.io/domain is the renderer's, set after).
var reservedKeys = map[string]bool{
	v1.AppLabel:                     true,
	v1.CreatedByLabel:               true,
	v1.MigrationJobLabel:            true,
	migrationJobNameAnnotation:      true,
	v1.NodeNameLabel:                true,
	v1.MigrationTargetNodeNameLabel: true,
	v1.MigrationSelectorLabel:       true,
	v1.EphemeralProvisioningObject:  true,
	// KubeVirt's API-version bookkeeping on VMIs.
	"kubevirt.io/latest-observed-api-version":  true,
	"kubevirt.io/storage-observed-api-version": true,
}

// runtimeAnnotationPrefixes start the annotations the kubelet and the
// container runtime act on for security: AppArmor and seccomp profiles.
// A VMI's are never copied to its pod, whose profiles are the renderer's
// (an AppArmor "unconfined" takes effect in a privileged namespace).
var runtimeAnnotationPrefixes = []string{
	"container.apparmor.security.beta.kubernetes.io/",
	"seccomp.security.alpha.kubernetes.io/",
	"container.seccomp.security.alpha.kubernetes.io/",
}

// podLabels are the VMI's labels but reservedKeys, then Config.ExtraLabels,
// then the launcher's own: kubevirt.io=virt-launcher,
// kubevirt.io/created-by=<vmi uid> and vm.kubevirt.io/name=<host name>
// (what KubeVirt puts there, so Services written for KubeVirt select the
// pod).
func podLabels(vmi *v1.VirtualMachineInstance, extra map[string]string, host string, room int) map[string]string {
	labels := make(map[string]string, len(vmi.Labels)+len(extra)+3+room)
	for k, v := range vmi.Labels {
		if reservedKeys[k] {
			continue
		}
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	labels[v1.AppLabel] = v1.VirtLauncherValue
	labels[v1.CreatedByLabel] = string(vmi.UID)
	if host != "" {
		labels[v1.VirtualMachineLabel] = host
	}
	return labels
}

// podAnnotations are the VMI's annotations without kubectl's, reservedKeys
// and the AppArmor and seccomp ones, then Config.ExtraAnnotations, then
// kubevirt.io/domain=<vmi name> and kubectl's default container.
func podAnnotations(vmi *v1.VirtualMachineInstance, extra map[string]string, room int) map[string]string {
	ann := make(map[string]string, len(vmi.Annotations)+len(extra)+2+room)
	for k, v := range vmi.Annotations {
		if strings.HasPrefix(k, "kubectl.kubernetes.io/") || reservedKeys[k] || isRuntimeAnnotation(k) {
			continue
		}
		ann[k] = v
	}
	for k, v := range extra {
		ann[k] = v
	}
	ann[v1.DomainAnnotation] = vmi.Name
	ann[defaultContainerAnnotation] = ComputeContainerName
	return ann
}

func isRuntimeAnnotation(k string) bool {
	for _, p := range runtimeAnnotationPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// controllerRef makes the VMI the pod's controlling owner, so deleting the
// VMI deletes the pod and the VMI controller adopts it.
func controllerRef(vmi *v1.VirtualMachineInstance) []metav1.OwnerReference {
	s := &struct {
		refs         [1]metav1.OwnerReference
		ctrl, blockD bool
	}{ctrl: true, blockD: true}
	s.refs[0] = metav1.OwnerReference{
		APIVersion:         v1.GroupName + "/v1",
		Kind:               v1.VirtualMachineInstanceGroupVersionKind.Kind,
		Name:               vmi.Name,
		UID:                vmi.UID,
		Controller:         &s.ctrl,
		BlockOwnerDeletion: &s.blockD,
	}
	return s.refs[:]
}
