package podtemplate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/internal/testenv"
)

// TestAPIServerAcceptsGoldenPods creates every golden pod with a
// server-side dry run against a real kube-apiserver: defaulting, validation
// and admission (ServiceAccount, Priority, PodSecurity) all run, nothing is
// stored. It also checks the strictest Pod Security level that admits each
// pod (goldenCases' level), since that decides where VMs may run on
// clusters enforcing it: the default launcher pod meets "restricted".
func TestAPIServerAcceptsGoldenPods(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; run without -short")
	}
	env := testenv.Start(t, testenv.Options{})
	ctx := t.Context()
	kube := env.Kube

	if _, err := kube.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-high"}, Value: 1000,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One namespace per enforced Pod Security level, named after it.
	levels := []string{"baseline", "restricted"}
	strictness := map[string]int{"privileged": 0, "baseline": 1, "restricted": 2}
	for _, level := range levels {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:   level,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": level},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Without kube-controller-manager nobody creates service accounts; the
	// ServiceAccount admission plugin rejects pods whose account is missing.
	for _, ns := range append([]string{"default"}, levels...) {
		for _, sa := range []string{"default", "vm-agent"} {
			if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
				ObjectMeta: metav1.ObjectMeta{Name: sa},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			pod := renderGolden(t, c)
			created, err := kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, dryRun)
			if err != nil {
				t.Fatalf("the API server rejects the pod: %v", err)
			}
			if !strings.HasPrefix(created.Name, pod.GenerateName) {
				t.Errorf("name %q was not generated from %q", created.Name, pod.GenerateName)
			}
			// The server's view of what the pod gets: its QoS class.
			wantQoS := corev1.PodQOSBurstable
			if strings.HasPrefix(c.name, "dedicated-cpus") {
				wantQoS = corev1.PodQOSGuaranteed
			}
			if created.Status.QOSClass != wantQoS {
				t.Errorf("QoS class %q, want %q", created.Status.QOSClass, wantQoS)
			}

			// The pod's level and every laxer one admit it; each stricter
			// level refuses it.
			for _, level := range levels {
				admits := strictness[level] <= strictness[c.level]
				pod.Namespace = level
				_, err := kube.CoreV1().Pods(level).Create(ctx, pod, dryRun)
				switch {
				case admits && err != nil:
					t.Errorf("a namespace enforcing Pod Security %s rejects the pod (goldenCases says %s): %v", level, c.level, err)
				case !admits && err == nil:
					t.Errorf("a namespace enforcing Pod Security %s admits the pod (goldenCases says %s); update goldenCases if the pod got safer", level, c.level)
				case !admits:
					t.Logf("%s rejects it, as expected: %v", level, err)
				}
			}
		})
	}
}
