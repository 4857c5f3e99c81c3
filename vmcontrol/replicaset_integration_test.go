package vmcontrol_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol"
)

// TestReplicaSet runs the Manager's replica set controller against a real
// API server: a VirtualMachineInstanceReplicaSet gets its VMIs, reports
// them ready, follows the scale subresource (what `kubectl scale` and a
// HorizontalPodAutoscaler write) up and down, and scaling down removes the
// least progressed VMIs first, the oldest ready one last; a
// HorizontalPodAutoscaler scales it too.
func TestReplicaSet(t *testing.T) {
	c := startCluster(t)
	c.fakeKubelet(t)
	c.startManager(t, vmcontrol.LeaderElection{})
	ctx := context.Background()
	sets := c.client.KubevirtV1().VirtualMachineInstanceReplicaSets(ns)

	one := int32(1)
	rs := &v1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: v1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
					Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
				}},
			},
		},
	}
	if _, err := sets.Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// owned lists the replica set's live VMIs, oldest first.
	owned := func(ctx context.Context) ([]v1.VirtualMachineInstance, error) {
		list, err := c.client.KubevirtV1().VirtualMachineInstances(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return nil, err
		}
		var out []v1.VirtualMachineInstance
		for _, v := range list.Items {
			if ref := metav1.GetControllerOf(&v); ref != nil && ref.Name == "web" && v.DeletionTimestamp == nil {
				out = append(out, v)
			}
		}
		slices.SortFunc(out, func(a, b v1.VirtualMachineInstance) int {
			if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		return out, nil
	}
	waitOwned := func(n int, what string, ok func([]v1.VirtualMachineInstance) bool) []v1.VirtualMachineInstance {
		t.Helper()
		var got []v1.VirtualMachineInstance
		waitFor(t, 60*time.Second, what, func(ctx context.Context) (bool, error) {
			var err error
			got, err = owned(ctx)
			return err == nil && len(got) == n && (ok == nil || ok(got)), nil
		})
		return got
	}
	allIn := func(phase v1.VirtualMachineInstancePhase) func([]v1.VirtualMachineInstance) bool {
		return func(vs []v1.VirtualMachineInstance) bool {
			for _, v := range vs {
				if v.Status.Phase != phase {
					return false
				}
			}
			return true
		}
	}

	scale := func(n int32) {
		t.Helper()
		// What `kubectl scale --replicas=n` sends; like kubectl, read again
		// and retry when the controller's status write got in between.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := sets.GetScale(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = n
			_, err = sets.UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: s.ObjectMeta, Spec: s.Spec}, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	oldest := waitOwned(1, "1 VMI Scheduled", allIn(v1.Scheduled))[0]
	// Creation timestamps have whole seconds, truncated: a VMI created once
	// the clock (the API server's, which is this machine's) has passed the
	// oldest's second is younger.
	time.Sleep(time.Until(oldest.CreationTimestamp.Add(time.Second)))
	scale(2)
	first := waitOwned(2, "2 VMIs Scheduled", allIn(v1.Scheduled))
	for _, v := range first {
		c.setVMIPhase(t, v.Name, v1.Running)
	}
	waitFor(t, 30*time.Second, "status: 2 replicas, 2 ready, selector", func(ctx context.Context) (bool, error) {
		got, err := sets.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.Replicas == 2 && got.Status.ReadyReplicas == 2 && got.Status.LabelSelector == "app=web", nil
	})
	scale(4)
	waitOwned(4, "4 VMIs after scaling up", func(vs []v1.VirtualMachineInstance) bool {
		for _, v := range vs {
			if v.Status.Phase != v1.Scheduled && v.Status.Phase != v1.Running {
				return false
			}
		}
		return true
	})
	s, err := sets.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil || s.Spec.Replicas != 4 || s.Status.Selector != "app=web" {
		t.Errorf("scale subresource: %+v, %v", s, err)
	}

	// Down to 2: the two new VMIs, not ready, go; the ready ones stay.
	scale(2)
	left := waitOwned(2, "2 VMIs after scaling down", nil)
	if names(left) != names(first) {
		t.Errorf("after scaling 4 → 2: %s left, want the two ready ones %s", names(left), names(first))
	}
	// Down to 1: of two ready VMIs the younger goes.
	scale(1)
	left = waitOwned(1, "1 VMI after scaling down", nil)
	if left[0].Name != oldest.Name {
		t.Errorf("after scaling 2 → 1: %s left, want the oldest ready one, %s", left[0].Name, oldest.Name)
	}
	waitFor(t, 30*time.Second, "status: 1 replica", func(ctx context.Context) (bool, error) {
		got, err := sets.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.Replicas == 1 && got.Status.ReadyReplicas == 1, nil
	})

	// A HorizontalPodAutoscaler drives the replica set through the same
	// subresource: kube-controller-manager's HPA controller raises the
	// replicas to minReplicas (before it needs any metric).
	three := int32(3)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: v1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstanceReplicaSet", Name: "web"},
			MinReplicas:    &three,
			MaxReplicas:    5,
		},
	}
	if _, err := c.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the HPA to scale the replica set to 3", func(ctx context.Context) (bool, error) {
		got, err := sets.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Spec.Replicas != nil && *got.Spec.Replicas == 3 && got.Status.Replicas == 3, nil
	})
}

func names(vs []v1.VirtualMachineInstance) string {
	var n []string
	for _, v := range vs {
		n = append(n, v.Name)
	}
	slices.Sort(n)
	return strings.Join(n, ",")
}
