package kubeclient_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// contentTypes records the Content-Type of every response.
type contentTypes struct {
	mu    sync.Mutex
	seen  map[string]string // request path → response content type
	inner http.RoundTripper
}

func (c *contentTypes) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.inner.RoundTrip(req)
	if err == nil {
		c.mu.Lock()
		c.seen[req.Method+" "+req.URL.Path] = resp.Header.Get("Content-Type")
		c.mu.Unlock()
	}
	return resp, err
}

// TestAgainstAPIServer drives every call the controllers make through a
// real kube-apiserver: pods (protobuf on the wire), claims, nodes, events
// through the recorder's sink, leases and discovery.
func TestAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The ServiceAccount admission plugin needs the default ServiceAccount
	// (kube-controller-manager is not running here).
	if _, err := env.Kube.CoreV1().ServiceAccounts("default").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rec := &contentTypes{seen: map[string]string{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { rec.inner = rt; return rec }
	c, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("pods", func(t *testing.T) {
		pods := c.Pods("default")
		w, err := c.Pods("").Watch(ctx, metav1.ListOptions{LabelSelector: "app=kubeclient-test"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p1", Labels: map[string]string{"app": "kubeclient-test"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := pods.Get(ctx, "p1", metav1.GetOptions{})
		if err != nil || got.UID != created.UID || got.Spec.Containers[0].Image != "busybox" {
			t.Fatalf("Get = %+v, %v; want the created pod", got, err)
		}
		list, err := c.Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app=kubeclient-test"})
		if err != nil || len(list.Items) != 1 || list.Items[0].UID != created.UID {
			t.Fatalf("List = %v, %v; want the one pod", list, err)
		}
		other := created.UID + "-other"
		err = pods.Delete(ctx, "p1", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &other}})
		if !apierrors.IsConflict(err) {
			t.Fatalf("Delete with another UID's precondition = %v, want a conflict", err)
		}
		if err := pods.Delete(ctx, "p1", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}, GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		var events []watch.EventType
		for len(events) < 2 {
			select {
			case e := <-w.ResultChan():
				events = append(events, e.Type)
			case <-ctx.Done():
				t.Fatalf("watch saw %v, want ADDED … DELETED", events)
			}
		}
		if events[0] != watch.Added {
			t.Errorf("first watch event %s, want ADDED", events[0])
		}
		rec.mu.Lock()
		ct := rec.seen["GET /api/v1/namespaces/default/pods/p1"]
		rec.mu.Unlock()
		if !strings.HasPrefix(ct, "application/vnd.kubernetes.protobuf") {
			t.Errorf("GET pod answered with %q, want protobuf", ct)
		}
	})

	t.Run("claims", func(t *testing.T) {
		list, err := c.PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 0 {
			t.Fatalf("List = %v, %v; want none", list, err)
		}
		if _, err := c.PersistentVolumeClaims("default").Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("Get of a missing claim = %v, want NotFound", err)
		}
	})

	t.Run("nodes", func(t *testing.T) {
		nodes := c.Nodes()
		w, err := nodes.Watch(ctx, metav1.ListOptions{LabelSelector: "kubeclient-test=yes"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		// kubeclient does not create nodes (the kubelet does): the test's clientset does.
		if _, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: "kubeclient-node", Labels: map[string]string{"kubeclient-test": "yes"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := nodes.Get(ctx, "kubeclient-node", metav1.GetOptions{})
		if err != nil || got.Labels["kubeclient-test"] != "yes" {
			t.Fatalf("Get = %+v, %v; want the created node", got, err)
		}
		list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: "kubeclient-test=yes"})
		if err != nil || len(list.Items) != 1 || list.Items[0].UID != got.UID {
			t.Fatalf("List = %v, %v; want the one node", list, err)
		}
		patch := `{"metadata":{"resourceVersion":"` + got.ResourceVersion + `","labels":{"kubevirt.io/schedulable":"false"}}}`
		patched, err := nodes.Patch(ctx, "kubeclient-node", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil || patched.Labels["kubevirt.io/schedulable"] != "false" || patched.Labels["kubeclient-test"] != "yes" {
			t.Fatalf("Patch = %+v, %v; want the label added", patched, err)
		}
		if _, err := nodes.Patch(ctx, "kubeclient-node", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
			t.Fatalf("a patch with a stale resourceVersion = %v, want a conflict", err)
		}
		var events []watch.EventType
		for len(events) < 2 {
			select {
			case e := <-w.ResultChan():
				events = append(events, e.Type)
			case <-ctx.Done():
				t.Fatalf("watch saw %v, want ADDED, MODIFIED", events)
			}
		}
		if events[0] != watch.Added || events[1] != watch.Modified {
			t.Errorf("watch saw %v, want ADDED, MODIFIED", events)
		}
		rec.mu.Lock()
		ct := rec.seen["GET /api/v1/nodes/kubeclient-node"]
		rec.mu.Unlock()
		if !strings.HasPrefix(ct, "application/vnd.kubernetes.protobuf") {
			t.Errorf("GET node answered with %q, want protobuf", ct)
		}
	})

	t.Run("events through the recorder's sink", func(t *testing.T) {
		sink := kubeclient.EventSink(c.Events)
		e, err := sink.Create(&corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "vm.1", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "VirtualMachine", Namespace: "default", Name: "vm"},
			Reason:         "SuccessfulCreate", Message: "created", Type: corev1.EventTypeNormal, Count: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		patched, err := sink.Patch(e, []byte(`{"count":2}`))
		if err != nil || patched.Count != 2 {
			t.Fatalf("Patch = %+v, %v; want count 2", patched, err)
		}
		patched.Message = "created again"
		updated, err := sink.Update(patched)
		if err != nil || updated.Message != "created again" {
			t.Fatalf("Update = %+v, %v", updated, err)
		}
		if _, err := sink.Create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "no-such-namespace"},
			InvolvedObject: corev1.ObjectReference{Namespace: "no-such-namespace"}}); !apierrors.IsNotFound(err) {
			t.Fatalf("an event in a missing namespace = %v, want NotFound", err)
		}
	})

	t.Run("leases", func(t *testing.T) {
		leases := c.Leases("default")
		holder := "a"
		created, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		holder = "b"
		created.Spec.HolderIdentity = &holder
		if _, err := leases.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Fatalf("an update from a stale resourceVersion = %v, want a conflict", err)
		}
		got, err := leases.Get(ctx, "l", metav1.GetOptions{})
		if err != nil || *got.Spec.HolderIdentity != "b" {
			t.Fatalf("Get = %+v, %v; want holder b", got, err)
		}
	})

	t.Run("controllerrevisions", func(t *testing.T) {
		revs := c.ControllerRevisions("default")
		w, err := c.ControllerRevisions("").Watch(ctx, metav1.ListOptions{LabelSelector: "app=kubeclient-test"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		rev := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: "r1", Labels: map[string]string{"app": "kubeclient-test"}},
			Data:       runtime.RawExtension{Raw: []byte(`{"kind":"Example","spec":{"size":2}}`)},
			Revision:   1,
		}
		if _, err := revs.Create(ctx, rev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := revs.Create(ctx, rev, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Fatalf("a second create = %v, want AlreadyExists", err)
		}
		got, err := revs.Get(ctx, "r1", metav1.GetOptions{})
		if err != nil || string(got.Data.Raw) != `{"kind":"Example","spec":{"size":2}}` {
			t.Fatalf("Get = %+v, %v; want the data stored", got, err)
		}
		list, err := c.ControllerRevisions("").List(ctx, metav1.ListOptions{LabelSelector: "app=kubeclient-test"})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("List = %v, %v; want the one revision", list, err)
		}
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added || ev.Object.(*appsv1.ControllerRevision).Name != "r1" {
				t.Fatalf("watch event %v %v, want the revision added", ev.Type, ev.Object)
			}
		case <-ctx.Done():
			t.Fatal("no watch event")
		}
	})

	t.Run("poddisruptionbudgets", func(t *testing.T) {
		pdbs := c.PodDisruptionBudgets("default")
		w, err := c.PodDisruptionBudgets("").Watch(ctx, metav1.ListOptions{LabelSelector: "app=kubeclient-test"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		one := intstr.FromInt32(1)
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "kubeclient-test-", Labels: map[string]string{"app": "kubeclient-test"}},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kubeclient-test"}}},
		}
		created, err := pdbs.Create(ctx, pdb, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		patched, err := pdbs.Patch(ctx, created.Name, types.MergePatchType, []byte(`{"spec":{"minAvailable":2}}`), metav1.PatchOptions{})
		if err != nil || patched.Spec.MinAvailable.IntValue() != 2 {
			t.Fatalf("Patch = %+v, %v; want minAvailable 2", patched, err)
		}
		list, err := c.PodDisruptionBudgets("").List(ctx, metav1.ListOptions{LabelSelector: "app=kubeclient-test"})
		if err != nil || len(list.Items) != 1 || list.Items[0].Spec.MinAvailable.IntValue() != 2 {
			t.Fatalf("List = %v, %v; want the one budget at 2", list, err)
		}
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added || ev.Object.(*policyv1.PodDisruptionBudget).Name != created.Name {
				t.Fatalf("watch event %v %v, want the budget added", ev.Type, ev.Object)
			}
		case <-ctx.Done():
			t.Fatal("no watch event")
		}
		if err := pdbs.Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pdbs.Get(ctx, created.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("Get after Delete = %v, want NotFound", err)
		}
	})

	t.Run("serves", func(t *testing.T) {
		for _, tc := range []struct {
			gvr  schema.GroupVersionResource
			want bool
		}{
			{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, true},
			{schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, true},
			{schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "widgets"}, false},
			{schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}, false},
		} {
			got, err := c.Serves(ctx, tc.gvr)
			if err != nil || got != tc.want {
				t.Errorf("Serves(%s) = %v, %v; want %v", tc.gvr, got, err, tc.want)
			}
		}
	})
}
