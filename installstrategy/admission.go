package installstrategy

import (
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// VMIUpdatePolicyName names the ValidatingAdmissionPolicy (and its
// binding) that keeps a VirtualMachineInstance's spec, status and reserved
// labels to vmkit's components.
const VMIUpdatePolicyName = "kubevirt-vmi-update"

// componentUsers are the user names of vmkit's components' service
// accounts, which the admission policies and webhooks let through.
func componentUsers(c *DeploymentConfig) []string {
	var out []string
	for _, sa := range []string{OperatorServiceAccount, APIServiceAccount, ControllerServiceAccount, HandlerServiceAccount} {
		out = append(out, serviceAccountUser(c.Namespace, sa))
	}
	return out
}

// serviceAccountUser is the user name the API server gives a service account's tokens.
func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// notAComponent is the match condition of a policy or webhook that checks
// users only: it holds for everyone but vmkit's components.
func notAComponent(c *DeploymentConfig) admissionregistrationv1.MatchCondition {
	return admissionregistrationv1.MatchCondition{
		Name:       "not-a-kubevirt-component",
		Expression: "!(request.userInfo.username in " + celList(componentUsers(c)) + ")",
	}
}

// celList is a CEL list literal of the strings, which hold no quote.
func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, item := range items {
		quoted[i] = "'" + item + "'"
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// addAdmissionPolicies adds what the API server itself enforces, without a
// webhook (so also while virt-api is down): ValidatingAdmissionPolicies
// (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30).
//
// VMIUpdatePolicyName keeps a VirtualMachineInstance's spec, status and
// reserved labels to vmkit's service accounts, as KubeVirt's virt-api
// webhooks do: once a VMI exists, the controller, the node agent and the
// launcher act on its spec, and its status and labels tell them where it
// runs and migrates. A user may therefore not change its spec, create it
// with a status (the VMI has no status subresource, so a status sent with
// the object is stored as sent: a forged status.migrationState would steer
// the node agents) or change its status, and may neither set, change nor
// remove KubeVirt's reserved labels (its restrictedVmiLabels) on create or
// update. An empty status, as KubeVirt's examples end with (status: {}),
// or one holding only empty objects, as a typed client sends
// (status: {guestOSInfo: {}}), is no status. Other metadata (other labels,
// kubevirt.io/vm and kubevirt.io/domain included, annotations,
// finalizers, owner references) stays writable, as on KubeVirt.
func (s *Strategy) addAdmissionPolicies(c *DeploymentConfig) {
	reserved := v1.ReservedVMILabels()
	const components = "KubeVirt's components (virt-controller, virt-handler)"
	s.addAdmissionPolicy(c, VMIUpdatePolicyName, admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: vmiRule(admissionregistrationv1.Create, admissionregistrationv1.Update),
		MatchConditions:  []admissionregistrationv1.MatchCondition{notAComponent(c)},
		Variables: []admissionregistrationv1.Variable{
			{Name: "oldLabels", Expression: "oldObject != null && has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"},
			{Name: "newLabels", Expression: "has(object.metadata.labels) ? object.metadata.labels : {}"},
			// The reserved labels this request sets, changes or removes.
			{Name: "reservedLabelsChanged", Expression: celList(reserved) + ".filter(l, (l in variables.newLabels) != (l in variables.oldLabels) || (l in variables.newLabels && variables.newLabels[l] != variables.oldLabels[l]))"},
			// The status fields a create sets: all but empty objects.
			{Name: "statusSet", Expression: "oldObject == null && has(object.status) ? object.status.filter(f, object.status[f] != {}) : []"},
		},
		Validations: []admissionregistrationv1.Validation{{
			Expression: "oldObject == null || object.spec == oldObject.spec",
			Message:    "spec of a VirtualMachineInstance cannot be changed once it exists (only KubeVirt's components may)",
			Reason:     ptr(metav1.StatusReasonForbidden),
		}, {
			Expression:        "size(variables.statusSet) == 0",
			Message:           "status of a VirtualMachineInstance is written by " + components + " only: a user may not set it at creation (create the VMI without status, or with status: {})",
			MessageExpression: `"status." + variables.statusSet.join(", status.") + " of a VirtualMachineInstance is written by ` + components + ` only: a user may not set it at creation (create the VMI without status, or with status: {})"`,
			Reason:            ptr(metav1.StatusReasonForbidden),
		}, {
			Expression: "oldObject == null || (has(object.status) == has(oldObject.status) && (!has(object.status) || object.status == oldObject.status))",
			Message:    "status of a VirtualMachineInstance is written by " + components + " only: a user may not change it",
			Reason:     ptr(metav1.StatusReasonForbidden),
		}, {
			Expression:        "size(variables.reservedLabelsChanged) == 0",
			Message:           "metadata.labels of a VirtualMachineInstance: " + strings.Join(reserved, ", ") + " are reserved to " + components + ": a user may not set, change or remove them",
			MessageExpression: `"metadata.labels[" + variables.reservedLabelsChanged.join("], metadata.labels[") + "] of a VirtualMachineInstance is reserved to ` + components + `: a user may not set, change or remove it"`,
			Reason:            ptr(metav1.StatusReasonForbidden),
		}},
	})
	s.addHandlerPolicies(c)
}

// Names of the admission policies that hold virt-handler to its node.
const (
	// NodeRestrictionPolicyName names (as KubeVirt does) the policy that
	// lets virt-handler change only its own Node, and of it only the
	// kubevirt.io/ labels and annotations.
	NodeRestrictionPolicyName = "kubevirt-node-restriction-policy"
	// HandlerVMIPolicyName names the policy that lets virt-handler change
	// only the VirtualMachineInstances on its node or migrating to it.
	HandlerVMIPolicyName = "kubevirt-handler-vmi-restriction"
)

// nodeNameExtra is the user information a service account token bound to a
// pod carries with the name of the pod's node (ServiceAccountTokenPodNodeInfo,
// on by default since Kubernetes 1.30).
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// addHandlerPolicies adds what KubeVirt's node restriction does (its
// kubevirt-node-restriction-policy and the NodeRestriction branch of its
// VMI update webhook): virt-handler's credentials work for its own node
// only, the node its token names (nodeNameExtra). With another node's
// handler token, one could otherwise taint or relabel any Node, fake its
// heartbeat, or rewrite any VMI's status.
//
// A handler token without that name (a legacy Secret token, or a cluster
// whose tokens do not carry it) may change no Node and no VMI: refused,
// as KubeVirt refuses it, rather than let through unchecked.
// virt-handler's pods get bound tokens naming their node on every
// Kubernetes vmkit supports (1.30 and later, which the policies need).
func (s *Strategy) addHandlerPolicies(c *DeploymentConfig) {
	handlerOnly := admissionregistrationv1.MatchCondition{
		Name:       "virt-handler-only",
		Expression: "request.userInfo.username == '" + serviceAccountUser(c.Namespace, HandlerServiceAccount) + "'",
	}
	nodeName := admissionregistrationv1.Variable{
		Name: "nodeName",
		Expression: "has(request.userInfo.extra) && '" + nodeNameExtra + "' in request.userInfo.extra && size(request.userInfo.extra['" + nodeNameExtra + "']) > 0" +
			" ? request.userInfo.extra['" + nodeNameExtra + "'][0] : ''",
	}
	namesNode := admissionregistrationv1.Validation{
		Expression: "variables.nodeName != ''",
		Message:    "virt-handler's credentials name no node (" + nodeNameExtra + "): they may change no Node and no VirtualMachineInstance; run virt-handler with its pod's own service account token",
		Reason:     ptr(metav1.StatusReasonForbidden),
	}
	// changed lists the keys of metadata's labels or annotations outside
	// kubevirt.io/ that the update adds, changes or removes; labels may
	// also be KubeVirt's unprefixed cpumanager (v1.DeprecatedCPUManager),
	// which KubeVirt's policy exempts as well.
	changed := func(field string) string {
		was, now := "variables.old"+field, "variables.new"+field
		own := "!k.startsWith('kubevirt.io/')"
		if field == "Labels" {
			own += " && k != '" + v1.DeprecatedCPUManager + "'"
		}
		return was + ".filter(k, " + own + " && (!(k in " + now + ") || " + now + "[k] != " + was + "[k])) + " +
			now + ".filter(k, " + own + " && !(k in " + was + "))"
	}
	const fixedMetadata = "!(k in ['labels', 'annotations', 'managedFields', 'resourceVersion'])"
	s.addAdmissionPolicy(c, NodeRestrictionPolicyName, admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					// A patch is an update here; virt-handler may not
					// create or delete Nodes (see Rules).
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"nodes"}},
				},
			}},
		},
		MatchConditions: []admissionregistrationv1.MatchCondition{handlerOnly},
		Variables: []admissionregistrationv1.Variable{
			nodeName,
			{Name: "oldLabels", Expression: "has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"},
			{Name: "newLabels", Expression: "has(object.metadata.labels) ? object.metadata.labels : {}"},
			{Name: "oldAnnotations", Expression: "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
			{Name: "newAnnotations", Expression: "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
			{Name: "labelsChanged", Expression: changed("Labels")},
			{Name: "annotationsChanged", Expression: changed("Annotations")},
		},
		Validations: []admissionregistrationv1.Validation{namesNode, {
			Expression:        "object.metadata.name == variables.nodeName",
			Message:           "virt-handler may change its own Node only",
			MessageExpression: `"virt-handler of node " + variables.nodeName + " may not change Node " + object.metadata.name + ": each virt-handler changes its own Node only"`,
			Reason:            ptr(metav1.StatusReasonForbidden),
		}, {
			Expression: "object.spec == oldObject.spec",
			Message:    "spec of a Node: virt-handler may not change it (virt-controller taints and untaints nodes)",
			Reason:     ptr(metav1.StatusReasonForbidden),
		}, {
			Expression: "object.metadata.filter(k, " + fixedMetadata + ").all(k, k in oldObject.metadata && object.metadata[k] == oldObject.metadata[k]) && " +
				"oldObject.metadata.filter(k, " + fixedMetadata + ").all(k, k in object.metadata)",
			Message: "metadata of a Node: virt-handler may change only its kubevirt.io/ labels and annotations",
			Reason:  ptr(metav1.StatusReasonForbidden),
		}, {
			Expression:        "size(variables.labelsChanged) == 0",
			Message:           "metadata.labels of a Node: virt-handler may set, change or remove only kubevirt.io/ labels and cpumanager",
			MessageExpression: `"metadata.labels[" + variables.labelsChanged.join("], metadata.labels[") + "] of Node " + object.metadata.name + ": virt-handler may set, change or remove only kubevirt.io/ labels and cpumanager"`,
			Reason:            ptr(metav1.StatusReasonForbidden),
		}, {
			Expression:        "size(variables.annotationsChanged) == 0",
			Message:           "metadata.annotations of a Node: virt-handler may set, change or remove only kubevirt.io/ annotations",
			MessageExpression: `"metadata.annotations[" + variables.annotationsChanged.join("], metadata.annotations[") + "] of Node " + object.metadata.name + ": virt-handler may set, change or remove only kubevirt.io/ annotations"`,
			Reason:            ptr(metav1.StatusReasonForbidden),
		}},
	})
	// A VMI's status names its node and, while it migrates, the target's.
	// The target's agent takes the VMI over (status.nodeName) when the
	// migration completes; virt-controller alone picks the target.
	stringAt := func(object, path string) string {
		parts := strings.Split(path, ".")
		var checks []string
		for i := range parts {
			checks = append(checks, "has("+object+"."+strings.Join(parts[:i+1], ".")+")")
		}
		return strings.Join(checks, " && ") + " ? " + object + "." + path + " : ''"
	}
	s.addAdmissionPolicy(c, HandlerVMIPolicyName, admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: vmiRule(admissionregistrationv1.Update),
		MatchConditions:  []admissionregistrationv1.MatchCondition{handlerOnly},
		Variables: []admissionregistrationv1.Variable{
			nodeName,
			{Name: "oldNode", Expression: stringAt("oldObject", "status.nodeName")},
			{Name: "oldTarget", Expression: stringAt("oldObject", "status.migrationState.targetNode")},
			{Name: "newTarget", Expression: stringAt("object", "status.migrationState.targetNode")},
		},
		Validations: []admissionregistrationv1.Validation{namesNode, {
			Expression:        "variables.nodeName != '' && (variables.oldNode == variables.nodeName || variables.oldTarget == variables.nodeName)",
			Message:           "virt-handler may change only the VirtualMachineInstances on its node (status.nodeName) or migrating to it (status.migrationState.targetNode)",
			MessageExpression: `"virt-handler of node " + variables.nodeName + " may change only the VirtualMachineInstances on its node (status.nodeName) or migrating to it (status.migrationState.targetNode), not one on node '" + variables.oldNode + "'"`,
			Reason:            ptr(metav1.StatusReasonForbidden),
		}, {
			Expression: "variables.newTarget == variables.oldTarget",
			Message:    "status.migrationState.targetNode of a VirtualMachineInstance is chosen by virt-controller: virt-handler may not set or change it",
			Reason:     ptr(metav1.StatusReasonForbidden),
		}},
	})
}

