package installstrategy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Annotations Apply keeps on every object it writes.
const (
	// HashAnnotation holds a hash of the object as the strategy generated
	// it: a differing hash means the strategy changed and the object is rewritten.
	HashAnnotation = "vmkit.io/install-strategy-hash"
	// GenerationAnnotation holds the metadata.generation the object had
	// after Apply last wrote it, on kinds whose generation counts spec
	// changes (CRDs, Deployments, DaemonSets): a differing generation means
	// someone else changed the spec and Apply puts it back.
	GenerationAnnotation = "vmkit.io/install-strategy-generation"
	// CleanupRetryAnnotation is written on a CRD being deleted whose
	// custom resources the API server failed to remove (its Terminating
	// condition says InstanceDeletionFailed): the write makes the API
	// server's CRD finalizer try again now instead of after its backoff,
	// which grows to minutes. It holds the time of the write.
	CleanupRetryAnnotation = "vmkit.io/crd-cleanup-retry"
)

// cleanupRetryEvery is the least time between two CleanupRetryAnnotation
// writes on one CRD.
const cleanupRetryEvery = 5 * time.Second

// kind is one kind of object a strategy holds.
type kind struct {
	gvk        schema.GroupVersionKind
	resource   string
	namespaced bool
	// generation is true when metadata.generation counts spec changes.
	generation bool
	// compare, if set, reports whether the live object holds what desired
	// holds in the fields compare knows (for kinds without a generation
	// whose content matters, such as RBAC rules).
	compare func(desired, live map[string]any) bool
	// monitoring is true for the Prometheus Operator's kinds, which a
	// cluster may not serve (ApplyOptions.Monitoring).
	monitoring bool
}

// kinds in the order Apply writes them; Delete goes backwards.
var kinds = []kind{
	{gvk: schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, resource: "customresourcedefinitions", generation: true},
	{gvk: schema.GroupVersionKind{Group: "scheduling.k8s.io", Version: "v1", Kind: "PriorityClass"}, resource: "priorityclasses", compare: sameFields("value", "description")},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, resource: "serviceaccounts", namespaced: true},
	{gvk: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, resource: "clusterroles", compare: sameFields("rules")},
	{gvk: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, resource: "clusterrolebindings", compare: sameFields("roleRef", "subjects")},
	{gvk: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, resource: "roles", namespaced: true, compare: sameFields("rules")},
	{gvk: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, resource: "rolebindings", namespaced: true, compare: sameFields("roleRef", "subjects")},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Service"}, resource: "services", namespaced: true, compare: sameSpec("selector", "ports")},
	{gvk: schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}, resource: "networkpolicies", namespaced: true, generation: true},
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, resource: "deployments", namespaced: true, generation: true},
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, resource: "daemonsets", namespaced: true, generation: true},
	{gvk: schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, resource: "poddisruptionbudgets", namespaced: true, generation: true},
	{gvk: schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}, resource: "apiservices", compare: sameSpec("service", "group", "version", "groupPriorityMinimum", "versionPriority", "caBundle", "insecureSkipTLSVerify")},
	{gvk: schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}, resource: "validatingadmissionpolicies", generation: true},
	{gvk: schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"}, resource: "validatingadmissionpolicybindings", generation: true},
	{gvk: schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}, resource: "validatingwebhookconfigurations", compare: sameFields("webhooks")},
	{gvk: schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"}, resource: "mutatingwebhookconfigurations", compare: sameFields("webhooks")},
	{gvk: ServiceMonitorGVK, resource: "servicemonitors", namespaced: true, compare: sameFields("spec"), monitoring: true},
	{gvk: PrometheusRuleGVK, resource: "prometheusrules", namespaced: true, compare: sameFields("spec"), monitoring: true},
}

func kindFor(gvk schema.GroupVersionKind) (*kind, error) {
	for i := range kinds {
		if kinds[i].gvk == gvk {
			return &kinds[i], nil
		}
	}
	return nil, fmt.Errorf("installstrategy: unknown kind %s", gvk)
}

func (k *kind) client(c dynamic.Interface, namespace string) dynamic.ResourceInterface {
	r := c.Resource(k.gvk.GroupVersion().WithResource(k.resource))
	if k.namespaced {
		return r.Namespace(namespace)
	}
	return r
}

