package installstrategy

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// TestVirtAPIDeployment: virt-api gets its flags, its serving certificate,
// the handler client certificate and the CA bundle at the paths the flags
// name, and HTTPS probes on the unauthenticated health endpoint.
func TestVirtAPIDeployment(t *testing.T) {
	tests := []struct {
		name      string
		cfg       func() *DeploymentConfig
		args      []string
		probeHost string
	}{
		{
			name: "pod network",
			cfg:  testConfig,
			args: []string{
				"--port=8443",
				"--tls-cert-file=/etc/virt-api/certificates/tls.crt",
				"--tls-private-key-file=/etc/virt-api/certificates/tls.key",
				"--handler-client-cert-dir=/etc/virt-handler/clientcertificates",
				"--ca-bundle-file=/etc/virt-api/ca/ca-bundle",
				"--namespace=kubevirt",
				"--handler-port=8186",
				"-v=2",
			},
		},
		{
			name: "host network",
			cfg: func() *DeploymentConfig {
				c := customConfig()
				c.HostNetwork = "10.1.2.3"
				return c.SetID()
			},
			args: []string{
				"--port=8443",
				"--tls-cert-file=/etc/virt-api/certificates/tls.crt",
				"--tls-private-key-file=/etc/virt-api/certificates/tls.key",
				"--handler-client-cert-dir=/etc/virt-handler/clientcertificates",
				"--ca-bundle-file=/etc/virt-api/ca/ca-bundle",
				"--namespace=vmkit-system",
				"--handler-port=8186",
				"--bind-address=10.1.2.3",
				"--handler-host=10.1.2.3",
				"--use-emulation",
				"--feature-gates=HostDisk,Snapshot",
				"-v=2",
			},
			probeHost: "10.1.2.3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Generate(tt.cfg())
			if err != nil {
				t.Fatal(err)
			}
			var spec *corev1.PodSpec
			for _, d := range s.Deployments {
				if d.Name == v1.VirtAPIValue {
					spec = &d.Spec.Template.Spec
				}
			}
			if spec == nil {
				t.Fatal("no virt-api Deployment")
			}
			ctr := spec.Containers[0]
			if diff := cmp.Diff(tt.args, ctr.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			// Each mount path, to what it shows, read-only.
			sources := map[string]string{}
			for _, vol := range spec.Volumes {
				switch {
				case vol.Secret != nil:
					sources[vol.Name] = "Secret " + vol.Secret.SecretName
				case vol.ConfigMap != nil:
					sources[vol.Name] = "ConfigMap " + vol.ConfigMap.Name
				default:
					t.Errorf("volume %s is neither a Secret nor a ConfigMap", vol.Name)
				}
			}
			mounts := map[string]string{}
			for _, m := range ctr.VolumeMounts {
				if !m.ReadOnly {
					t.Errorf("mount %s is writable", m.MountPath)
				}
				mounts[m.MountPath] = sources[m.Name]
			}
			want := map[string]string{
				APICertDir:              "Secret kubevirt-virt-api-certs",
				APIHandlerClientCertDir: "Secret kubevirt-virt-handler-certs",
				APICADir:                "ConfigMap kubevirt-ca",
			}
			if diff := cmp.Diff(want, mounts); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
			wantProbe := &corev1.HTTPGetAction{Scheme: corev1.URISchemeHTTPS, Host: tt.probeHost, Port: intstr.FromInt32(8443), Path: "/apis/subresources.kubevirt.io/v1/healthz"}
			for name, p := range map[string]*corev1.Probe{"readiness": ctr.ReadinessProbe, "liveness": ctr.LivenessProbe} {
				if p == nil {
					t.Errorf("no %s probe", name)
					continue
				}
				if diff := cmp.Diff(wantProbe, p.HTTPGet); diff != "" {
					t.Errorf("%s probe (-want +got):\n%s", name, diff)
				}
			}
		})
	}
	// The exported paths are what the flags name.
	for got, want := range map[string]string{
		APICertFile:     "/etc/virt-api/certificates/tls.crt",
		APIKeyFile:      "/etc/virt-api/certificates/tls.key",
		APICABundleFile: "/etc/virt-api/ca/ca-bundle",
	} {
		if got != want {
			t.Errorf("path %q, want %q", got, want)
		}
	}
}