// vmiRule matches the operations on VirtualMachineInstances.
func vmiRule(ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: ops,
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{v1.GroupName}, APIVersions: []string{"*"},
					Resources: []string{"virtualmachineinstances"},
				},
			},
		}},
	}
}

// addAdmissionPolicy adds the policy, failurePolicy Fail, and its binding
// of the same name, which denies what it refuses.
func (s *Strategy) addAdmissionPolicy(c *DeploymentConfig, name string, spec admissionregistrationv1.ValidatingAdmissionPolicySpec) {
	spec.FailurePolicy = ptr(admissionregistrationv1.Fail)
	s.AdmissionPolicies = append(s.AdmissionPolicies, &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: objectMeta(c, "", name, ""),
		Spec:       spec,
	})
	s.AdmissionPolicyBindings = append(s.AdmissionPolicyBindings, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: objectMeta(c, "", name, ""),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	})
}

// Virt-api's validating admission webhooks, with KubeVirt's names and paths
// (package virtapi serves them).
const (
	// ValidatingWebhookName names the ValidatingWebhookConfiguration.
	ValidatingWebhookName = "virt-api-validator"
	webhookVMIPath        = "/virtualmachineinstances-validate-create"
	webhookVMPath         = "/virtualmachines-validate"
	webhookReplicaSetPath = "/virtualmachinereplicaset-validate"
	// webhookPodEvictionPath is virtapi.PodEvictionPath.
	webhookPodEvictionPath = "/pod-eviction-validate"
)