// listManaged lists the objects of kind k that carry ManagedSelector:
// cluster-wide for a cluster-scoped kind; for a namespaced kind in the
// installation's namespace and in each other namespace where s puts
// objects of that kind (kube-system for RoleBindings), so the operator
// needs no cluster-wide read of Secrets, ConfigMaps or workloads (see
// OperatorRules). A kind the server does not serve lists nothing.
func listManaged(ctx context.Context, c dynamic.Interface, k *kind, s *Strategy) ([]unstructured.Unstructured, error) {
	namespaces := []string{metav1.NamespaceAll}
	if k.namespaced {
		namespaces = []string{s.Config.Namespace}
		for _, obj := range s.Objects() {
			if obj.GetObjectKind().GroupVersionKind() == k.gvk && !slices.Contains(namespaces, obj.GetNamespace()) {
				namespaces = append(namespaces, obj.GetNamespace())
			}
		}
	}
	var out []unstructured.Unstructured
	for _, ns := range namespaces {
		list, err := k.client(c, ns).List(ctx, metav1.ListOptions{LabelSelector: ManagedSelector})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

// ManagedSelector selects the objects an installation of vmkit consists of.
var ManagedSelector = v1.ManagedByLabel + "=" + v1.ManagedByLabelOperatorValue + "," + v1.AppLabel

// ApplyOptions tune Apply. The zero value applies for real and prunes.
type ApplyOptions struct {
	// DryRun sends every write as a server-side dry run (dryRun=All):
	// the API server validates and admits each object but stores nothing.
	DryRun bool
	// KeepOrphans turns off pruning of objects that carry vmkit's labels
	// but are not in the strategy.
	KeepOrphans bool
	// CRDTimeout bounds the wait for each CRD to be Established (default 60s).
	CRDTimeout time.Duration
	// CABundle (PEM) is written into spec.caBundle of every APIService of
	// the strategy (and into clientConfig.caBundle of each webhook of its
	// validating and mutating webhook configurations): the CA that signed virt-api's serving certificate
	// (Certificates.CABundle, from EnsureCertificates), which the
	// aggregator verifies virt-api against. A strategy is pure and holds
	// no random certificate, so its APIServices carry none; the operator
	// passes the bundle here on every Apply, and a rotated CA rewrites the
	// APIService. Without it the APIService is written without a CA and
	// the aggregator cannot reach virt-api (TLS verification is never
	// skipped).
	CABundle []byte
	// Monitoring says that the cluster serves the Prometheus Operator's
	// ServiceMonitor and PrometheusRule (MonitoringServed): Apply writes
	// the strategy's and prunes vmkit's. Without it Apply leaves those
	// kinds alone and lists the strategy's in Result.Skipped.
	Monitoring bool
}

// Result says what Apply or Delete did, each object as "Kind namespace/name".
type Result struct {
	Created, Updated, Unchanged, Deleted []string
	// Skipped are the objects of kinds the cluster does not serve
	// (ApplyOptions.Monitoring false), which Apply did not write.
	Skipped []string
	// Remaining are objects Delete found still present (being deleted).
	Remaining []string
}

// Writes is the number of objects created, updated or deleted.
func (r *Result) Writes() int { return len(r.Created) + len(r.Updated) + len(r.Deleted) }

// Apply makes the cluster hold the strategy. It reads each object and writes
// it only when it is missing, the strategy's version of it changed (its
// hash annotation differs), someone else changed its spec (its generation
// moved) or, for RBAC, Services, priority classes and APIServices, the
// fields that matter differ (for APIServices these include the caBundle,
// which Apply sets from opts.CABundle); applying the same strategy twice
// writes nothing. CRDs are written first and Apply waits until each is
// Established; the APIService comes after the workloads. Objects carrying
// vmkit's labels (ManagedSelector) that the strategy does not hold are
// deleted, except CRDs, whose deletion would delete every object of their
// kind.
func Apply(ctx context.Context, c dynamic.Interface, s *Strategy, opts ApplyOptions) (Result, error) {
	var res Result
	if opts.CRDTimeout <= 0 {
		opts.CRDTimeout = time.Minute
	}
	want := map[string]bool{}
	for _, obj := range s.Objects() {
		if a, ok := obj.(*apiregv1.APIService); ok && len(opts.CABundle) > 0 {
			a = a.DeepCopy() // the strategy stays as generated
			a.Spec.CABundle = opts.CABundle
			obj = a
		}
		if w, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok && len(opts.CABundle) > 0 {
			w = w.DeepCopy()
			for i := range w.Webhooks {
				w.Webhooks[i].ClientConfig.CABundle = opts.CABundle
			}
			obj = w
		}
		if w, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok && len(opts.CABundle) > 0 {
			w = w.DeepCopy()
			for i := range w.Webhooks {
				w.Webhooks[i].ClientConfig.CABundle = opts.CABundle
			}
			obj = w
		}
		name := describe(obj)
		want[name] = true
		k, err := kindFor(obj.GetObjectKind().GroupVersionKind())
		if err != nil {
			return res, err
		}
		if k.monitoring && !opts.Monitoring {
			res.Skipped = append(res.Skipped, name)
			continue
		}
		action, err := applyOne(ctx, c, k, obj, opts)
		if err != nil {
			return res, fmt.Errorf("installstrategy: applying %s: %w", name, err)
		}
		switch action {
		case created:
			res.Created = append(res.Created, name)
		case updated:
			res.Updated = append(res.Updated, name)
		default:
			res.Unchanged = append(res.Unchanged, name)
		}
		if k.resource == "customresourcedefinitions" && !opts.DryRun {
			if err := waitEstablished(ctx, k.client(c, ""), obj.GetName(), opts.CRDTimeout); err != nil {
				return res, fmt.Errorf("installstrategy: %s: %w", name, err)
			}
		}
	}
	if opts.KeepOrphans {
		return res, nil
	}
	for i := len(kinds) - 1; i > 0; i-- { // kinds[0], CRDs, are never pruned
		k := &kinds[i]
		if k.monitoring && !opts.Monitoring {
			continue
		}
		items, err := listManaged(ctx, c, k, s)
		if err != nil {
			return res, fmt.Errorf("installstrategy: listing %s to prune: %w", k.resource, err)
		}
		for _, item := range items {
			name := describeUnstructured(k, &item)
			if want[name] || item.GetDeletionTimestamp() != nil {
				continue
			}
			klog.FromContext(ctx).V(2).Info("pruning object no longer in the strategy", "object", name)
			err := k.client(c, item.GetNamespace()).Delete(ctx, item.GetName(), deleteOptions(opts.DryRun, item.GetUID()))
			if err != nil && !apierrors.IsNotFound(err) {
				return res, fmt.Errorf("installstrategy: pruning %s: %w", name, err)
			}
			res.Deleted = append(res.Deleted, name)
		}
	}
	return res, nil
}

type action int

const (
	unchanged action = iota
	created
	updated
)

func applyOne(ctx context.Context, c dynamic.Interface, k *kind, obj Object, opts ApplyOptions) (action, error) {
	desired, err := toUnstructured(obj)
	if err != nil {
		return unchanged, err
	}
	var dryRun []string
	if opts.DryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	client := k.client(c, obj.GetNamespace())
	live, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if k.generation {
			setAnnotation(desired, GenerationAnnotation, "1")
		}
		out, err := client.Create(ctx, desired, metav1.CreateOptions{DryRun: dryRun, FieldManager: fieldManager})
		if err != nil {
			return unchanged, err
		}
		return created, fixGeneration(ctx, client, k, out, opts.DryRun)
	}
	if err != nil {
		return unchanged, err
	}
	if upToDate(k, desired, live) {
		return unchanged, nil
	}
	merged := desired.DeepCopy()
	merged.SetResourceVersion(live.GetResourceVersion())
	merged.SetLabels(mergeMaps(live.GetLabels(), desired.GetLabels()))
	merged.SetAnnotations(mergeMaps(live.GetAnnotations(), desired.GetAnnotations()))
	if k.generation {
		setAnnotation(merged, GenerationAnnotation, strconv.FormatInt(live.GetGeneration()+1, 10))
	}
	if k.resource == "services" {
		// The cluster IPs are allocated by the API server and immutable.
		for _, field := range []string{"clusterIP", "clusterIPs"} {
			if v, ok, _ := unstructured.NestedFieldNoCopy(live.Object, "spec", field); ok {
				_ = unstructured.SetNestedField(merged.Object, runtime.DeepCopyJSONValue(v), "spec", field)
			}
		}
	}
	out, err := client.Update(ctx, merged, metav1.UpdateOptions{DryRun: dryRun, FieldManager: fieldManager})
	if err != nil {
		return unchanged, err
	}
	return updated, fixGeneration(ctx, client, k, out, opts.DryRun)
}

const fieldManager = "virt-operator"

// fixGeneration records the generation a write produced when Apply's
// prediction of it was wrong (a write that changed only metadata).
func fixGeneration(ctx context.Context, client dynamic.ResourceInterface, k *kind, out *unstructured.Unstructured, dryRun bool) error {
	if !k.generation || dryRun {
		return nil
	}
	gen := strconv.FormatInt(out.GetGeneration(), 10)
	if out.GetAnnotations()[GenerationAnnotation] == gen {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": out.GetResourceVersion(),
		"annotations":     map[string]string{GenerationAnnotation: gen},
	}})
	if err != nil {
		return err
	}
	_, err = client.Patch(ctx, out.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}

