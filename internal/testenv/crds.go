package testenv

import (
	"context"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// InstallCRDs creates each CRD, or updates it if one of that name exists, then
// waits until every one is Established, has its names accepted and is served
// in discovery. It gives up after 30 seconds (or when ctx ends) with an error
// naming the CRD that is not ready.
//
// kube-apiserver holds every create of a custom resource for 2 seconds while
// its CRD has been Established for less than 2 seconds (a guard for HA
// clusters), so the first create right after InstallCRDs or Start may take
// that long; InstallCRDs does not wait it out.
func (e *Env) InstallCRDs(ctx context.Context, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	if len(crds) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, crdTimeout)
	defer cancel()
	for _, crd := range crds {
		if crd == nil {
			return errors.New("InstallCRDs: nil CRD")
		}
		if err := e.applyCRD(ctx, crd); err != nil {
			return fmt.Errorf("install CRD %q: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		var last string
		err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
			var ready bool
			ready, last = e.crdReady(ctx, crd)
			return ready, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %q not ready within %v: %s: %w", crd.Name, crdTimeout, last, err)
		}
	}
	return nil
}

func (e *Env) applyCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	client := e.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := client.Get(ctx, crd.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		desired := crd.DeepCopy()
		desired.ResourceVersion = existing.ResourceVersion
		_, err = client.Update(ctx, desired, metav1.UpdateOptions{})
		return err
	})
}

// crdReady reports whether crd can be used, and if not, why.
func (e *Env) crdReady(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (bool, string) {
	got, err := e.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, want := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.NamesAccepted, apiextensionsv1.Established} {
		if c := findCRDCondition(got, want); c == nil || c.Status != apiextensionsv1.ConditionTrue {
			if c == nil {
				return false, fmt.Sprintf("no %s condition", want)
			}
			return false, fmt.Sprintf("%s=%s: %s: %s", want, c.Status, c.Reason, c.Message)
		}
	}
	if got.Status.AcceptedNames.Plural != crd.Spec.Names.Plural {
		return false, fmt.Sprintf("accepted plural %q, want %q", got.Status.AcceptedNames.Plural, crd.Spec.Names.Plural)
	}
	// Established means the server handles the resource; clients that map
	// kinds to resources through discovery also need it listed there.
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gv := crd.Spec.Group + "/" + v.Name
		list, err := e.Kube.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			return false, fmt.Sprintf("discovery of %s: %v", gv, err)
		}
		if !hasResource(list, crd.Spec.Names.Plural) {
			return false, fmt.Sprintf("%s not yet in discovery of %s", crd.Spec.Names.Plural, gv)
		}
	}
	return true, ""
}

func findCRDCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

func hasResource(list *metav1.APIResourceList, plural string) bool {
	for _, r := range list.APIResources {
		if r.Name == plural {
			return true
		}
	}
	return false
}
