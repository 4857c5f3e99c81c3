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
	reserved := []string{v1.CreatedByLabel, v1.MigrationJobLabel, v1.NodeNameLabel, v1.MigrationTargetNodeNameLabel, v1.NodeSchedulable, v1.InstallStrategyLabel}
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
// create), a VM's or replica set's template (on create and update) that no
// node could run, or that uses what the cluster's feature gates forbid, is
// refused by the API server with the fields named. The webhook's caBundle
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
	s.ValidatingWebhooks = append(s.ValidatingWebhooks, &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: objectMeta(c, v1.VirtAPIValue, ValidatingWebhookName, ""),
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("virtualmachineinstances-create-validator.kubevirt.io", webhookVMIPath, "virtualmachineinstances", create),
			hook("virtualmachine-validator.kubevirt.io", webhookVMPath, "virtualmachines", create, update),
			hook("virtualmachinereplicaset-validator.kubevirt.io", webhookReplicaSetPath, "virtualmachineinstancereplicasets", create, update),
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