// upToDate reports whether live needs no write to hold desired.
func upToDate(k *kind, desired, live *unstructured.Unstructured) bool {
	if live.GetDeletionTimestamp() != nil {
		return true // nothing to do until it is gone; the next Apply recreates it
	}
	la := live.GetAnnotations()
	if la[HashAnnotation] != desired.GetAnnotations()[HashAnnotation] {
		return false
	}
	ll := live.GetLabels()
	for key, v := range desired.GetLabels() {
		if ll[key] != v {
			return false
		}
	}
	if k.generation && la[GenerationAnnotation] != strconv.FormatInt(live.GetGeneration(), 10) {
		return false
	}
	return k.compare == nil || k.compare(desired.Object, live.Object)
}

// sameFields compares top-level fields.
func sameFields(fields ...string) func(desired, live map[string]any) bool {
	return func(desired, live map[string]any) bool {
		for _, f := range fields {
			if !equality.Semantic.DeepEqual(desired[f], live[f]) {
				return false
			}
		}
		return true
	}
}

// sameSpec compares fields of spec that the API server does not default.
func sameSpec(fields ...string) func(desired, live map[string]any) bool {
	return func(desired, live map[string]any) bool {
		d, _ := desired["spec"].(map[string]any)
		l, _ := live["spec"].(map[string]any)
		for _, f := range fields {
			if !subset(d[f], l[f]) {
				return false
			}
		}
		return true
	}
}

