package operator

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vmkit/vmkit/installstrategy"
)

// TestConfigMapStrategies: a missing strategy starts one dump Job (with the
// resolved config in its environment) and is pending; once the ConfigMap
// exists it is loaded.
func TestConfigMapStrategies(t *testing.T) {
	ctx := t.Context()
	kube := fake.NewClientset()
	cfg := (&installstrategy.DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.5.0"}).SetID()
	l := &ConfigMapStrategies{Kube: kube, Namespace: "kubevirt", CreateJobs: true}
	for range 2 {
		if _, err := l.Load(ctx, cfg); !errors.Is(err, ErrStrategyPending) {
			t.Fatalf("Load without a ConfigMap = %v, want ErrStrategyPending", err)
		}
	}
	jobs, err := kube.BatchV1().Jobs("kubevirt").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 || jobs.Items[0].Name != DumpJobName(cfg.ID) {
		t.Fatalf("jobs %+v, want one named %s", jobs.Items, DumpJobName(cfg.ID))
	}
	ctr := jobs.Items[0].Spec.Template.Spec.Containers[0]
	if ctr.Image != "quay.io/kubevirt/virt-operator:v1.5.0" || !slices.Contains(ctr.Command, "--dump-install-strategy") {
		t.Errorf("job container %s %v", ctr.Image, ctr.Command)
	}
	if !slices.Contains(ctr.Env, corev1.EnvVar{Name: installstrategy.EnvTargetDeploymentConfig, Value: cfg.JSON()}) {
		t.Errorf("job env %v lacks the config", ctr.Env)
	}

	// What the Job writes.
	s, err := installstrategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := s.ToConfigMap()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("kubevirt").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.Config, got.Config); diff != "" || len(got.Objects()) != len(s.Objects()) {
		t.Errorf("loaded strategy differs: %s", diff)
	}
}