// addValidatingWebhooks adds virt-api's validating webhooks: a VMI (on
// create), a VM's or replica set's template (on a user's create, and on a
// user's update of its spec) that no node could run, or that uses what the
// cluster's feature gates forbid, is refused by the API server with the
// fields named. The webhook's caBundle
// is the installation CA, which Apply writes (ApplyOptions.CABundle), as
// for the APIService. failurePolicy Fail, as KubeVirt's: while virt-api is
// down these objects cannot be created, rather than be created unchecked.
func (s *Strategy) addValidatingWebhooks(c *DeploymentConfig) {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	hook := func(name, path, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: c.Namespace, Name: APIServiceName, Path: ptr(path), Port: ptr(int32(443))},
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: ops,
				Rule: admissionregistrationv1.Rule{APIGroups: []string{v1.GroupName}, APIVersions: []string{"*"},
					Resources: []string{resource}, Scope: ptr(admissionregistrationv1.NamespacedScope)},
			}},
			// Every field the API server would default is set, so the
			// live object compares equal to this one.
			NamespaceSelector:       &metav1.LabelSelector{},
			ObjectSelector:          &metav1.LabelSelector{},
			FailurePolicy:           &fail,
			MatchPolicy:             &equivalent,
			SideEffects:             &none,
			TimeoutSeconds:          ptr(int32(10)),
			AdmissionReviewVersions: []string{"v1"},
		}
	}
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	// A VM's or replica set's template is checked when a user writes it:
	// not when vmkit's components do (the controllers, and virt-api's
	// subresources, write what a user's request allowed), and not on an
	// update that leaves the spec as it was (labels, annotations,
	// finalizers), which then works while virt-api is down.
	templates := func(h admissionregistrationv1.ValidatingWebhook) admissionregistrationv1.ValidatingWebhook {
		h.MatchConditions = []admissionregistrationv1.MatchCondition{notAComponent(c), {
			Name:       "spec-written",
			Expression: "request.operation != 'UPDATE' || object.spec != oldObject.spec",
		}}
		return h
	}
	s.ValidatingWebhooks = append(s.ValidatingWebhooks, &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: objectMeta(c, v1.VirtAPIValue, ValidatingWebhookName, ""),
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("virtualmachineinstances-create-validator.kubevirt.io", webhookVMIPath, "virtualmachineinstances", create),
			templates(hook("virtualmachine-validator.kubevirt.io", webhookVMPath, "virtualmachines", create, update)),
			templates(hook("virtualmachinereplicaset-validator.kubevirt.io", webhookReplicaSetPath, "virtualmachineinstancereplicasets", create, update)),
			launcherEvictionHook(c),
		},
	})
}

