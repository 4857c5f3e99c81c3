package installstrategy

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// tenantNamespace is where the admission tests' tenant may manage VMs.
const tenantNamespace = "tenant"

// TestAdmissionAgainstAPIServer: with the strategy applied and no virt-api
// running, what the API server itself refuses or lets through, for a
// tenant (a user bound to kubevirt.io:admin in their namespace) and for
// vmkit's components' service accounts, impersonated.
func TestAdmissionAgainstAPIServer(t *testing.T) {
	c := startCluster(t)
	ctx := ctxFor(t)
	kube := c.env.Kube
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, c.dyn, s, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, namespaceObject(tenantNamespace), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(tenantNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AdminClusterRoleName},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	as := clientsFor(c.env.Config, s.Config.Namespace)

	// virt-api's webhooks refuse every VMI create while virt-api is down:
	// out of the way for the VMI policies' tests (Apply puts them back).
	for _, err := range []error{
		kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, ValidatingWebhookName, metav1.DeleteOptions{}),
		kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, MutatingWebhookName, metav1.DeleteOptions{}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The API server drops deleted webhooks and loads new policies when its
	// informers see them: wait until a dry-run create of a VMI reaches the
	// policy.
	waitForPolicy(t, ctx, "a tenant's VMI with a status", func() error {
		_, err := as.tenant.vmis().Create(ctx, vmiObject("probe", nil, map[string]any{"phase": "Running"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})

	t.Run("a tenant's VMI has no status or reserved label of its own", func(t *testing.T) {
		testVMICreatePolicy(t, ctx, as)
	})
	t.Run("virt-handler changes only its own node's Node and VMIs", func(t *testing.T) {
		testHandlerNodeRestriction(t, ctx, kube, as)
	})
	t.Run("with virt-api down, components and metadata-only updates pass its webhooks", func(t *testing.T) {
		testTemplateWebhooksWithoutVirtAPI(t, ctx, kube, as, func() {
			// virt-api's webhooks come back; virt-api runs nowhere.
			if _, err := Apply(ctx, c.dyn, s, ApplyOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// impersonated are dynamic clients acting as a tenant and as vmkit's components.
type impersonated struct {
	// namespace is the installation's.
	namespace          string
	admin              *rest.Config
	tenant, controller client
	// handler returns virt-handler's client, its token naming the node
	// (authentication.kubernetes.io/node-name) unless node is empty.
	handler func(node string) client
}

type client struct {
	dynamic.Interface
	config *rest.Config
}

func (c client) vmis() dynamic.ResourceInterface {
	return c.Resource(vmiResource).Namespace(tenantNamespace)
}

func (c client) vms() dynamic.ResourceInterface {
	return c.Resource(vmResource).Namespace(tenantNamespace)
}

func (c client) replicaSets() dynamic.ResourceInterface {
	return c.Resource(v1.SchemeGroupVersion.WithResource("virtualmachineinstancereplicasets")).Namespace(tenantNamespace)
}

func clientsFor(admin *rest.Config, namespace string) impersonated {
	as := func(user string, groups []string, extra map[string][]string) client {
		cfg := rest.CopyConfig(admin)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups, Extra: extra}
		return client{dynamic.NewForConfigOrDie(cfg), cfg}
	}
	component := func(sa string) client {
		return as(serviceAccountUser(namespace, sa), nil, nil)
	}
	return impersonated{
		namespace:  namespace,
		admin:      admin,
		tenant:     as("alice", []string{"system:authenticated"}, nil),
		controller: component(ControllerServiceAccount),
		handler: func(node string) client {
			var extra map[string][]string
			if node != "" {
				extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
			}
			return as(serviceAccountUser(namespace, HandlerServiceAccount), nil, extra)
		},
	}
}

// waitForPolicy retries a request that an admission policy refuses until
// it is refused (Forbidden), for up to 30 seconds: the API server loads
// new policies asynchronously.
func waitForPolicy(t *testing.T, ctx context.Context, what string, request func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = request(); apierrors.IsForbidden(err) {
			return
		}
	}
	t.Fatalf("%s: %v after 30 s, want Forbidden by an admission policy", what, err)
}

// wantRefused fails unless err is Forbidden with a message holding each of want.
func wantRefused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v, want a message naming %q", what, err, w)
		}
	}
}

func namespaceObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// vmiObject is a minimal VMI in the tenant's namespace with labels and,
// unless nil, status exactly as given.
func vmiObject(name string, labels map[string]string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": name, "namespace": tenantNamespace},
		"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{}, "resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}}}},
	}}
	u.SetLabels(labels)
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// mergePatch sends a JSON merge patch.
func mergePatch(ctx context.Context, r dynamic.ResourceInterface, name, patch string) error {
	_, err := r.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// testVMICreatePolicy: a tenant cannot create a VMI with a status (a
// forged status.migrationState would steer the node agents) or with one of
// KubeVirt's reserved labels, nor set, change or remove those labels
// later; status: {} (KubeVirt's examples) and a typed client's empty
// status are accepted, and so are the other kubevirt.io/ labels. vmkit's
// controller may create what the tenant may not.
func testVMICreatePolicy(t *testing.T, ctx context.Context, as impersonated) {
	forged := map[string]any{"migrationState": map[string]any{
		"sourceNode": "node-a", "targetNode": "node-b", "targetNodeAddress": "10.0.0.66",
		"targetDirectMigrationNodePorts": map[string]any{"8186": int64(0)}, "migrationUid": "forged",
	}}
	for _, tt := range []struct {
		name   string
		status map[string]any
		want   []string
	}{
		{"a forged migration state", forged, []string{"status.migrationState of a VirtualMachineInstance is written by KubeVirt's components", "a user may not set it at creation"}},
		{"a phase and a node", map[string]any{"phase": "Running", "nodeName": "node-a"}, []string{"status.phase", "status.nodeName", "of a VirtualMachineInstance is written by KubeVirt's components"}},
		{"an empty object beside a set field", map[string]any{"guestOSInfo": map[string]any{}, "interfaces": []any{map[string]any{"ipAddress": "127.0.0.1"}}}, []string{"status.interfaces of"}},
	} {
		_, err := as.tenant.vmis().Create(ctx, vmiObject("forged", nil, tt.status), metav1.CreateOptions{})
		wantRefused(t, "a tenant's VMI with "+tt.name, err, tt.want...)
	}

	// An empty status, as sent by kubectl from KubeVirt's examples and by
	// a typed client, is no status.
	empty, err := as.tenant.vmis().Create(ctx, vmiObject("empty-status", nil, map[string]any{}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a tenant's VMI with status: {}: %v, want it created", err)
	}
	if status, ok := empty.Object["status"]; ok && len(status.(map[string]any)) != 0 {
		t.Errorf("status stored as %v, want empty", status)
	}
	typed := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "typed", Labels: map[string]string{"kubevirt.io/vm": "typed", "kubevirt.io/domain": "typed"}}}
	typed.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	if _, err := versioned.NewForConfigOrDie(as.tenant.config).KubevirtV1().VirtualMachineInstances(tenantNamespace).Create(ctx, typed, metav1.CreateOptions{}); err != nil {
		t.Errorf("a tenant's VMI from a typed client, labelled kubevirt.io/vm and kubevirt.io/domain: %v, want it created", err)
	}

	reserved := []string{v1.CreatedByLabel, v1.MigrationJobLabel, v1.NodeNameLabel, v1.MigrationTargetNodeNameLabel, v1.NodeSchedulable, v1.InstallStrategyLabel}
	for _, label := range reserved {
		_, err := as.tenant.vmis().Create(ctx, vmiObject("labelled", map[string]string{label: "node-a"}, nil), metav1.CreateOptions{})
		wantRefused(t, "a tenant's VMI labelled "+label, err, "metadata.labels["+label+"] of a VirtualMachineInstance is reserved to KubeVirt's components", "a user may not set")
	}

	// The controller creates VMIs with these labels (and writes status).
	if _, err := as.controller.vmis().Create(ctx, vmiObject("placed", map[string]string{v1.NodeNameLabel: "node-a", v1.CreatedByLabel: "uid"}, map[string]any{"phase": "Scheduled", "nodeName": "node-a"}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the controller's VMI with status and reserved labels: %v, want it created", err)
	}
	for _, tt := range []struct{ what, patch, label string }{
		{"set", `{"metadata":{"labels":{"` + v1.MigrationTargetNodeNameLabel + `":"node-b"}}}`, v1.MigrationTargetNodeNameLabel},
		{"change", `{"metadata":{"labels":{"` + v1.NodeNameLabel + `":"node-b"}}}`, v1.NodeNameLabel},
		{"remove", `{"metadata":{"labels":{"` + v1.CreatedByLabel + `":null}}}`, v1.CreatedByLabel},
	} {
		wantRefused(t, "a tenant's update to "+tt.what+" "+tt.label, mergePatch(ctx, as.tenant.vmis(), "placed", tt.patch),
			"metadata.labels["+tt.label+"]", "a user may not set, change or remove it")
	}
	if err := mergePatch(ctx, as.tenant.vmis(), "placed", `{"metadata":{"labels":{"team":"blue","kubevirt.io/vm":"placed"}}}`); err != nil {
		t.Errorf("a tenant's label change beside the reserved labels: %v, want it allowed", err)
	}
	wantRefused(t, "a tenant's status change", mergePatch(ctx, as.tenant.vmis(), "placed", `{"status":{"phase":"Running"}}`),
		"status of a VirtualMachineInstance is written by KubeVirt's components", "a user may not change it")
}

// testHandlerNodeRestriction: virt-handler's service account, its token
// naming node-a, may write its heartbeat on Node node-a as the agent does
// (kubevirt.io/ labels and annotations) and update the VMIs on node-a or
// migrating to it, and nothing else: not Node node-b, not node-a's other
// labels, annotations, spec or metadata, not a VMI on node-b, not a VMI's
// migration target. A token naming no node may change neither.
func testHandlerNodeRestriction(t *testing.T, ctx context.Context, kube kubernetes.Interface, as impersonated) {
	for _, name := range []string{"node-a", "node-b"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": "z1"}, Annotations: map[string]string{"owner": "ops"}}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodes := func(c client) dynamic.ResourceInterface {
		return c.Resource(corev1.SchemeGroupVersion.WithResource("nodes"))
	}
	handlerA, anonymous := as.handler("node-a"), as.handler("")
	// The agent's heartbeat (nodeagent/heartbeat.go: patchNode).
	heartbeat := `{"metadata":{"labels":{"` + v1.NodeSchedulable + `":"true","` + v1.CPUManager + `":"true","` + v1.DeprecatedCPUManager + `":"true"},` +
		`"annotations":{"` + v1.VirtHandlerHeartbeat + `":"2026-11-28T00:00:00Z"}}}`
	waitForPolicy(t, ctx, "virt-handler of node-a patching Node node-b", func() error {
		_, err := nodes(handlerA).Patch(ctx, "node-b", types.MergePatchType, []byte(heartbeat), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
	if err := mergePatch(ctx, nodes(handlerA), "node-a", heartbeat); err != nil {
		t.Errorf("virt-handler's heartbeat on its own Node: %v, want it allowed", err)
	}
	// The token the kubelet gets for virt-handler's pod names the pod's
	// node: what the policies rely on.
	podToken := boundToken(t, ctx, kube, as, "node-a")
	if err := mergePatch(ctx, nodes(podToken), "node-a", heartbeat); err != nil {
		t.Errorf("virt-handler's heartbeat with its pod's token on its own Node: %v, want it allowed", err)
	}
	wantRefused(t, "virt-handler's pod token on another Node", mergePatch(ctx, nodes(podToken), "node-b", heartbeat), "virt-handler of node node-a may not change Node node-b")
	for _, tt := range []struct{ what, node, patch string }{
		{"the heartbeat on another Node", "node-b", heartbeat},
		{"a label outside kubevirt.io/", "node-a", `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`},
		{"another component's label", "node-a", `{"metadata":{"labels":{"topology.kubernetes.io/zone":"z2"}}}`},
		{"removing a label", "node-a", `{"metadata":{"labels":{"topology.kubernetes.io/zone":null}}}`},
		{"an annotation outside kubevirt.io/", "node-a", `{"metadata":{"annotations":{"owner":"me"}}}`},
		{"a look-alike label", "node-a", `{"metadata":{"labels":{"evil.kubevirt.io/x":"1"}}}`},
		{"a look-alike of cpumanager", "node-a", `{"metadata":{"labels":{"cpumanager.example.com/x":"1"}}}`},
		{"cpumanager as an annotation", "node-a", `{"metadata":{"annotations":{"cpumanager":"true"}}}`},
		{"a taint", "node-a", `{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`},
		{"unschedulable", "node-a", `{"spec":{"unschedulable":true}}`},
		{"a finalizer", "node-a", `{"metadata":{"finalizers":["example.com/hold"]}}`},
	} {
		wantRefused(t, "virt-handler of node-a setting "+tt.what+" on Node "+tt.node, mergePatch(ctx, nodes(handlerA), tt.node, tt.patch))
	}
	err := mergePatch(ctx, nodes(handlerA), "node-b", heartbeat)
	wantRefused(t, "virt-handler of node-a on Node node-b", err, "virt-handler of node node-a may not change Node node-b")
	err = mergePatch(ctx, nodes(handlerA), "node-a", `{"metadata":{"labels":{"topology.kubernetes.io/zone":"z2"}}}`)
	wantRefused(t, "virt-handler changing another label", err, "metadata.labels[topology.kubernetes.io/zone] of Node node-a", "only kubevirt.io/ labels and cpumanager")
	err = mergePatch(ctx, nodes(anonymous), "node-a", heartbeat)
	wantRefused(t, "virt-handler without a node name on its Node", err, "virt-handler's credentials name no node ("+nodeNameExtra+")")

	// VMIs as virt-controller placed them: one on each node, one on node-b
	// migrating to node-a.
	for _, vmi := range []struct {
		name   string
		status map[string]any
	}{
		{"on-a", map[string]any{"phase": "Running", "nodeName": "node-a"}},
		{"on-b", map[string]any{"phase": "Running", "nodeName": "node-b"}},
		{"to-a", map[string]any{"phase": "Running", "nodeName": "node-b", "migrationState": map[string]any{"sourceNode": "node-b", "targetNode": "node-a", "migrationUid": "m1"}}},
	} {
		if _, err := as.controller.vmis().Create(ctx, vmiObject(vmi.name, nil, vmi.status), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitForPolicy(t, ctx, "virt-handler of node-a updating a VMI on node-b", func() error {
		_, err := handlerA.vmis().Patch(ctx, "on-b", types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
	if err := mergePatch(ctx, handlerA.vmis(), "on-a", `{"status":{"phase":"Succeeded"}}`); err != nil {
		t.Errorf("virt-handler of node-a writing the status of a VMI on node-a: %v, want it allowed", err)
	}
	// The migration target's agent takes the VMI over (nodeagent/livemigration: finishTarget).
	if err := mergePatch(ctx, handlerA.vmis(), "to-a", `{"metadata":{"labels":{"`+v1.NodeNameLabel+`":"node-a"}},"status":{"nodeName":"node-a","migrationState":{"targetNodeDomainDetected":true}}}`); err != nil {
		t.Errorf("virt-handler of node-a taking over a VMI migrating to node-a: %v, want it allowed", err)
	}
	err = mergePatch(ctx, handlerA.vmis(), "on-b", `{"status":{"phase":"Failed"}}`)
	wantRefused(t, "virt-handler of node-a on a VMI on node-b", err, "virt-handler of node node-a may change only the VirtualMachineInstances on its node", "not one on node 'node-b'")
	err = mergePatch(ctx, handlerA.vmis(), "on-b", `{"status":{"migrationState":{"targetNode":"node-a"}}}`)
	wantRefused(t, "virt-handler of node-a making itself the target of a VMI on node-b", err, "may change only the VirtualMachineInstances on its node")
	err = mergePatch(ctx, handlerA.vmis(), "on-a", `{"status":{"migrationState":{"sourceNode":"node-a","targetNode":"node-b","targetNodeAddress":"10.0.0.66"}}}`)
	wantRefused(t, "virt-handler of node-a setting a migration target", err, "status.migrationState.targetNode of a VirtualMachineInstance is chosen by virt-controller")
	err = mergePatch(ctx, anonymous.vmis(), "on-a", `{"status":{"phase":"Failed"}}`)
	wantRefused(t, "virt-handler without a node name on a VMI", err, "virt-handler's credentials name no node")
	// The controller stays free to place and migrate VMIs.
	if err := mergePatch(ctx, as.controller.vmis(), "on-b", `{"status":{"migrationState":{"sourceNode":"node-b","targetNode":"node-a"}}}`); err != nil {
		t.Errorf("virt-controller choosing a migration target: %v, want it allowed", err)
	}
}

// boundToken is a client with the token of virt-handler's service account
// bound to a virt-handler pod on node, as the kubelet requests for the
// pod's projected token (the pod only exists: no kubelet runs here).
func boundToken(t *testing.T, ctx context.Context, kube kubernetes.Interface, as impersonated, node string) client {
	t.Helper()
	pod, err := kube.CoreV1().Pods(as.namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-handler-" + node},
		Spec: corev1.PodSpec{
			ServiceAccountName: HandlerServiceAccount,
			NodeName:           node,
			Containers:         []corev1.Container{{Name: v1.VirtHandlerValue, Image: "virt-handler"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token, err := kube.CoreV1().ServiceAccounts(as.namespace).CreateToken(ctx, HandlerServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(as.admin)
	cfg.BearerToken = token.Status.Token
	return client{dynamic.NewForConfigOrDie(cfg), cfg}
}

// testTemplateWebhooksWithoutVirtAPI: virt-api's VM and replica set
// webhooks (failurePolicy Fail) are not called for vmkit's components nor
// for updates that leave the spec alone, so with virt-api down the
// controllers still create VMs and a tenant still relabels VMs and replica
// sets; a tenant's create or spec change still meets the webhook (and
// fails while virt-api is down). installWebhooks (Apply) also installs the
// components' PodDisruptionBudgets.
func testTemplateWebhooksWithoutVirtAPI(t *testing.T, ctx context.Context, kube kubernetes.Interface, as impersonated, installWebhooks func()) {
	template := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
		"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{}, "resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}}}},
	}
	vm := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
			"metadata": map[string]any{"name": name, "namespace": tenantNamespace},
			"spec":     map[string]any{"runStrategy": "Halted", "template": template},
		}}
	}
	rs := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceReplicaSet",
			"metadata": map[string]any{"name": name, "namespace": tenantNamespace},
			"spec":     map[string]any{"replicas": int64(0), "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}, "template": template},
		}}
	}
	// The tenant's replica set from before the webhooks came back.
	if _, err := as.tenant.replicaSets().Create(ctx, rs("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	installWebhooks()
	for _, name := range []string{"virt-api-pdb", "virt-controller-pdb"} {
		pdb, err := kube.PolicyV1().PodDisruptionBudgets(as.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("PodDisruptionBudget %s: %v", name, err)
			continue
		}
		if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget %s: minAvailable %v, want 1", name, pdb.Spec.MinAvailable)
		}
	}
	// The API server calls the webhooks once its informer sees them again.
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, err = as.tenant.vms().Create(ctx, vm("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "virtualmachine-validator.kubevirt.io") {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("a tenant's VM with virt-api down: %v, want the webhook virtualmachine-validator.kubevirt.io failing", err)
	}
	_, err = as.tenant.replicaSets().Create(ctx, rs("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "virtualmachinereplicaset-validator.kubevirt.io") {
		t.Errorf("a tenant's replica set with virt-api down: %v, want the webhook virtualmachinereplicaset-validator.kubevirt.io failing", err)
	}

	if _, err := as.controller.vms().Create(ctx, vm("web"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("virt-controller creating a VM with virt-api down: %v, want it created", err)
	}
	for kind, r := range map[string]dynamic.ResourceInterface{"VM": as.tenant.vms(), "replica set": as.tenant.replicaSets()} {
		if err := mergePatch(ctx, r, "web", `{"metadata":{"labels":{"team":"blue"},"annotations":{"note":"x"}}}`); err != nil {
			t.Errorf("a tenant's label change on a %s with virt-api down: %v, want it allowed", kind, err)
		}
		err := mergePatch(ctx, r, "web", `{"spec":{"template":{"metadata":{"labels":{"app":"web","tier":"2"}}}}}`)
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Errorf("a tenant's spec change on a %s with virt-api down: %v, want the webhook failing", kind, err)
		}
	}
}
