package installstrategy

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Ports the components listen on.
const (
	APIPort            = 8443 // virt-api's HTTPS server (subresources, health)
	ControllerHTTPPort = 8080 // virt-controller's /metrics, /healthz, /readyz (HTTPS)
	HandlerHTTPPort    = 8443 // virt-handler's /metrics and /healthz
	HandlerConsolePort = 8186 // virt-handler's console, VNC and lifecycle REST API
)

// DefaultInfraReplicas is the replica count of virt-api and virt-controller.
const DefaultInfraReplicas = 2

// handlerMemoryLimit is virt-handler's memory limit in bytes (1Gi; see handlerDaemonSet).
const handlerMemoryLimit = 1 << 30

func (s *Strategy) addServices(c *DeploymentConfig) {
	svc := func(component, name string, selector map[string]string, port corev1.ServicePort, headless bool) *corev1.Service {
		out := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: objectMeta(c, component, name, c.Namespace),
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: selector,
				Ports:    []corev1.ServicePort{port},
			},
		}
		if headless {
			out.Spec.ClusterIP = corev1.ClusterIPNone
		}
		return out
	}
	if !c.WithoutVirtAPI {
		s.Services = append(s.Services, svc(v1.VirtAPIValue, APIServiceName, map[string]string{v1.AppLabel: v1.VirtAPIValue},
			corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(APIPort), Protocol: corev1.ProtocolTCP}, false))
	}
	// The Prometheus Service carries the label its pods do: KubeVirt's
	// ServiceMonitor selects it by that label.
	prom := svc("", PrometheusServiceName, map[string]string{PrometheusLabel: "true"},
		corev1.ServicePort{Name: "metrics", Port: 443, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP}, true)
	prom.Labels[PrometheusLabel] = "true"
	// KubeVirt's kubevirt-operator-webhook Service has no counterpart:
	// vmkit's operator serves no webhook, so nothing would listen behind
	// it. Apply prunes the one older versions installed.
	s.Services = append(s.Services, prom)
}

func (s *Strategy) addWorkloads(c *DeploymentConfig) error {
	infra, err := c.placement(PropertyInfraPlacement)
	if err != nil {
		return err
	}
	workloads, err := c.placement(PropertyWorkloadsPlacement)
	if err != nil {
		return err
	}
	replicas := int32(DefaultInfraReplicas)
	if n := c.property(PropertyInfraReplicas); n != "" {
		r, err := strconv.Atoi(n)
		if err != nil {
			return err
		}
		replicas = int32(r)
	}
	verbosity := "-v=2"

	if !c.WithoutVirtAPI {
		s.Deployments = append(s.Deployments, apiDeployment(c, replicas, infra, verbosity))
	}

	ctlArgs := []string{
		"--launcher-image=" + c.Image(v1.VirtLauncherValue),
		"--exportserver-image=" + c.Image(ExportServerComponent),
		"--image-pull-policy=" + string(c.PullPolicy()),
		"--leader-elect=true",
		"--leader-elect-namespace=" + c.Namespace,
		"--metrics-address=" + c.HostNetwork + ":" + strconv.Itoa(ControllerHTTPPort),
	}
	if c.property(PropertyUseEmulation) == "true" {
		ctlArgs = append(ctlArgs, "--use-emulation")
	}
	if gates := c.property(PropertyFeatureGates); gates != "" {
		ctlArgs = append(ctlArgs, "--feature-gates="+gates)
	}
	if ratio := c.property(PropertyCPUAllocationRatio); ratio != "" {
		ctlArgs = append(ctlArgs, "--cpu-allocation-ratio="+ratio)
	}
	ctl := container(c, v1.VirtControllerValue, append(ctlArgs, verbosity),
		corev1.ContainerPort{Name: "metrics", ContainerPort: ControllerHTTPPort, Protocol: corev1.ProtocolTCP})
	ctl.Resources = requests(10, 275<<20)
	// With the host network the probes go to the address the server listens
	// on. Readiness is cheap to ask and gates the operator's Available: ask
	// early and often. The server is HTTPS with a self-signed certificate,
	// which the kubelet does not verify; /healthz and /readyz need no
	// credentials.
	ctl.ReadinessProbe = probe(&corev1.HTTPGetAction{Scheme: corev1.URISchemeHTTPS, Host: c.HostNetwork, Port: intstr.FromInt32(ControllerHTTPPort), Path: "/readyz"}, 2, 3)
	ctl.LivenessProbe = probe(&corev1.HTTPGetAction{Scheme: corev1.URISchemeHTTPS, Host: c.HostNetwork, Port: intstr.FromInt32(ControllerHTTPPort), Path: "/healthz"}, 15, 10)
	s.Deployments = append(s.Deployments, deployment(c, v1.VirtControllerValue, replicas, ControllerServiceAccount, infra, ctl))

	s.DaemonSets = append(s.DaemonSets, handlerDaemonSet(c, workloads, verbosity))
	for _, d := range s.Deployments {
		if pdb := disruptionBudget(c, d); pdb != nil {
			s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, pdb)
		}
	}
	return nil
}

