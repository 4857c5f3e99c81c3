package installstrategy

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestOperatorObjects(t *testing.T) {
	objs, err := OperatorObjects(OperatorConfig{Image: "vmkit/virt-operator:devel", HostNetwork: "127.0.0.1", WithoutVirtAPI: true,
		Env: map[string]string{"KV_IO_EXTRA_ENV_FOO": "bar"}})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind+" "+o.GetName())
	}
	want := "Namespace kubevirt,CustomResourceDefinition kubevirts.kubevirt.io,ServiceAccount kubevirt-operator,ClusterRole kubevirt-operator,ClusterRoleBinding kubevirt-operator,Deployment virt-operator"
	if got := strings.Join(kinds, ","); got != want {
		t.Errorf("objects:\n got %s\nwant %s", got, want)
	}
	d := objs[len(objs)-1].(*appsv1.Deployment)
	spec := d.Spec.Template.Spec
	if !spec.HostNetwork || *d.Spec.Replicas != 1 {
		t.Errorf("host network deployment: hostNetwork=%v replicas=%d, want true and 1", spec.HostNetwork, *d.Spec.Replicas)
	}
	env := map[string]string{}
	for _, e := range spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for name, value := range map[string]string{EnvOperatorImage: "vmkit/virt-operator:devel", EnvHostNetwork: "127.0.0.1", EnvWithoutVirtAPI: "true", "KV_IO_EXTRA_ENV_FOO": "bar"} {
		if env[name] != value {
			t.Errorf("env %s = %q, want %q", name, env[name], value)
		}
	}
	// What the operator's pod reads back is the config that was meant.
	getenv := func(name string) string {
		if name == EnvTargetInstallNamespace {
			return "kubevirt"
		}
		return env[name]
	}
	cfg, err := ConfigFromEnv(getenv, []string{"KV_IO_EXTRA_ENV_FOO=bar"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HostNetwork != "127.0.0.1" || !cfg.WithoutVirtAPI || cfg.Registry != "vmkit" || cfg.Version != "devel" {
		t.Errorf("config from the operator's environment: %+v", cfg)
	}
	s, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.APIServices) != 0 {
		t.Errorf("WithoutVirtAPI still installs %d APIServices", len(s.APIServices))
	}
	for _, dep := range s.Deployments {
		if dep.Name == "virt-api" {
			t.Error("WithoutVirtAPI still installs virt-api")
		}
		if !dep.Spec.Template.Spec.HostNetwork {
			t.Errorf("Deployment %s is not on the host network", dep.Name)
		}
	}
	for _, ds := range s.DaemonSets {
		if !ds.Spec.Template.Spec.HostNetwork || !strings.Contains(strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " "), "--listen-address=127.0.0.1") {
			t.Errorf("DaemonSet %s: hostNetwork=%v args %v", ds.Name, ds.Spec.Template.Spec.HostNetwork, ds.Spec.Template.Spec.Containers[0].Args)
		}
	}

	if _, err := OperatorObjects(OperatorConfig{Image: "virt-operator"}); err == nil || !strings.Contains(err.Error(), "operator image") {
		t.Errorf("image without registry: err %v, want one naming the operator image", err)
	}
}

func TestOperatorManifest(t *testing.T) {
	data, err := OperatorManifest(OperatorConfig{Image: "quay.io/vmkit/virt-operator:v0.1.0", ImagePullPolicy: corev1.PullAlways})
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")[1:] // after the header comment
	if len(docs) != 6 {
		t.Fatalf("%d documents, want 6", len(docs))
	}
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict([]byte(docs[5]), d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Spec.HostNetwork || *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("default deployment: hostNetwork=%v replicas=%d pull=%s", d.Spec.Template.Spec.HostNetwork, *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].ImagePullPolicy)
	}
}
