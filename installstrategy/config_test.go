package installstrategy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		environ []string
		want    *DeploymentConfig
		wantErr string
	}{
		{
			name: "tag",
			env:  map[string]string{EnvOperatorImage: "quay.io/kubevirt/virt-operator:v1.4.0"},
			want: &DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0"},
		},
		{
			name: "registry with a port, prefix, namespace, pull policy, passthrough",
			env: map[string]string{
				EnvOperatorImage: "localhost:5000/ci/pr-1-virt-operator:dev", EnvTargetInstallNamespace: "vmkit",
				EnvTargetImagePullPolicy: "Always",
			},
			environ: []string{"KV_IO_EXTRA_ENV_FOO=bar=baz", "PATH=/bin", "KV_IO_EXTRA_ENV_="},
			want: &DeploymentConfig{Namespace: "vmkit", Registry: "localhost:5000/ci", ImagePrefix: "pr-1-", Version: "dev",
				ImagePullPolicy: corev1.PullAlways, PassthroughEnv: map[string]string{"FOO": "bar=baz"}},
		},
		{
			name: "digest and version",
			env: map[string]string{EnvOperatorImage: "quay.io/kubevirt/virt-operator@sha256:abababababababababababababababababababababababababababababababab", EnvVersion: "v1.4.0",
				EnvAPIDigest: "sha256:cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd", EnvLauncherDigest: "sha256:1212121212121212121212121212121212121212121212121212121212121212"},
			want: &DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0", OperatorDigest: "sha256:abababababababababababababababababababababababababababababababab",
				APIDigest: "sha256:cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd", LauncherDigest: "sha256:1212121212121212121212121212121212121212121212121212121212121212"},
		},
		{
			name: "whole config wins",
			env: map[string]string{EnvOperatorImage: "quay.io/kubevirt/virt-operator:v1.4.0",
				EnvTargetDeploymentConfig: `{"namespace":"x","registry":"r","version":"v9"}`},
			want: &DeploymentConfig{Namespace: "x", Registry: "r", Version: "v9"},
		},
		{name: "missing", env: map[string]string{}, wantErr: EnvOperatorImage},
		{name: "no registry", env: map[string]string{EnvOperatorImage: "virt-operator:v1"}, wantErr: "no registry"},
		{name: "not the operator", env: map[string]string{EnvOperatorImage: "quay.io/x/virt-api:v1"}, wantErr: "does not end in virt-operator"},
		{name: "digest without version", env: map[string]string{EnvOperatorImage: "quay.io/x/virt-operator@sha256:abababababababababababababababababababababababababababababababab"}, wantErr: "version is empty"},
		{name: "a digest that is none", env: map[string]string{EnvOperatorImage: "quay.io/x/virt-operator:v1", EnvHandlerDigest: "sha256:abc"}, wantErr: `handlerDigest: "sha256:abc" is not a digest`},
		{name: "bad pull policy", env: map[string]string{EnvOperatorImage: "quay.io/x/virt-operator:v1", EnvTargetImagePullPolicy: "Sometimes"}, wantErr: "Sometimes"},
		{name: "bad config", env: map[string]string{EnvTargetDeploymentConfig: `{"namespace":`}, wantErr: EnvTargetDeploymentConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConfigFromEnv(func(k string) string { return tt.env[k] }, tt.environ)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.SetID()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigForKubeVirt(t *testing.T) {
	operator := (&DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0", APIDigest: "sha256:1212121212121212121212121212121212121212121212121212121212121212"}).SetID()
	replicas := uint8(1)
	tests := []struct {
		name string
		spec v1.KubeVirtSpec
		want *DeploymentConfig
	}{
		{name: "empty spec installs the operator's own version", want: operator},
		{
			name: "tag and registry drop digests",
			spec: v1.KubeVirtSpec{ImageTag: "v1.5.0", ImageRegistry: "mirror.local/kv", ImagePullPolicy: corev1.PullNever},
			want: &DeploymentConfig{Namespace: "kubevirt", Registry: "mirror.local/kv", Version: "v1.5.0", ImagePullPolicy: corev1.PullNever},
		},
		{
			name: "settings become properties",
			spec: v1.KubeVirtSpec{
				Configuration: v1.KubeVirtConfiguration{DeveloperConfiguration: &v1.DeveloperConfiguration{
					UseEmulation: true, FeatureGates: []string{"Snapshot", " HostDisk", "", "Snapshot"}}},
				ImagePullSecrets:  []corev1.LocalObjectReference{{Name: "a"}, {Name: "b"}},
				Infra:             &v1.ComponentConfig{Replicas: &replicas, NodePlacement: &v1.NodePlacement{NodeSelector: map[string]string{"infra": "true"}}},
				UninstallStrategy: v1.KubeVirtUninstallStrategyRemoveWorkloads,
				ProductName:       "acme",
			},
			want: &DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0", APIDigest: "sha256:1212121212121212121212121212121212121212121212121212121212121212",
				AdditionalProperties: map[string]string{
					PropertyUseEmulation: "true", PropertyFeatureGates: "HostDisk,Snapshot", PropertyImagePullSecrets: "a,b", PropertyInfraReplicas: "1",
					PropertyInfraPlacement: `{"nodeSelector":{"infra":"true"}}`, PropertyUninstallStrategy: "RemoveWorkloads", PropertyProductName: "acme",
				}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConfigForKubeVirt(operator, &v1.KubeVirt{Spec: tt.spec})
			if err != nil {
				t.Fatal(err)
			}
			want := *tt.want
			want.SetID()
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigForKubeVirtRejectsBadFeatureGate(t *testing.T) {
	operator := (&DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0"}).SetID()
	kv := &v1.KubeVirt{}
	kv.Namespace, kv.Name = "kubevirt", "kv"
	kv.Spec.Configuration.DeveloperConfiguration = &v1.DeveloperConfiguration{FeatureGates: []string{"HostDisk,Snapshot"}}
	_, err := ConfigForKubeVirt(operator, kv)
	const want = `KubeVirt kubevirt/kv: spec.configuration.developerConfiguration.featureGates: "HostDisk,Snapshot" is not a feature gate name`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

func TestConfigForKubeVirtRejectsBadCPUAllocationRatio(t *testing.T) {
	operator := (&DeploymentConfig{Namespace: "kubevirt", Registry: "quay.io/kubevirt", Version: "v1.4.0"}).SetID()
	kv := &v1.KubeVirt{}
	kv.Namespace, kv.Name = "kubevirt", "kv"
	kv.Spec.Configuration.DeveloperConfiguration = &v1.DeveloperConfiguration{CPUAllocationRatio: -2}
	_, err := ConfigForKubeVirt(operator, kv)
	const want = `KubeVirt kubevirt/kv: spec.configuration.developerConfiguration.cpuAllocationRatio: -2 is not a ratio of at least 1`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
	bad := *operator
	bad.AdditionalProperties = map[string]string{PropertyCPUAllocationRatio: "0"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "additionalProperties[CPUAllocationRatio] \"0\" is not a ratio of at least 1") {
		t.Errorf("Validate with ratio 0: %v", err)
	}
}

func TestIDIsStable(t *testing.T) {
	a := customConfig()
	for range 20 {
		if b := customConfig(); b.ID != a.ID {
			t.Fatalf("ID changed between identical configs: %s, %s", a.ID, b.ID)
		}
	}
	b := customConfig()
	b.PassthroughEnv["X"] = "y"
	if b.ComputeID() == a.ID {
		t.Error("ID did not change with the passthrough environment")
	}
	if err := (&DeploymentConfig{ID: "bogus", Namespace: "n", Registry: "r", Version: "v"}).Validate(); err == nil {
		t.Error("Validate accepted an ID that is not the config's hash")
	}
}
