package virtapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestEvictionHandler(t *testing.T) {
	strategy := func(s v1.EvictionStrategy) *v1.EvictionStrategy { return &s }
	launcher := func(node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-vm-abcde", Namespace: "ns",
			Labels: map[string]string{v1.AppLabel: v1.VirtLauncherValue}, Annotations: map[string]string{v1.DomainAnnotation: "vm"}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	}
	vmi := func(s *v1.EvictionStrategy, migratable bool, evacuating string) *v1.VirtualMachineInstance {
		cond := corev1.ConditionFalse
		if migratable {
			cond = corev1.ConditionTrue
		}
		return &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Spec: v1.VirtualMachineInstanceSpec{EvictionStrategy: s},
			Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01", EvacuationNodeName: evacuating,
				Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceIsMigratable, Status: cond}}}}
	}
	cases := []struct {
		name        string
		pod         *corev1.Pod
		vmi         *v1.VirtualMachineInstance
		cluster     *v1.EvictionStrategy
		dryRun      bool
		wantAllowed bool
		wantMsg     string
		wantMarked  string
	}{
		{"LiveMigrate: refused, marked", launcher("node01", corev1.PodRunning), vmi(strategy(v1.EvictionStrategyLiveMigrate), true, ""), nil, false,
			false, `Eviction triggered evacuation of VMI "ns/vm"`, "node01"},
		// The fake applies dry runs; the patch must ask for one.
		{"dry run: refused, patched as a dry run", launcher("node01", corev1.PodRunning), vmi(strategy(v1.EvictionStrategyLiveMigrate), true, ""), nil, true,
			false, `Eviction triggered evacuation of VMI "ns/vm"`, "node01"},
		{"LiveMigrate, not migratable", launcher("node01", corev1.PodRunning), vmi(strategy(v1.EvictionStrategyLiveMigrate), false, ""), nil, false,
			false, "VMI vm is configured with an eviction strategy but is not live-migratable", ""},
		{"LiveMigrateIfPossible, not migratable: allowed", launcher("node01", corev1.PodRunning), vmi(strategy(v1.EvictionStrategyLiveMigrateIfPossible), false, ""), nil, false, true, "", ""},
		{"no strategy: allowed", launcher("node01", corev1.PodRunning), vmi(nil, true, ""), nil, false, true, "", ""},
		{"cluster-wide LiveMigrate", launcher("node01", corev1.PodRunning), vmi(nil, true, ""), strategy(v1.EvictionStrategyLiveMigrate), false,
			false, `Eviction triggered evacuation of VMI "ns/vm"`, "node01"},
		{"evacuation in progress", launcher("node01", corev1.PodRunning), vmi(strategy(v1.EvictionStrategyLiveMigrate), true, "node01"), nil, false,
			false, `Evacuation in progress: Eviction triggered evacuation of VMI "ns/vm"`, "node01"},
		{"target pod", launcher("node02", corev1.PodRunning), vmi(strategy(v1.EvictionStrategyLiveMigrate), true, ""), nil, false,
			false, "Eviction request for target Pod", ""},
		{"completed launcher: allowed", launcher("node01", corev1.PodSucceeded), vmi(strategy(v1.EvictionStrategyLiveMigrate), true, ""), nil, false, true, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewSimpleClientset(tc.pod)
			kv := fake.NewSimpleClientset(tc.vmi)
			h := EvictionHandler(EvictionConfig{Kube: kube, Kubevirt: kv, ClusterStrategy: func(context.Context) *v1.EvictionStrategy { return tc.cluster }})
			eviction, _ := json.Marshal(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: tc.pod.Name, Namespace: "ns"}})
			review := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u1", Name: tc.pod.Name, Namespace: "ns",
				Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: eviction}, DryRun: &tc.dryRun}}
			body, _ := json.Marshal(review)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PodEvictionPath, bytes.NewReader(body)))
			var got admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Response == nil {
				t.Fatalf("response %q: %v", rec.Body.String(), err)
			}
			if got.Response.Allowed != tc.wantAllowed || got.Response.UID != "u1" {
				t.Errorf("allowed %v uid %q, want %v u1", got.Response.Allowed, got.Response.UID, tc.wantAllowed)
			}
			if !tc.wantAllowed && (got.Response.Result == nil || got.Response.Result.Message != tc.wantMsg || got.Response.Result.Code != http.StatusTooManyRequests) {
				t.Errorf("result %+v, want 429 %q", got.Response.Result, tc.wantMsg)
			}
			for _, a := range kv.Actions() {
				if p, ok := a.(k8stesting.PatchActionImpl); ok {
					if dry := len(p.GetPatchOptions().DryRun) > 0; dry != tc.dryRun {
						t.Errorf("patch dry run %v, want %v", dry, tc.dryRun)
					}
				}
			}
			after, _ := kv.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm", metav1.GetOptions{})
			if after.Status.EvacuationNodeName != tc.wantMarked {
				t.Errorf("evacuationNodeName %q, want %q", after.Status.EvacuationNodeName, tc.wantMarked)
			}
		})
	}
}