// disruptionBudget keeps one pod of the Deployment through voluntary
// disruptions, as KubeVirt's <name>-pdb: a drain evicts virt-api's or
// virt-controller's pods one at a time, waiting for the evicted one's
// replacement, rather than all at once (virt-api's webhooks refuse VM
// and VMI writes while none runs). A Deployment of one replica gets none:
// its budget would block every drain of that node.
func disruptionBudget(c *DeploymentConfig, d *appsv1.Deployment) *policyv1.PodDisruptionBudget {
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		return nil
	}
	component := d.Labels[v1.AppLabel]
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta(c, component, d.Name+"-pdb", d.Namespace),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     d.Spec.Selector.DeepCopy(),
		},
	}
}

// Where virt-api's pod mounts its certificates: the defaults of
// cmd/virt-api's flags.
const (
	// APICertDir holds virt-api's serving certificate, the Secret
	// APIServerCertSecretName: APICertFile and APIKeyFile.
	APICertDir  = "/etc/virt-api/certificates"
	APICertFile = APICertDir + "/" + corev1.TLSCertKey
	APIKeyFile  = APICertDir + "/" + corev1.TLSPrivateKeyKey
	// APIHandlerClientCertDir holds the client certificate virt-api
	// presents to virt-handler's REST API (tls.crt, tls.key), the Secret
	// HandlerClientCertSecretName.
	APIHandlerClientCertDir = "/etc/virt-handler/clientcertificates"
	// APICADir holds the installation's CA bundle, the ConfigMap
	// CABundleConfigMapName, which virt-handler's serving certificate
	// chains to: APICABundleFile.
	APICADir        = "/etc/virt-api/ca"
	APICABundleFile = APICADir + "/" + CABundleKey
)

// apiDeployment is virt-api: the aggregated API server of
// subresources.kubevirt.io, serving on APIPort with its certificate and
// reaching each node's virt-handler on HandlerConsolePort with the client
// certificate, verifying it against the CA bundle.
func apiDeployment(c *DeploymentConfig, replicas int32, placement *v1.NodePlacement, verbosity string) *appsv1.Deployment {
	// Flags of cmd/virt-api.
	args := []string{
		"--port=" + strconv.Itoa(APIPort),
		"--tls-cert-file=" + APICertFile,
		"--tls-private-key-file=" + APIKeyFile,
		"--handler-client-cert-dir=" + APIHandlerClientCertDir,
		"--ca-bundle-file=" + APICABundleFile,
		"--namespace=" + c.Namespace,
		"--handler-port=" + strconv.Itoa(HandlerConsolePort),
	}
	if c.HostNetwork != "" {
		// virt-api listens on the address, and every virt-handler, on the
		// host network too, listens there rather than on its pod IP.
		args = append(args, "--bind-address="+c.HostNetwork, "--handler-host="+c.HostNetwork)
	}
	// Admission checks what the cluster allows, as virt-controller renders.
	if c.property(PropertyUseEmulation) == "true" {
		args = append(args, "--use-emulation")
	}
	if gates := c.property(PropertyFeatureGates); gates != "" {
		args = append(args, "--feature-gates="+gates)
	}
	api := container(c, v1.VirtAPIValue, append(args, verbosity),
		corev1.ContainerPort{Name: "virt-api", ContainerPort: APIPort, Protocol: corev1.ProtocolTCP},
		corev1.ContainerPort{Name: "metrics", ContainerPort: APIPort, Protocol: corev1.ProtocolTCP})
	api.Resources = requests(5, 500<<20)
	// The health endpoint is served over TLS without authentication.
	healthz := &corev1.HTTPGetAction{Scheme: corev1.URISchemeHTTPS, Host: c.HostNetwork, Port: intstr.FromInt32(APIPort), Path: "/apis/" + SubresourcesGroup + "/v1/healthz"}
	api.ReadinessProbe = probe(healthz, 2, 3)
	api.LivenessProbe = probe(healthz, 15, 10)
	// The certificates EnsureCertificates writes.
	volumes := []corev1.Volume{
		{Name: APIServerCertSecretName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: APIServerCertSecretName}}},
		{Name: HandlerClientCertSecretName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: HandlerClientCertSecretName}}},
		{Name: "ca-bundle", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: CABundleConfigMapName}}}},
	}
	api.VolumeMounts = []corev1.VolumeMount{
		{Name: APIServerCertSecretName, MountPath: APICertDir, ReadOnly: true},
		{Name: HandlerClientCertSecretName, MountPath: APIHandlerClientCertDir, ReadOnly: true},
		{Name: "ca-bundle", MountPath: APICADir, ReadOnly: true},
	}
	d := deployment(c, v1.VirtAPIValue, replicas, APIServiceAccount, placement, api)
	d.Spec.Template.Spec.Volumes = volumes
	return d
}