// subset reports whether every value set in want is in got (lists element
// by element), so fields the API server defaults in got do not count.
func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		for key, v := range w {
			if !subset(v, g[key]) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return len(w) == 0 && got == nil
		}
		for i := range w {
			if !subset(w[i], g[i]) {
				return false
			}
		}
		return true
	default:
		return equality.Semantic.DeepEqual(want, got)
	}
}

// toUnstructured converts obj and stamps it with HashAnnotation.
func toUnstructured(obj Object) (*unstructured.Unstructured, error) {
	var u *unstructured.Unstructured
	if in, ok := obj.(*unstructured.Unstructured); ok {
		u = in.DeepCopy() // the strategy's own object stays as generated
	} else {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		u = &unstructured.Unstructured{Object: m}
	}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	setAnnotation(u, HashAnnotation, hex.EncodeToString(sum[:])[:16])
	return u, nil
}

func setAnnotation(u *unstructured.Unstructured, key, value string) {
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	u.SetAnnotations(a)
}

func describeUnstructured(k *kind, u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return k.gvk.Kind + " " + u.GetNamespace() + "/" + u.GetName()
	}
	return k.gvk.Kind + " " + u.GetName()
}

func deleteOptions(dryRun bool, uid types.UID) metav1.DeleteOptions {
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return opts
}

func waitEstablished(ctx context.Context, client dynamic.ResourceInterface, name string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		crd, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			cond, _ := c.(map[string]any)
			if cond["type"] == "Established" && cond["status"] == "True" {
				return true, nil
			}
		}
		last = "condition Established is not True"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("not established after %v (%s): %w", timeout, last, err)
	}
	return nil
}

// ErrWorkloadsExist is returned by Delete when the uninstall strategy is
// BlockUninstallIfWorkloadsExist and VMs or VMIs exist.
var ErrWorkloadsExist = errors.New("virtual machines exist and the uninstall strategy is BlockUninstallIfWorkloadsExist")

