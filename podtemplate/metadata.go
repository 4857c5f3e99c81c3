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

// podLabels are the VMI's labels, then Config.ExtraLabels, then the
// launcher's own: kubevirt.io=virt-launcher, kubevirt.io/created-by=<vmi uid>
// and vm.kubevirt.io/name=<host name> (what KubeVirt puts there, so Services
// written for KubeVirt select the pod).
func podLabels(vmi *v1.VirtualMachineInstance, extra map[string]string, host string, room int) map[string]string {
	labels := make(map[string]string, len(vmi.Labels)+len(extra)+3+room)
	for k, v := range vmi.Labels {
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

// podAnnotations are the VMI's annotations without kubectl's and KubeVirt's
// bookkeeping ones, then Config.ExtraAnnotations, then
// kubevirt.io/domain=<vmi name> and kubectl's default container.
func podAnnotations(vmi *v1.VirtualMachineInstance, extra map[string]string, room int) map[string]string {
	ann := make(map[string]string, len(vmi.Annotations)+len(extra)+2+room)
	for k, v := range vmi.Annotations {
		if strings.HasPrefix(k, "kubectl.kubernetes.io/") ||
			k == "kubevirt.io/latest-observed-api-version" ||
			k == "kubevirt.io/storage-observed-api-version" {
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
