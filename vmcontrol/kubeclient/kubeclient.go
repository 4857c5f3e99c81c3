// Package kubeclient is a small typed client for the Kubernetes resources
// vmkit's controllers read and write: pods, persistent volume claims, nodes,
// events, services, secrets and config maps (core/v1), leases (coordination.k8s.io/v1), controller
// revisions (apps/v1) and pod disruption budgets (policy/v1), plus the one discovery question the Manager asks (is
// a resource served?).
//
// It is client-go underneath: client-go's generic typed client (gentype) on
// rest clients whose scheme holds only the kinds served here, speaking
// protobuf. client-go's clientset does all of this too, but importing any of
// its typed clients (or its discovery client, or tools/leaderelection) links
// every k8s.io/api group into the binary: client-go/kubernetes/scheme
// registers all 57 of them. Measured for issue #22 (docs/performance.md):
// virt-controller on client-go's clientset and leader election carries 50.7
// MB of code and read-only data instead of 28.3 MB, and its RSS goes from 32
// to 43 MiB idle and from 62-64 to 75 MiB at its peak with 1,000 VMs
// (hack/density; client-go's leader election alone: 42 and 73 MiB).
// Memory at density is a number vmkit is measured by (60 MiB at 1,000 VMs,
// against KubeVirt's 300 MiB), so the package stays.
//
// Its interfaces are subsets of client-go's typed interfaces, so code holding
// a clientset can pass its typed clients where these are asked for:
//
//	kubeclient.PodsGetterFunc(func(ns string) kubeclient.PodInterface {
//		return clientset.CoreV1().Pods(ns)
//	})
package kubeclient

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// PodInterface creates, deletes, reads and watches the pods of a namespace.
type PodInterface interface {
	Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	// Patch patches a pod or, with subresources "resize", its resources in
	// place (the VMI controller grows a launcher pod for memory hotplug).
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
}

// PodsGetter returns the pods of a namespace ("" for all namespaces, to
// list and watch). *Client satisfies it.
type PodsGetter interface {
	Pods(namespace string) PodInterface
}

// PodsGetterFunc adapts a function, such as one returning a client-go
// clientset's CoreV1().Pods(namespace), to PodsGetter.
type PodsGetterFunc func(namespace string) PodInterface

// Pods calls f.
func (f PodsGetterFunc) Pods(namespace string) PodInterface { return f(namespace) }

// PersistentVolumeClaimInterface creates, reads, watches and patches the
// claims of a namespace (created: the backend storage of VMIs with
// persistent state; patched: the memory dump annotation).
type PersistentVolumeClaimInterface interface {
	Create(ctx context.Context, claim *corev1.PersistentVolumeClaim, opts metav1.CreateOptions) (*corev1.PersistentVolumeClaim, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.PersistentVolumeClaim, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.PersistentVolumeClaim, error)
}