// launcherEvictionHook is KubeVirt's virt-launcher-eviction-interceptor:
// evictions of launcher pods (pods/eviction, names starting virt-launcher)
// go to virt-api, which turns them into live migrations. failurePolicy
// Ignore, as KubeVirt's: while virt-api is down, drains are not blocked.
func launcherEvictionHook(c *DeploymentConfig) admissionregistrationv1.ValidatingWebhook {
	ignore := admissionregistrationv1.Ignore
	noneOnDryRun := admissionregistrationv1.SideEffectClassNoneOnDryRun
	equivalent := admissionregistrationv1.Equivalent
	return admissionregistrationv1.ValidatingWebhook{
		Name: "virt-launcher-eviction-interceptor.kubevirt.io",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{Namespace: c.Namespace, Name: APIServiceName, Path: ptr(webhookPodEvictionPath), Port: ptr(int32(443))},
		},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
				Resources: []string{"pods/eviction"}, Scope: ptr(admissionregistrationv1.NamespacedScope)},
		}},
		MatchConditions:         []admissionregistrationv1.MatchCondition{{Name: "only-vms", Expression: `object.metadata.name.startsWith("virt-launcher")`}},
		NamespaceSelector:       &metav1.LabelSelector{},
		ObjectSelector:          &metav1.LabelSelector{},
		FailurePolicy:           &ignore,
		MatchPolicy:             &equivalent,
		SideEffects:             &noneOnDryRun,
		TimeoutSeconds:          ptr(int32(10)),
		AdmissionReviewVersions: []string{"v1"},
	}
}

