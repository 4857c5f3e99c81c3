package installstrategy

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestRetryCRDCleanup: a CRD being deleted whose custom resources the API
// server failed to remove gets CleanupRetryAnnotation (which requeues the
// API server's CRD finalizer), at most once every cleanupRetryEvery; a CRD
// whose cleanup did not fail is left alone.
func TestRetryCRDCleanup(t *testing.T) {
	crd := func(name, reason string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": name, "deletionTimestamp": "2026-11-27T10:00:00Z", "finalizers": []any{"customresourcecleanup.apiextensions.k8s.io"}},
			"status": map[string]any{"conditions": []any{map[string]any{
				"type": "Terminating", "status": "True", "reason": reason,
				"message": "could not list instances: storage is (re)initializing",
			}}},
		}}
		return u
	}
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crdResource: "CustomResourceDefinitionList"},
		crd("failed.example.io", "InstanceDeletionFailed"), crd("deleting.example.io", "InstanceDeletionInProgress"))
	client := c.Resource(crdResource)
	ctx := t.Context()
	annotation := func(name string) string {
		t.Helper()
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.GetAnnotations()[CleanupRetryAnnotation]
	}
	retry := func(name string, now time.Time) {
		t.Helper()
		live, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := retryCRDCleanup(ctx, client, live, now); err != nil {
			t.Fatalf("retryCRDCleanup(%s): %v", name, err)
		}
	}

	t0 := time.Date(2026, 11, 27, 10, 0, 1, 0, time.UTC)
	retry("failed.example.io", t0)
	if got, want := annotation("failed.example.io"), t0.Format(time.RFC3339Nano); got != want {
		t.Fatalf("after a failed cleanup: %s = %q, want %q", CleanupRetryAnnotation, got, want)
	}
	retry("failed.example.io", t0.Add(cleanupRetryEvery/2))
	if got, want := annotation("failed.example.io"), t0.Format(time.RFC3339Nano); got != want {
		t.Errorf("within %v of the last retry: %s = %q, want it unchanged (%q)", cleanupRetryEvery, CleanupRetryAnnotation, got, want)
	}
	t1 := t0.Add(cleanupRetryEvery)
	retry("failed.example.io", t1)
	if got, want := annotation("failed.example.io"), t1.Format(time.RFC3339Nano); got != want {
		t.Errorf("%v after the last retry: %s = %q, want %q", cleanupRetryEvery, CleanupRetryAnnotation, got, want)
	}

	retry("deleting.example.io", t0)
	if got := annotation("deleting.example.io"); got != "" {
		t.Errorf("a cleanup under way got %s = %q, want none", CleanupRetryAnnotation, got)
	}
	// A CRD that went meanwhile is no error.
	gone := crd("gone.example.io", "InstanceDeletionFailed")
	if err := retryCRDCleanup(ctx, client, gone, t0); err != nil {
		t.Errorf("retryCRDCleanup on a CRD that is gone: %v", err)
	}
}

// TestDeleteRetriesFailedCRDCleanup: Delete, run again while one of the
// strategy's CRDs is terminating with a failed cleanup (what the API
// server's CRD finalizer reports when it could not list the custom
// resources), annotates that CRD so the finalizer retries, and reports the
// CRD as remaining.
func TestDeleteRetriesFailedCRDCleanup(t *testing.T) {
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	listKinds := map[schema.GroupVersionResource]string{
		vmResource:  "VirtualMachineList",
		vmiResource: "VirtualMachineInstanceList",
	}
	for _, k := range kinds {
		listKinds[k.gvk.GroupVersion().WithResource(k.resource)] = k.gvk.Kind + "List"
	}
	var name string
	for _, obj := range s.Objects() {
		if obj.GetObjectKind().GroupVersionKind().Kind == "CustomResourceDefinition" {
			name = obj.GetName()
			break
		}
	}
	if name == "" {
		t.Fatal("the strategy has no CRD")
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name, "deletionTimestamp": "2026-11-27T10:00:00Z", "finalizers": []any{"customresourcecleanup.apiextensions.k8s.io"}},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "Terminating", "status": "True", "reason": "InstanceDeletionFailed",
			"message": "could not list instances: storage is (re)initializing",
		}}},
	}}
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, crd)

	before := time.Now()
	res, err := Delete(t.Context(), c, s, DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Remaining, func(r string) bool { return strings.Contains(r, name) }) {
		t.Errorf("Delete: remaining %v, want it to name CRD %s", res.Remaining, name)
	}
	live, err := c.Resource(crdResource).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339Nano, live.GetAnnotations()[CleanupRetryAnnotation])
	if err != nil || at.Before(before.Add(-time.Second)) {
		t.Errorf("CRD %s after Delete: %s = %q, want the time of the Delete (%v)", name, CleanupRetryAnnotation,
			live.GetAnnotations()[CleanupRetryAnnotation], err)
	}
}