// container is a component's container: image, pull policy, command, the
// passthrough environment and a restricted security context.
func container(c *DeploymentConfig, component string, args []string, ports ...corev1.ContainerPort) corev1.Container {
	out := corev1.Container{
		Name:                     component,
		Image:                    c.Image(component),
		ImagePullPolicy:          c.PullPolicy(),
		Command:                  []string{component},
		Args:                     args,
		Ports:                    ports,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	for _, name := range slices.Sorted(maps.Keys(c.PassthroughEnv)) {
		out.Env = append(out.Env, corev1.EnvVar{Name: name, Value: c.PassthroughEnv[name]})
	}
	return out
}

func requests(milliCPU, memory int64) corev1.ResourceRequirements {
	cpu := resource.NewMilliQuantity(milliCPU, resource.DecimalSI)
	_ = cpu.String() // see quantity
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *cpu, corev1.ResourceMemory: quantity(memory, resource.BinarySI)}}
}

// quantity is value in format. String caches the canonical form, as
// decoding does, so a strategy read back from its ConfigMap is identical
// to the generated one.
func quantity(value int64, format resource.Format) resource.Quantity {
	q := resource.NewQuantity(value, format)
	_ = q.String()
	return *q
}

func probe(get *corev1.HTTPGetAction, delay, period int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: get},
		InitialDelaySeconds: delay,
		PeriodSeconds:       period,
		TimeoutSeconds:      10,
		FailureThreshold:    3,
		SuccessThreshold:    1,
	}
}

// podSpec is what every component's pod shares: service account, priority,
// Linux nodes, the CriticalAddonsOnly toleration, pull secrets and the
// CR's node placement.
func podSpec(c *DeploymentConfig, account string, placement *v1.NodePlacement, containers ...corev1.Container) corev1.PodSpec {
	spec := corev1.PodSpec{
		ServiceAccountName: account,
		PriorityClassName:  PriorityClassName,
		Containers:         containers,
		NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
		Tolerations:        []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
	}
	if c.HostNetwork != "" {
		spec.HostNetwork = true
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	if secrets := c.property(PropertyImagePullSecrets); secrets != "" {
		for _, name := range strings.Split(secrets, ",") {
			spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
		}
	}
	if placement != nil {
		for _, k := range slices.Sorted(maps.Keys(placement.NodeSelector)) {
			spec.NodeSelector[k] = placement.NodeSelector[k]
		}
		spec.Tolerations = append(spec.Tolerations, placement.Tolerations...)
		if placement.Affinity != nil {
			spec.Affinity = placement.Affinity.DeepCopy()
		}
	}
	return spec
}

func podLabels(component string) map[string]string {
	return map[string]string{v1.AppLabel: component, PrometheusLabel: "true"}
}

func deployment(c *DeploymentConfig, component string, replicas int32, account string, placement *v1.NodePlacement, ctr corev1.Container) *appsv1.Deployment {
	spec := podSpec(c, account, placement, ctr)
	spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)}
	if spec.Affinity == nil {
		// Spread the replicas over nodes where possible.
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 1,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: v1.AppLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{component},
					}}},
					TopologyKey: corev1.LabelHostname,
				},
			}},
		}}
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"},
		ObjectMeta: objectMeta(c, component, component, c.Namespace),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{v1.AppLabel: component}},
			Strategy: rollout(c.HostNetwork != ""),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Name: component, Labels: podLabels(component), Annotations: scrapeAnnotations(component)},
				Spec:       spec,
			},
		},
	}
}

