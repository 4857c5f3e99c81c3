package v1

import (
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateKubeVirt validates a KubeVirt installation's spec.
func ValidateKubeVirt(kv *KubeVirt) field.ErrorList {
	if kv == nil {
		return field.ErrorList{field.InternalError(nil, errors.New("KubeVirt is nil"))}
	}
	specPath := field.NewPath("spec")
	configPath := specPath.Child("configuration")
	var errs field.ErrorList
	errs = append(errs, validateUninstallStrategy(specPath.Child("uninstallStrategy"), kv.Spec.UninstallStrategy)...)
	errs = append(errs, validatePullPolicy(specPath.Child("imagePullPolicy"), kv.Spec.ImagePullPolicy)...)
	errs = append(errs, validatePullPolicy(configPath.Child("imagePullPolicy"), kv.Spec.Configuration.ImagePullPolicy)...)
	if dev := kv.Spec.Configuration.DeveloperConfiguration; dev != nil {
		errs = append(errs, validateFeatureGates(configPath.Child("developerConfiguration", "featureGates"), dev.FeatureGates)...)
	}
	if q := kv.Spec.Configuration.CPURequest; q != nil && q.Sign() <= 0 {
		errs = append(errs, field.Invalid(configPath.Child("cpuRequest"), q.String(), "must be greater than 0"))
	}
	return errs
}

func validateUninstallStrategy(p *field.Path, s KubeVirtUninstallStrategy) field.ErrorList {
	known := []KubeVirtUninstallStrategy{KubeVirtUninstallStrategyRemoveWorkloads, KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist}
	if s == "" || contains(known, s) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, s, known)}
}

func validatePullPolicy(p *field.Path, policy corev1.PullPolicy) field.ErrorList {
	known := []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	if policy == "" || contains(known, policy) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, policy, known)}
}

// validateFeatureGates checks feature gates are non-empty and listed once.
func validateFeatureGates(p *field.Path, gates []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, g := range gates {
		switch {
		case strings.TrimSpace(g) == "":
			errs = append(errs, field.Required(p.Index(i), "a feature gate needs a name"))
		case seen[g]:
			errs = append(errs, field.Duplicate(p.Index(i), g))
		}
		seen[g] = true
	}
	return errs
}