// DeleteOptions tune Delete.
type DeleteOptions struct {
	// UninstallStrategy decides what happens to VMs and VMIs; the
	// strategy's PropertyUninstallStrategy, else
	// BlockUninstallIfWorkloadsExist, when empty.
	UninstallStrategy v1.KubeVirtUninstallStrategy
}

var (
	vmResource  = v1.SchemeGroupVersion.WithResource("virtualmachines")
	vmiResource = v1.SchemeGroupVersion.WithResource("virtualmachineinstances")
)

// Delete removes everything the strategy installed (its objects and any
// object carrying vmkit's labels), CRDs last, after every other object is
// gone. Deletion is asynchronous: Result.Remaining lists the objects still
// present; call Delete again until it is empty. With the uninstall strategy
// BlockUninstallIfWorkloadsExist, Delete removes nothing and returns
// ErrWorkloadsExist while VMs or VMIs exist; with RemoveWorkloads it deletes
// them and drops vmkit's finalizers from VMIs, whose controllers are being removed.
func Delete(ctx context.Context, c dynamic.Interface, s *Strategy, opts DeleteOptions) (Result, error) {
	var res Result
	strategy := opts.UninstallStrategy
	if strategy == "" {
		strategy = v1.KubeVirtUninstallStrategy(s.Config.property(PropertyUninstallStrategy))
	}
	if strategy == "" {
		strategy = v1.KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist
	}
	if err := removeWorkloads(ctx, c, strategy); err != nil {
		return res, err
	}
	byKind := map[*kind][]string{} // namespace/name of every object to delete
	for _, obj := range s.Objects() {
		k, err := kindFor(obj.GetObjectKind().GroupVersionKind())
		if err != nil {
			return res, err
		}
		byKind[k] = append(byKind[k], obj.GetNamespace()+"/"+obj.GetName())
	}
	for i := len(kinds) - 1; i >= 0; i-- {
		k := &kinds[i]
		if i == 0 && len(res.Remaining) > 0 {
			break // CRDs go only after everything else
		}
		items, err := listManaged(ctx, c, k, s)
		if err != nil {
			return res, fmt.Errorf("installstrategy: listing %s to delete: %w", k.resource, err)
		}
		keys := slices.Clone(byKind[k])
		for _, item := range items {
			keys = append(keys, item.GetNamespace()+"/"+item.GetName())
		}
		slices.Sort(keys)
		for _, key := range slices.Compact(keys) {
			ns, name, _ := splitKey(key)
			name2 := describeUnstructured(k, namedUnstructured(ns, name))
			client := k.client(c, ns)
			live, err := client.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return res, fmt.Errorf("installstrategy: deleting %s: %w", name2, err)
			}
			if live.GetDeletionTimestamp() == nil && i == 0 && !crdServes(ctx, c, live) {
				// Deleted while its storage is (re)initializing (right
				// after an update, e.g. an upgrade's Apply), a CRD's
				// finalizer fails to list the custom resources and backs
				// off for minutes; delete it once it serves again.
				res.Remaining = append(res.Remaining, name2)
				continue
			}
			if live.GetDeletionTimestamp() == nil {
				err := client.Delete(ctx, name, deleteOptions(false, live.GetUID()))
				if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
					continue
				}
				if err != nil {
					return res, fmt.Errorf("installstrategy: deleting %s: %w", name2, err)
				}
				res.Deleted = append(res.Deleted, name2)
			}
			if i == 0 && live.GetDeletionTimestamp() != nil {
				if err := retryCRDCleanup(ctx, client, live, time.Now()); err != nil {
					return res, fmt.Errorf("installstrategy: deleting %s: %w", name2, err)
				}
			}
			if _, err := client.Get(ctx, name, metav1.GetOptions{}); err == nil {
				res.Remaining = append(res.Remaining, name2)
			} else if !apierrors.IsNotFound(err) {
				return res, fmt.Errorf("installstrategy: deleting %s: %w", name2, err)
			}
		}
	}
	if len(res.Remaining) > 0 && !slices.ContainsFunc(res.Remaining, isCRD) {
		// Other objects are still going; the CRDs were not touched yet.
		for _, key := range byKind[&kinds[0]] {
			_, name, _ := splitKey(key)
			res.Remaining = append(res.Remaining, describeUnstructured(&kinds[0], namedUnstructured("", name)))
		}
	}
	return res, nil
}