// Host paths the node agent needs.
const (
	HostShareDir    = "/var/run/kubevirt"         // launcher command sockets (podtemplate's share dir)
	HostPrivateDir  = "/var/run/kubevirt-private" // per-VMI private state
	HostKubeletPods = "/var/lib/kubelet/pods"     // launcher pods' volumes (disks, sockets)
	HostSeccomp     = "/var/lib/kubelet/seccomp"  // Localhost seccomp profiles: the node agent installs the launcher pods'

	HostKubeletRoot   = "/var/lib/kubelet"                // read only: the kubelet's cpu_manager_state
	HostDevicePlugins = "/var/lib/kubelet/device-plugins" // /dev/kvm, tun and vhost-net device plugins

	handlerServerCertDir = "/etc/virt-handler/servercertificates"
	handlerCADir         = "/etc/virt-handler/clientcertificates"
	// handlerClientCertDir holds the client certificate the node agent's
	// migration proxy presents to other nodes' agents
	// (MigrationClientCertSecretName: not the REST API's client identity,
	// which virt-handler does not hold).
	handlerClientCertDir = "/etc/virt-handler/migrationcertificates"
)

func handlerDaemonSet(c *DeploymentConfig, placement *v1.NodePlacement, verbosity string) *appsv1.DaemonSet {
	// Flags of cmd/virt-handler.
	args := []string{
		"--hostname-override=$(NODE_NAME)",
		"--port=" + strconv.Itoa(HandlerHTTPPort),
		"--console-server-port=" + strconv.Itoa(HandlerConsolePort),
		"--kubevirt-share-dir=" + HostShareDir,
		"--tls-cert-file=" + handlerServerCertDir + "/" + corev1.TLSCertKey,
		"--tls-key-file=" + handlerServerCertDir + "/" + corev1.TLSPrivateKeyKey,
		"--client-ca-file=" + handlerCADir + "/" + CABundleKey,
		// Live migration: the proxy listens on the pod's IP (the node's on
		// the host network), as KubeVirt's --pod-ip-address, and presents
		// the migration proxy's client certificate; source agents check a
		// target's address against the virt-handler pods of this namespace.
		"--pod-ip-address=$(MY_POD_IP)",
		"--migration-client-cert-file=" + handlerClientCertDir + "/" + corev1.TLSCertKey,
		"--migration-client-key-file=" + handlerClientCertDir + "/" + corev1.TLSPrivateKeyKey,
	}
	if c.HostNetwork != "" {
		args = append(args, "--listen-address="+c.HostNetwork)
	}
	ctr := container(c, v1.VirtHandlerValue, append(args, verbosity),
		corev1.ContainerPort{Name: "metrics", ContainerPort: HandlerHTTPPort, Protocol: corev1.ProtocolTCP},
		corev1.ContainerPort{Name: "console", ContainerPort: HandlerConsolePort, Protocol: corev1.ProtocolTCP})
	ctr.Env = append([]corev1.EnvVar{{
		Name:      "NODE_NAME",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}},
	}, {
		Name:      "MY_POD_IP",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}},
	}}, ctr.Env...)
	// KubeVirt's requests, and a memory limit, which KubeVirt does not set.
	// The agent holds the VMIs of its node in its informers, a client per
	// launcher, and copy buffers for the console, VNC and migration
	// streams it relays (docs/performance.md measured 97 MiB RSS for the
	// agent, the controllers and a test kubelet together in one process).
	// 1Gi, three times the request, leaves room for many VMIs with
	// consoles and migrations in flight, while a runaway (an endless answer
	// from a launcher, #35 N4) restarts the agent alone instead of pushing
	// the node into its OOM killer.
	ctr.Resources = requests(10, 325<<20)
	ctr.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: quantity(handlerMemoryLimit, resource.BinarySI)}
	// The node agent creates devices, cgroups and mounts for the domains of
	// its node: it is the one privileged component (as KubeVirt's).
	ctr.SecurityContext = &corev1.SecurityContext{Privileged: ptr(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	// The agent mounts nothing itself: it only has to see the mounts the
	// kubelet and the runtime make later under the launcher pods'
	// directories (volumes, claims), which HostToContainer propagates.
	// Bidirectional (KubeVirt's) would also carry any mount made in the
	// privileged container back to the host.
	hostToContainer := corev1.MountPropagationHostToContainer
	var volumes []corev1.Volume
	for _, m := range []struct {
		name, path  string
		propagation *corev1.MountPropagationMode
		readOnly    bool
	}{
		{"virt-share-dir", HostShareDir, &hostToContainer, false},
		{"virt-private-dir", HostPrivateDir, nil, false},
		// The kubelet's directory, for its CPU manager's state (the node's
		// kubevirt.io/cpumanager label), as KubeVirt mounts it; the pods
		// directory below it is mounted writable on its own.
		{"kubelet", HostKubeletRoot, &hostToContainer, true},
		{"kubelet-pods", HostKubeletPods, &hostToContainer, false},
		{"seccomp", HostSeccomp, nil, false},
		{"device-plugin", HostDevicePlugins, nil, false},
	} {
		volumes = append(volumes, corev1.Volume{Name: m.name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: m.path, Type: &dirOrCreate}}})
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: m.name, MountPath: m.path, MountPropagation: m.propagation, ReadOnly: m.readOnly})
	}
	// The REST API's certificate and the CA its clients' certificates chain to (see EnsureCertificates).
	volumes = append(volumes,
		corev1.Volume{Name: "server-certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: HandlerServerCertSecretName}}},
		corev1.Volume{Name: "client-certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: MigrationClientCertSecretName}}},
		corev1.Volume{Name: "ca-bundle", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: CABundleConfigMapName}}}})
	ctr.VolumeMounts = append(ctr.VolumeMounts,
		corev1.VolumeMount{Name: "server-certs", MountPath: handlerServerCertDir, ReadOnly: true},
		corev1.VolumeMount{Name: "client-certs", MountPath: handlerClientCertDir, ReadOnly: true},
		corev1.VolumeMount{Name: "ca-bundle", MountPath: handlerCADir, ReadOnly: true})
	spec := podSpec(c, HandlerServiceAccount, placement, ctr)
	spec.Volumes = volumes
	// Earlier versions of virt-controller's node controller tainted a node
	// whose agent stopped heartbeating kubevirt.io/schedulable=false:
	// NoSchedule (the current one removes it): the agent must be able to
	// come back to such a node to heartbeat again.
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
		Key: v1.NodeSchedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
	})
	// The agent wires each VM's interfaces in its launcher pod's network
	// namespace, which it finds as /proc/<launcher PID>/ns/net: it must see
	// the node's processes (as KubeVirt's virt-handler does).
	spec.HostPID = true
	maxUnavailable := intstr.FromInt32(1)
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "DaemonSet"},
		ObjectMeta: objectMeta(c, v1.VirtHandlerValue, v1.VirtHandlerValue, c.Namespace),
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{v1.AppLabel: v1.VirtHandlerValue}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Name: v1.VirtHandlerValue, Labels: podLabels(v1.VirtHandlerValue), Annotations: scrapeAnnotations(v1.VirtHandlerValue)},
				Spec:       spec,
			},
		},
	}
}

// rollout is a Deployment's update strategy. On the host network a new pod
// cannot start beside the old one on the same node (they would share the
// ports), so an update replaces one pod at a time without a surge.
func rollout(hostNetwork bool) appsv1.DeploymentStrategy {
	if !hostNetwork {
		return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
	}
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	return appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &one},
	}
}