// NodeInterface reads, watches and patches the cluster's nodes. A client-go
// clientset's CoreV1().Nodes() satisfies it.
type NodeInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// EventInterface writes the events of a namespace.
type EventInterface interface {
	Create(ctx context.Context, event *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
	Update(ctx context.Context, event *corev1.Event, opts metav1.UpdateOptions) (*corev1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error)
}

// ControllerRevisionInterface creates, deletes, reads and watches the
// controller revisions of a namespace. A client-go clientset's
// AppsV1().ControllerRevisions(namespace) satisfies it.
type ControllerRevisionInterface interface {
	Create(ctx context.Context, rev *appsv1.ControllerRevision, opts metav1.CreateOptions) (*appsv1.ControllerRevision, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*appsv1.ControllerRevision, error)
	List(ctx context.Context, opts metav1.ListOptions) (*appsv1.ControllerRevisionList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ControllerRevisionsGetter returns the controller revisions of a namespace
// ("" for all namespaces, to list and watch). *Client satisfies it.
type ControllerRevisionsGetter interface {
	ControllerRevisions(namespace string) ControllerRevisionInterface
}

// ControllerRevisionsGetterFunc adapts a function, such as one returning a
// client-go clientset's AppsV1().ControllerRevisions(namespace), to
// ControllerRevisionsGetter.
type ControllerRevisionsGetterFunc func(namespace string) ControllerRevisionInterface

// ControllerRevisions calls f.
func (f ControllerRevisionsGetterFunc) ControllerRevisions(namespace string) ControllerRevisionInterface {
	return f(namespace)
}

// PodDisruptionBudgetInterface creates, patches, deletes, reads and
// watches the pod disruption budgets of a namespace. A client-go
// clientset's PolicyV1().PodDisruptionBudgets(namespace) satisfies it.
type PodDisruptionBudgetInterface interface {
	Create(ctx context.Context, pdb *policyv1.PodDisruptionBudget, opts metav1.CreateOptions) (*policyv1.PodDisruptionBudget, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*policyv1.PodDisruptionBudget, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*policyv1.PodDisruptionBudget, error)
	List(ctx context.Context, opts metav1.ListOptions) (*policyv1.PodDisruptionBudgetList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// PodDisruptionBudgetsGetter returns the pod disruption budgets of a
// namespace ("" for all namespaces, to list and watch). *Client satisfies
// it.
type PodDisruptionBudgetsGetter interface {
	PodDisruptionBudgets(namespace string) PodDisruptionBudgetInterface
}

// PodDisruptionBudgetsGetterFunc adapts a function, such as one returning a
// client-go clientset's PolicyV1().PodDisruptionBudgets(namespace), to
// PodDisruptionBudgetsGetter.
type PodDisruptionBudgetsGetterFunc func(namespace string) PodDisruptionBudgetInterface

// PodDisruptionBudgets calls f.
func (f PodDisruptionBudgetsGetterFunc) PodDisruptionBudgets(namespace string) PodDisruptionBudgetInterface {
	return f(namespace)
}

// ServiceInterface creates, reads and deletes the services of a namespace
// (the export controller's export server Services).
type ServiceInterface interface {
	Create(ctx context.Context, svc *corev1.Service, opts metav1.CreateOptions) (*corev1.Service, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Service, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// SecretInterface creates, reads and deletes the secrets of a namespace
// (the export controller's tokens and serving certificates).
type SecretInterface interface {
	Create(ctx context.Context, secret *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// ConfigMapInterface creates, reads and deletes the config maps of a
// namespace (the export controller's manifest data).
type ConfigMapInterface interface {
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// LeaseInterface reads and writes the leases of a namespace.
type LeaseInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// Client reaches the API server for pods, claims, nodes, events, services,
// secrets, config maps, leases, controller revisions and pod disruption
// budgets.
type Client struct {
	core, coordination, apps, policy rest.Interface
	params                           runtime.ParameterCodec
}

// newScheme holds the kinds this package serves, and the meta types their
// lists, watches and options need.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// NewForConfig builds a Client. Unless cfg sets a content type, it speaks
// protobuf (JSON accepted), which costs a fraction of JSON's CPU and garbage
// for pods.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	base := rest.CopyConfig(cfg)
	if base.ContentType == "" {
		base.ContentType = runtime.ContentTypeProtobuf
		base.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, fmt.Errorf("kubeclient: %w", err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	base.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, codecs).WithoutConversion()
	httpClient, err := rest.HTTPClientFor(base)
	if err != nil {
		return nil, fmt.Errorf("kubeclient: %w", err)
	}
	clientFor := func(apiPath string, gv schema.GroupVersion) (rest.Interface, error) {
		c := rest.CopyConfig(base)
		c.APIPath, c.GroupVersion = apiPath, &gv
		rc, err := rest.RESTClientForConfigAndClient(c, httpClient)
		if err != nil {
			return nil, fmt.Errorf("kubeclient: %s: %w", gv, err)
		}
		return rc, nil
	}
	core, err := clientFor("/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	coordination, err := clientFor("/apis", coordinationv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	apps, err := clientFor("/apis", appsv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	policy, err := clientFor("/apis", policyv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &Client{core: core, coordination: coordination, apps: apps, policy: policy, params: runtime.NewParameterCodec(scheme)}, nil
}

// Pods returns the pods of a namespace.
func (c *Client) Pods(namespace string) PodInterface {
	return gentype.NewClientWithList("pods", c.core, c.params, namespace,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} },
		gentype.PrefersProtobuf[*corev1.Pod]())
}

// PersistentVolumeClaims returns the claims of a namespace.
func (c *Client) PersistentVolumeClaims(namespace string) PersistentVolumeClaimInterface {
	return gentype.NewClientWithList("persistentvolumeclaims", c.core, c.params, namespace,
		func() *corev1.PersistentVolumeClaim { return &corev1.PersistentVolumeClaim{} },
		func() *corev1.PersistentVolumeClaimList { return &corev1.PersistentVolumeClaimList{} },
		gentype.PrefersProtobuf[*corev1.PersistentVolumeClaim]())
}

// PersistentVolumeClaimsGetter returns the claims of a namespace. *Client
// satisfies it.
type PersistentVolumeClaimsGetter interface {
	PersistentVolumeClaims(namespace string) PersistentVolumeClaimInterface
}

// Nodes returns the cluster's nodes (they have no namespace).
func (c *Client) Nodes() NodeInterface {
	return gentype.NewClientWithList("nodes", c.core, c.params, "",
		func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} },
		gentype.PrefersProtobuf[*corev1.Node]())
}

// Events returns the events of a namespace.
func (c *Client) Events(namespace string) EventInterface {
	return gentype.NewClient("events", c.core, c.params, namespace,
		func() *corev1.Event { return &corev1.Event{} }, gentype.PrefersProtobuf[*corev1.Event]())
}

// Services returns the services of a namespace.
func (c *Client) Services(namespace string) ServiceInterface {
	return gentype.NewClient("services", c.core, c.params, namespace,
		func() *corev1.Service { return &corev1.Service{} }, gentype.PrefersProtobuf[*corev1.Service]())
}

// Secrets returns the secrets of a namespace.
func (c *Client) Secrets(namespace string) SecretInterface {
	return gentype.NewClient("secrets", c.core, c.params, namespace,
		func() *corev1.Secret { return &corev1.Secret{} }, gentype.PrefersProtobuf[*corev1.Secret]())
}

// ConfigMaps returns the config maps of a namespace.
func (c *Client) ConfigMaps(namespace string) ConfigMapInterface {
	return gentype.NewClient("configmaps", c.core, c.params, namespace,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, gentype.PrefersProtobuf[*corev1.ConfigMap]())
}

// Leases returns the leases of a namespace.
func (c *Client) Leases(namespace string) LeaseInterface {
	return gentype.NewClient("leases", c.coordination, c.params, namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, gentype.PrefersProtobuf[*coordinationv1.Lease]())
}

// ControllerRevisions returns the controller revisions of a namespace.
func (c *Client) ControllerRevisions(namespace string) ControllerRevisionInterface {
	return gentype.NewClientWithList("controllerrevisions", c.apps, c.params, namespace,
		func() *appsv1.ControllerRevision { return &appsv1.ControllerRevision{} },
		func() *appsv1.ControllerRevisionList { return &appsv1.ControllerRevisionList{} },
		gentype.PrefersProtobuf[*appsv1.ControllerRevision]())
}

// PodDisruptionBudgets returns the pod disruption budgets of a namespace.
func (c *Client) PodDisruptionBudgets(namespace string) PodDisruptionBudgetInterface {
	return gentype.NewClientWithList("poddisruptionbudgets", c.policy, c.params, namespace,
		func() *policyv1.PodDisruptionBudget { return &policyv1.PodDisruptionBudget{} },
		func() *policyv1.PodDisruptionBudgetList { return &policyv1.PodDisruptionBudgetList{} },
		gentype.PrefersProtobuf[*policyv1.PodDisruptionBudget]())
}

// Serves reports whether the API server serves the resource (its group
// version's discovery document lists it). A group version the server does
// not know is not an error: it is not served.
func (c *Client) Serves(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	path := "/apis/" + gvr.Group + "/" + gvr.Version
	if gvr.Group == "" {
		path = "/api/" + gvr.Version
	}
	raw, err := c.core.Get().AbsPath(path).SetHeader("Accept", runtime.ContentTypeJSON).DoRaw(ctx)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("kubeclient: discovering %s: %w", gvr.GroupVersion(), err)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, fmt.Errorf("kubeclient: discovering %s: %w", gvr.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// EventSink writes events for client-go's event recorder (tools/record)
// into the event's own namespace, as client-go's EventSinkImpl does.
func EventSink(events func(namespace string) EventInterface) record.EventSink {
	return eventSink(events)
}

type eventSink func(namespace string) EventInterface

func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s(e.Namespace).Create(context.Background(), e, metav1.CreateOptions{})
}

func (s eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s(e.Namespace).Update(context.Background(), e, metav1.UpdateOptions{})
}

func (s eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s(e.Namespace).Patch(context.Background(), e.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