// TestServicesHaveListeners: every Service of the strategy selects the pods
// of a component (the strategy's workloads or the operator's own
// Deployment) and each of its ports targets a port those pods' containers
// declare: no Service is an address with nothing listening behind it.
func TestServicesHaveListeners(t *testing.T) {
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	operator, err := OperatorObjects(OperatorConfig{Image: "quay.io/kubevirt/virt-operator:v1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.PodTemplateSpec
	for _, d := range s.Deployments {
		pods = append(pods, d.Spec.Template)
	}
	for _, ds := range s.DaemonSets {
		pods = append(pods, ds.Spec.Template)
	}
	for _, o := range operator {
		if d, ok := o.(*appsv1.Deployment); ok {
			pods = append(pods, d.Spec.Template)
		}
	}
	for _, svc := range s.Services {
		var selected []corev1.PodTemplateSpec
		for _, p := range pods {
			if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(p.Labels)) {
				selected = append(selected, p)
			}
		}
		if len(selected) == 0 {
			t.Errorf("Service %s selects no component's pods (selector %v)", svc.Name, svc.Spec.Selector)
			continue
		}
		for _, port := range svc.Spec.Ports {
			for _, p := range selected {
				if !declaresPort(p.Spec, port.TargetPort) {
					t.Errorf("Service %s port %s targets %s, which pods %s do not listen on", svc.Name, port.Name, port.TargetPort.String(), p.Labels[v1.AppLabel])
				}
			}
		}
	}
}

func declaresPort(spec corev1.PodSpec, target intstr.IntOrString) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if (target.Type == intstr.String && p.Name == target.StrVal) || (target.Type == intstr.Int && p.ContainerPort == target.IntVal) {
				return true
			}
		}
	}
	return false
}

// TestHandlerMountPropagation: no component mounts a host path with
// Bidirectional propagation (the node agent performs no mounts, so none of
// the container's mounts should reach the host), and virt-handler still
// sees what the kubelet mounts later under the launcher pods' directories.
func TestHandlerMountPropagation(t *testing.T) {
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	var specs []corev1.PodSpec
	for _, d := range s.Deployments {
		specs = append(specs, d.Spec.Template.Spec)
	}
	for _, ds := range s.DaemonSets {
		specs = append(specs, ds.Spec.Template.Spec)
	}
	propagation := map[string]corev1.MountPropagationMode{}
	for _, spec := range specs {
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			for _, m := range c.VolumeMounts {
				if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
					t.Errorf("%s mounts %s with Bidirectional propagation", c.Name, m.MountPath)
				}
				if c.Name == v1.VirtHandlerValue && m.MountPropagation != nil {
					propagation[m.MountPath] = *m.MountPropagation
				}
			}
		}
	}
	want := map[string]corev1.MountPropagationMode{
		HostShareDir:    corev1.MountPropagationHostToContainer,
		HostKubeletPods: corev1.MountPropagationHostToContainer,
		HostKubeletRoot: corev1.MountPropagationHostToContainer,
	}
	if diff := cmp.Diff(want, propagation); diff != "" {
		t.Errorf("virt-handler's mount propagation (-want +got):\n%s", diff)
	}
}

// TestHandlerMemoryLimit: virt-handler keeps KubeVirt's requests (10m CPU,
// 325Mi) and has a memory limit above them, so a runaway agent is
// restarted alone rather than left to the node's OOM killer; no CPU limit
// throttles it.
func TestHandlerMemoryLimit(t *testing.T) {
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.DaemonSets) != 1 {
		t.Fatalf("%d DaemonSets, want virt-handler's", len(s.DaemonSets))
	}
	got := s.DaemonSets[0].Spec.Template.Spec.Containers[0].Resources
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("325Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("virt-handler's resources %v, want %v", got, want)
	}
}

// TestComponentDisruptionBudgets: virt-api and virt-controller each have a
// PodDisruptionBudget keeping one of their pods through a drain, selecting
// exactly their Deployment's pods; a component without a second replica
// (or virt-api, when not installed) has none, which would block drains.
func TestComponentDisruptionBudgets(t *testing.T) {
	withoutAPI := testConfig()
	withoutAPI.WithoutVirtAPI = true
	oneReplica := testConfig()
	oneReplica.AdditionalProperties = map[string]string{PropertyInfraReplicas: "1"}
	tests := []struct {
		name string
		cfg  *DeploymentConfig
		want []string
	}{
		{"default", testConfig(), []string{"virt-api-pdb", "virt-controller-pdb"}},
		{"three replicas", customConfig(), []string{"virt-api-pdb", "virt-controller-pdb"}},
		{"without virt-api", withoutAPI.SetID(), []string{"virt-controller-pdb"}},
		{"one replica", oneReplica.SetID(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Generate(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, pdb := range s.PodDisruptionBudgets {
				got = append(got, pdb.Name)
				if pdb.Namespace != tt.cfg.Namespace {
					t.Errorf("%s in namespace %q, want %q", pdb.Name, pdb.Namespace, tt.cfg.Namespace)
				}
				if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) || pdb.Spec.MaxUnavailable != nil {
					t.Errorf("%s: minAvailable %v, maxUnavailable %v; want minAvailable 1", pdb.Name, pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
				}
				selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				if err != nil {
					t.Fatal(err)
				}
				var selected []string
				for _, d := range s.Deployments {
					if selector.Matches(labels.Set(d.Spec.Template.Labels)) {
						selected = append(selected, d.Name)
					}
				}
				for _, ds := range s.DaemonSets {
					if selector.Matches(labels.Set(ds.Spec.Template.Labels)) {
						selected = append(selected, ds.Name)
					}
				}
				if want := []string{strings.TrimSuffix(pdb.Name, "-pdb")}; !slices.Equal(selected, want) {
					t.Errorf("%s selects the pods of %v, want %v", pdb.Name, selected, want)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PodDisruptionBudgets (-want +got):\n%s", diff)
			}
		})
	}
}
