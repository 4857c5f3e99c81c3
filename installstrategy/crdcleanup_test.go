package installstrategy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// TestRetryCRDCleanup: a CRD being deleted whose custom resources the API
// server failed to remove gets CleanupRetryAnnotation (which requeues the
// API server's CRD finalizer), at most once every cleanupRetryEvery; a CRD
// whose cleanup did not fail is left alone.
func TestRetryCRDCleanup(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
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
		map[schema.GroupVersionResource]string{gvr: "CustomResourceDefinitionList"},
		crd("failed.example.io", "InstanceDeletionFailed"), crd("deleting.example.io", "InstanceDeletionInProgress"))
	client := c.Resource(gvr)
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
