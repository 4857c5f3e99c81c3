package virtapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/vmkit/vmkit/internal/jsonpatch"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// PodEvictionPath is the path of virt-api's pod eviction webhook
// (KubeVirt's virt-launcher-eviction-interceptor.kubevirt.io).
const PodEvictionPath = "/pod-eviction-validate"

// EvictionConfig is what the pod eviction webhook needs.
type EvictionConfig struct {
	// Kube reads the evicted pod; Kubevirt reads and patches its VMI.
	Kube     kubernetes.Interface
	Kubevirt versioned.Interface
	// ClusterStrategy, if set, returns the KubeVirt CR's
	// spec.configuration.evictionStrategy (nil when unset), the default
	// of VMIs without their own.
	ClusterStrategy func(ctx context.Context) *v1.EvictionStrategy
}

// EvictionHandler is KubeVirt's pod eviction webhook, which turns the
// eviction of a running VMI's launcher pod (kubectl drain, the descheduler)
// into a live migration. For a launcher whose VMI's eviction strategy (its
// own, else the cluster's) is
//   - LiveMigrate: refused if the VMI is not LiveMigratable; otherwise
//     refused with 429 "Eviction triggered evacuation of VMI ns/name" after
//     setting the VMI's status.evacuationNodeName to the pod's node (only
//     with a dry run, not set), which the evacuation controller turns into
//     a migration; kubectl drain retries until the guest left and the pod
//     completed;
//   - LiveMigrateIfPossible: the same when LiveMigratable, else allowed;
//   - External: the same (another component moves the guest);
//   - None or unset: allowed.
//
// An eviction of a pod that is not a running launcher, or of the target pod
// of a migration in flight (on another node than the VMI's: refused with
// "Eviction request for target Pod"), follows the same rules as KubeVirt's.
// Errors reading the pod allow the eviction (failurePolicy Ignore, as
// KubeVirt: a PodDisruptionBudget is the fallback).
func EvictionHandler(cfg EvictionConfig) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review := &admissionv1.AdmissionReview{}
		if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("not an admission.k8s.io/v1 AdmissionReview with a request: %v", err), http.StatusBadRequest)
			return
		}
		resp := admitEviction(r.Context(), cfg, review.Request)
		resp.UID = review.Request.UID
		review.Response, review.Request = resp, nil
		writeJSON(w, http.StatusOK, review)
	})
}

func admitEviction(ctx context.Context, cfg EvictionConfig, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	pod, err := cfg.Kube.CoreV1().Pods(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
	if err != nil || pod.Labels[v1.AppLabel] != v1.VirtLauncherValue || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return allowed
	}
	vmiName, ok := pod.Annotations[v1.DomainAnnotation]
	if !ok {
		return allowed
	}
	vmi, err := cfg.Kubevirt.KubevirtV1().VirtualMachineInstances(req.Namespace).Get(ctx, vmiName, metav1.GetOptions{})
	if err != nil {
		return denied(fmt.Sprintf("kubevirt failed getting the vmi: %v", err))
	}
	strategy := vmi.Spec.EvictionStrategy
	if strategy == nil && cfg.ClusterStrategy != nil {
		strategy = cfg.ClusterStrategy(ctx)
	}
	if strategy == nil {
		return allowed
	}
	migratable := false
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceIsMigratable && c.Status == corev1.ConditionTrue {
			migratable = true
		}
	}
	switch *strategy {
	case v1.EvictionStrategyLiveMigrate:
		if !migratable {
			return denied(fmt.Sprintf("VMI %s is configured with an eviction strategy but is not live-migratable", vmi.Name))
		}
	case v1.EvictionStrategyLiveMigrateIfPossible:
		if !migratable {
			return allowed
		}
	case v1.EvictionStrategyExternal:
	default:
		return allowed
	}
	const evictionFmt = "Eviction triggered evacuation of VMI \"%s/%s\""
	if vmi.Status.EvacuationNodeName != "" {
		return denied(fmt.Sprintf("Evacuation in progress: "+evictionFmt, vmi.Namespace, vmi.Name))
	}
	if vmi.Status.NodeName != pod.Spec.NodeName {
		return denied("Eviction request for target Pod")
	}
	eviction := &policyv1.Eviction{}
	if err := json.Unmarshal(req.Object.Raw, eviction); err != nil {
		return denied(fmt.Sprintf("failed to parse the eviction object: %v", err))
	}
	dryRun := req.DryRun != nil && *req.DryRun
	if eviction.DeleteOptions != nil && len(eviction.DeleteOptions.DryRun) > 0 && eviction.DeleteOptions.DryRun[0] == metav1.DryRunAll {
		dryRun = true
	}
	patch, err := jsonpatch.Marshal(jsonpatch.Add("/status/evacuationNodeName", pod.Spec.NodeName))
	if err != nil {
		return denied(err.Error())
	}
	opts := metav1.PatchOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := cfg.Kubevirt.KubevirtV1().VirtualMachineInstances(vmi.Namespace).Patch(ctx, vmi.Name, types.JSONPatchType, patch, opts); err != nil {
		return denied(fmt.Sprintf("kubevirt failed marking the vmi for eviction: %v", err))
	}
	return denied(fmt.Sprintf(evictionFmt, vmi.Namespace, vmi.Name))
}

// denied refuses with 429 Too Many Requests, which kubectl drain retries.
func denied(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: msg, Code: http.StatusTooManyRequests}}
}
