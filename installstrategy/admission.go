package installstrategy

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// VMIUpdatePolicyName names the ValidatingAdmissionPolicy (and its
// binding) that keeps a VirtualMachineInstance's spec and status to
// vmkit's components.
const VMIUpdatePolicyName = "kubevirt-vmi-update"

// addAdmissionPolicies adds what the API server itself enforces, without a
// webhook: a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1,
// GA since Kubernetes 1.30) that rejects updates of a
// VirtualMachineInstance's spec or status by anyone but vmkit's service
// accounts. KubeVirt's virt-api webhook refuses the same: once a VMI
// exists, the controller, the node agent and the launcher act on its spec,
// and a user who could change it (or fake its status) would steer them.
// Metadata (labels, annotations, finalizers, owner references) stays
// writable, as on KubeVirt.
func (s *Strategy) addAdmissionPolicies(c *DeploymentConfig) {
	var components []string
	for _, sa := range []string{OperatorServiceAccount, APIServiceAccount, ControllerServiceAccount, HandlerServiceAccount} {
		components = append(components, fmt.Sprintf("'system:serviceaccount:%s:%s'", c.Namespace, sa))
	}
	fail := admissionregistrationv1.Fail
	s.AdmissionPolicies = append(s.AdmissionPolicies, &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: objectMeta(c, "", VMIUpdatePolicyName, ""),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{v1.GroupName}, APIVersions: []string{"*"},
							Resources: []string{"virtualmachineinstances"},
						},
					},
				}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name:       "not-a-kubevirt-component",
				Expression: "!(request.userInfo.username in [" + strings.Join(components, ", ") + "])",
			}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.spec == oldObject.spec",
				Message:    "spec of a VirtualMachineInstance cannot be changed once it exists (only KubeVirt's components may)",
				Reason:     ptr(metav1.StatusReasonForbidden),
			}, {
				Expression: "has(object.status) == has(oldObject.status) && (!has(object.status) || object.status == oldObject.status)",
				Message:    "status of a VirtualMachineInstance is written by KubeVirt's components only",
				Reason:     ptr(metav1.StatusReasonForbidden),
			}},
		},
	})
	s.AdmissionPolicyBindings = append(s.AdmissionPolicyBindings, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: objectMeta(c, "", VMIUpdatePolicyName, ""),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        VMIUpdatePolicyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	})
}