// crdServes reports whether the custom resources of crd (a live
// CustomResourceDefinition) can be listed through its first served version.
func crdServes(ctx context.Context, c dynamic.Interface, crd *unstructured.Unstructured) bool {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); !served {
			continue
		}
		name, _ := m["name"].(string)
		_, err := c.Resource(schema.GroupVersionResource{Group: group, Version: name, Resource: plural}).List(ctx, metav1.ListOptions{Limit: 1})
		// Not allowed to list (the operator may not read every kind it
		// installs) or not served at all: nothing to wait for.
		return err == nil || apierrors.IsForbidden(err) || apierrors.IsNotFound(err)
	}
	return true // nothing served: nothing for the finalizer to list
}

// retryCRDCleanup makes the API server retry now the removal of the custom
// resources of crd (a live CustomResourceDefinition being deleted) when its
// last attempt failed, for instance because the CRD's storage was
// (re)initializing after an update: it writes CleanupRetryAnnotation, at
// most once every cleanupRetryEvery. A CRD that went meanwhile is no error.
func retryCRDCleanup(ctx context.Context, client dynamic.ResourceInterface, crd *unstructured.Unstructured, now time.Time) error {
	if !instanceDeletionFailed(crd) {
		return nil
	}
	if last, err := time.Parse(time.RFC3339Nano, crd.GetAnnotations()[CleanupRetryAnnotation]); err == nil && now.Sub(last) < cleanupRetryEvery {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": crd.GetResourceVersion(),
		"annotations":     map[string]string{CleanupRetryAnnotation: now.UTC().Format(time.RFC3339Nano)},
	}})
	if err != nil {
		return err
	}
	_, err = client.Patch(ctx, crd.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or changed since it was read: the next pass looks again
	}
	return err
}

// instanceDeletionFailed reports whether crd's Terminating condition says
// the API server failed to delete its custom resources.
func instanceDeletionFailed(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Terminating" && m["status"] == "True" && m["reason"] == "InstanceDeletionFailed" {
			return true
		}
	}
	return false
}

func isCRD(name string) bool {
	return len(name) > len("CustomResourceDefinition ") && name[:len("CustomResourceDefinition ")] == "CustomResourceDefinition "
}

// removeWorkloads applies the uninstall strategy to VMs and VMIs.
func removeWorkloads(ctx context.Context, c dynamic.Interface, strategy v1.KubeVirtUninstallStrategy) error {
	var found []string
	for _, gvr := range []schema.GroupVersionResource{vmResource, vmiResource} {
		list, err := c.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue // the CRD is gone already
		}
		if err != nil {
			return fmt.Errorf("installstrategy: listing %s: %w", gvr.Resource, err)
		}
		for _, item := range list.Items {
			key := gvr.Resource + " " + item.GetNamespace() + "/" + item.GetName()
			found = append(found, key)
			if strategy != v1.KubeVirtUninstallStrategyRemoveWorkloads {
				continue
			}
			client := c.Resource(gvr).Namespace(item.GetNamespace())
			if gvr == vmiResource {
				if err := dropFinalizers(ctx, client, &item); err != nil {
					return fmt.Errorf("installstrategy: removing finalizers of %s: %w", key, err)
				}
			}
			if item.GetDeletionTimestamp() == nil {
				if err := client.Delete(ctx, item.GetName(), deleteOptions(false, item.GetUID())); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("installstrategy: deleting %s: %w", key, err)
				}
			}
		}
	}
	if len(found) > 0 && strategy != v1.KubeVirtUninstallStrategyRemoveWorkloads {
		return fmt.Errorf("installstrategy: %w: %v", ErrWorkloadsExist, found)
	}
	return nil
}

func dropFinalizers(ctx context.Context, client dynamic.ResourceInterface, vmi *unstructured.Unstructured) error {
	ours := []string{v1.VirtualMachineInstanceFinalizer, v1.VirtualMachineControllerFinalizer}
	var keep []string
	for _, f := range vmi.GetFinalizers() {
		if !slices.Contains(ours, f) {
			keep = append(keep, f)
		}
	}
	if len(keep) == len(vmi.GetFinalizers()) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": vmi.GetResourceVersion(), "finalizers": keep}})
	if err != nil {
		return err
	}
	_, err = client.Patch(ctx, vmi.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func splitKey(key string) (namespace, name string, ok bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return "", key, false
}

func namedUnstructured(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}