// Virt-api's mutating admission webhook, with KubeVirt's names and path
// (package virtapi serves it).
const (
	// MutatingWebhookName names the MutatingWebhookConfiguration.
	MutatingWebhookName = "virt-api-mutator"
	// webhookVMIMutatePath is virtapi.MutateVMIPath.
	webhookVMIMutatePath = "/virtualmachineinstances-mutate"
)

// addMutatingWebhooks adds virt-api's mutating webhook on VMI creation,
// which applies the VirtualMachineInstancePresets whose selector matches
// the new VMI (KubeVirt's virtualmachineinstances-mutator.kubevirt.io).
// KubeVirt's also mutates VMI updates and VMs; vmkit's VMs are defaulted by
// their CRD schema and VMI updates are guarded by the admission policy
// (VMIUpdatePolicyName), so only creates are sent. failurePolicy Fail, as
// KubeVirt's: while virt-api is down no VMI is created without its presets.
// The caBundle is the installation CA, which Apply writes
// (ApplyOptions.CABundle).
func (s *Strategy) addMutatingWebhooks(c *DeploymentConfig) {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	never := admissionregistrationv1.NeverReinvocationPolicy
	s.MutatingWebhooks = append(s.MutatingWebhooks, &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: objectMeta(c, MutatingWebhookName, MutatingWebhookName, ""),
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "virtualmachineinstances-mutator.kubevirt.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: c.Namespace, Name: APIServiceName, Path: ptr(webhookVMIMutatePath), Port: ptr(int32(443))},
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{v1.GroupName}, APIVersions: []string{"*"},
					Resources: []string{"virtualmachineinstances"}, Scope: ptr(admissionregistrationv1.NamespacedScope)},
			}},
			// Every field the API server would default is set, so the
			// live object compares equal to this one.
			NamespaceSelector:       &metav1.LabelSelector{},
			ObjectSelector:          &metav1.LabelSelector{},
			FailurePolicy:           &fail,
			MatchPolicy:             &equivalent,
			SideEffects:             &none,
			TimeoutSeconds:          ptr(int32(10)),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      &never,
		}},
	})
}
