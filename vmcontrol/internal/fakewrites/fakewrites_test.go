package fakewrites

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

func TestList(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	got := List([]k8stesting.Action{
		k8stesting.NewGetAction(pods, "ns", "a"),
		k8stesting.NewCreateAction(pods, "ns", nil),
	}, []k8stesting.Action{
		k8stesting.NewUpdateSubresourceAction(pods, "status", "ns", nil),
		k8stesting.NewListAction(pods, schema.GroupVersionKind{}, "ns", metav1.ListOptions{}),
	})
	if diff := cmp.Diff([]string{"create pods", "update pods/status"}, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
