package installstrategy

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/vmapi/crds"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The operator's own installation.
const (
	// OperatorServiceAccount is virt-operator's service account (KubeVirt's name).
	OperatorServiceAccount = "kubevirt-operator"
	// OperatorHTTPPort serves virt-operator's /metrics, /healthz and
	// /readyz (HTTPS, a self-signed certificate).
	OperatorHTTPPort = 8187
)

// OperatorConfig is what the operator's own installation is generated from:
// what a user applies before creating a KubeVirt CR.
type OperatorConfig struct {
	// Namespace of the operator and of what it installs (default kubevirt).
	Namespace string
	// Image of virt-operator, e.g. quay.io/vmkit/virt-operator:v0.1.0; the
	// other components' images are named after it (see ConfigFromEnv).
	Image string
	// Version is the components' version (EnvVersion): needed when Image
	// names the operator by digest, which carries no tag.
	Version string
	// Digests pin the other components' images (keys: virt-api,
	// virt-controller, virt-handler, virt-launcher; values sha256:...),
	// passed as EnvAPIDigest and the others: what a release's manifest
	// holds, so that every node runs exactly the images released.
	Digests map[string]string
	// ImagePullPolicy of the operator and the components (IfNotPresent when empty).
	ImagePullPolicy corev1.PullPolicy
	// Replicas of the operator's Deployment (default 2, or 1 with HostNetwork,
	// where two replicas on one node would share a port).
	Replicas int32
	// HostNetwork and WithoutVirtAPI become the operator's EnvHostNetwork
	// and EnvWithoutVirtAPI, so every strategy it installs has them
	// (WithoutVirtAPI only for clusters where another virt-api serves
	// subresources.kubevirt.io).
	HostNetwork    string
	WithoutVirtAPI bool
	// Env is set in the operator's container besides the variables above,
	// e.g. KV_IO_EXTRA_ENV_* for the components (see EnvPassthroughPrefix).
	Env map[string]string
}

// OperatorObjects returns the operator's own installation, in apply order:
// its Namespace, the KubeVirt CRD, its ServiceAccount, ClusterRole and
// binding, Roles and bindings in its namespace and kube-system
// (OperatorRules), the bindings to system:auth-delegator and
// extension-apiserver-authentication-reader its /metrics needs (delegated
// authentication and authorization), and its Deployment.
func OperatorObjects(cfg OperatorConfig) ([]Object, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	ref, err := parseImage(cfg.Image)
	if err != nil {
		return nil, fmt.Errorf("installstrategy: operator image: %w", err)
	}
	if ref.tag == "" && cfg.Version == "" {
		return nil, fmt.Errorf("installstrategy: operator image %q has no tag: set the version", cfg.Image)
	}
	for _, component := range slices.Sorted(maps.Keys(cfg.Digests)) {
		if _, ok := DigestEnv[component]; !ok {
			return nil, fmt.Errorf("installstrategy: digests: %q is not virt-api, virt-controller, virt-handler, virt-launcher or virt-exportserver", component)
		}
		if err := checkDigest(cfg.Digests[component]); err != nil {
			return nil, fmt.Errorf("installstrategy: digests[%s]: %w", component, err)
		}
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 2
		if cfg.HostNetwork != "" {
			cfg.Replicas = 1
		}
	}
	pullPolicy := cfg.ImagePullPolicy
	if pullPolicy == "" {
		pullPolicy = corev1.PullIfNotPresent
	}
	meta := func(name, namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{v1.AppLabel: v1.VirtOperatorValue}}
	}
	all, err := crds.All()
	if err != nil {
		return nil, fmt.Errorf("installstrategy: %w", err)
	}
	var kvCRD *apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		if crd.Name == crds.KubeVirt {
			kvCRD = crd
		}
	}
	if kvCRD == nil {
		return nil, fmt.Errorf("installstrategy: no %s CRD", crds.KubeVirt)
	}
	kvCRD.TypeMeta = metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"}
	kvCRD.Labels = mergeMaps(kvCRD.Labels, meta("", "").Labels)

	env := []corev1.EnvVar{
		{Name: EnvOperatorImage, Value: cfg.Image},
		{Name: EnvTargetInstallNamespace, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
	}
	if cfg.ImagePullPolicy != "" {
		env = append(env, corev1.EnvVar{Name: EnvTargetImagePullPolicy, Value: string(cfg.ImagePullPolicy)})
	}
	if cfg.Version != "" {
		env = append(env, corev1.EnvVar{Name: EnvVersion, Value: cfg.Version})
	}
	for _, component := range slices.Sorted(maps.Keys(cfg.Digests)) {
		env = append(env, corev1.EnvVar{Name: DigestEnv[component], Value: cfg.Digests[component]})
	}
	if cfg.HostNetwork != "" {
		env = append(env, corev1.EnvVar{Name: EnvHostNetwork, Value: cfg.HostNetwork})
	}
	if cfg.WithoutVirtAPI {
		env = append(env, corev1.EnvVar{Name: EnvWithoutVirtAPI, Value: "true"})
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Env)) {
		env = append(env, corev1.EnvVar{Name: name, Value: cfg.Env[name]})
	}
	health := func(path string) *corev1.Probe {
		return probe(&corev1.HTTPGetAction{Scheme: corev1.URISchemeHTTPS, Host: cfg.HostNetwork, Port: intstr.FromInt32(OperatorHTTPPort), Path: path}, 5, 10)
	}
	ctr := corev1.Container{
		Name:            v1.VirtOperatorValue,
		Image:           cfg.Image,
		ImagePullPolicy: pullPolicy,
		Command:         []string{v1.VirtOperatorValue},
		Args:            []string{"--metrics-address=" + cfg.HostNetwork + ":" + strconv.Itoa(OperatorHTTPPort), "-v=2"},
		Env:             env,
		Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: OperatorHTTPPort, Protocol: corev1.ProtocolTCP}},
		Resources:       requests(10, 150<<20),
		ReadinessProbe:  health("/readyz"),
		LivenessProbe:   health("/healthz"),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	spec := corev1.PodSpec{
		ServiceAccountName: OperatorServiceAccount,
		Containers:         []corev1.Container{ctr},
		NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
		Tolerations:        []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
		SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)},
	}
	if cfg.HostNetwork != "" {
		spec.HostNetwork = true
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	perms, err := OperatorRules(cfg.Namespace)
	if err != nil {
		return nil, err
	}
	selector := map[string]string{v1.AppLabel: v1.VirtOperatorValue}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: OperatorServiceAccount, Namespace: cfg.Namespace}}
	return []Object{
		&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: meta(cfg.Namespace, "")},
		kvCRD,
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(OperatorServiceAccount, cfg.Namespace)},
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
			ObjectMeta: meta(OperatorServiceAccount, ""),
			Rules:      perms.Cluster,
		},
		clusterRoleBinding(meta(OperatorServiceAccount, ""), OperatorServiceAccount, subject),
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
			ObjectMeta: meta(OperatorServiceAccount, cfg.Namespace),
			Rules:      perms.Namespace,
		},
		roleBinding(meta(OperatorServiceAccount, cfg.Namespace), "Role", OperatorServiceAccount, subject),
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
			ObjectMeta: meta(OperatorServiceAccount, "kube-system"),
			Rules:      perms.KubeSystem,
		},
		roleBinding(meta(OperatorServiceAccount, "kube-system"), "Role", OperatorServiceAccount, subject),
		clusterRoleBinding(meta(OperatorServiceAccount+"-"+sanitize(authDelegator), ""), authDelegator, subject),
		roleBinding(meta(OperatorServiceAccount+"-"+sanitize(authenticationReader), "kube-system"), "Role", authenticationReader, subject),
		&appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"},
			ObjectMeta: meta(v1.VirtOperatorValue, cfg.Namespace),
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr(cfg.Replicas),
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Strategy: rollout(cfg.HostNetwork != ""),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels(v1.VirtOperatorValue), Annotations: scrapeAnnotations(v1.VirtOperatorValue)},
					Spec:       spec,
				},
			},
		},
	}, nil
}

// OperatorPermissions are virt-operator's permissions, least privilege:
// cluster-wide only what is cluster-scoped or lives in users' namespaces,
// the rest in its own namespace, and `bind` only on the roles an
// installation binds.
type OperatorPermissions struct {
	// Cluster is the ClusterRole: the KubeVirt API (the CRs, their status
	// and finalizers; VMs and VMIs in every namespace, which uninstall
	// removes), the cluster-scoped kinds a strategy holds (CRDs,
	// PriorityClasses, APIServices, admission configurations, ClusterRoles
	// and ClusterRoleBindings), events, reading Namespaces, `escalate` on
	// roles (so it may grant the components permissions it does not hold;
	// Kubernetes checks `escalate` on a create without the role's name, so
	// it cannot be limited to names) and `bind` on the ClusterRoles an
	// installation binds, by name.
	Cluster []rbacv1.PolicyRule
	// Namespace is the Role in the operator's (and installation's)
	// namespace: ServiceAccounts, Services, Secrets (certificates),
	// ConfigMaps (CA bundle, dumped strategies), Deployments, DaemonSets,
	// PodDisruptionBudgets, NetworkPolicies, Jobs (strategy dumps), Roles and RoleBindings (`bind` on the Roles an
	// installation binds there, by name), its leader Lease, and the
	// Prometheus Operator's kinds where they exist.
	Namespace []rbacv1.PolicyRule
	// KubeSystem is the Role in kube-system: RoleBindings, and `bind` on
	// the existing Roles an installation binds its accounts to there
	// (extension-apiserver-authentication-reader for virt-api).
	KubeSystem []rbacv1.PolicyRule
}

// OperatorRules returns virt-operator's permissions for an installation in
// namespace. The role names it may bind are those of the strategy
// Generate returns for that namespace with every optional binding
// (bindingsConfig).
func OperatorRules(namespace string) (OperatorPermissions, error) {
	s, err := Generate(bindingsConfig(namespace))
	if err != nil {
		return OperatorPermissions{}, err
	}
	var clusterRoles, roles, kubeSystemRoles []string
	for _, b := range s.ClusterRoleBindings {
		clusterRoles = appendNew(clusterRoles, b.RoleRef.Name)
	}
	for _, b := range s.RoleBindings {
		switch {
		case b.RoleRef.Kind == "ClusterRole":
			clusterRoles = appendNew(clusterRoles, b.RoleRef.Name)
		case b.Namespace == "kube-system":
			kubeSystemRoles = appendNew(kubeSystemRoles, b.RoleRef.Name)
		default:
			roles = appendNew(roles, b.RoleRef.Name)
		}
	}
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	bind := func(resource string, names []string) rbacv1.PolicyRule {
		r := rule("rbac.authorization.k8s.io", []string{resource}, "bind")
		r.ResourceNames = names
		return r
	}
	p := OperatorPermissions{
		Cluster: []rbacv1.PolicyRule{
			rule(v1.GroupName, []string{"kubevirts", "kubevirts/status", "kubevirts/finalizers",
				"virtualmachines", "virtualmachineinstances", "virtualmachineinstancereplicasets", "virtualmachineinstancemigrations"}, all...),
			rule("apiextensions.k8s.io", []string{"customresourcedefinitions", "customresourcedefinitions/status"}, all...),
			rule("scheduling.k8s.io", []string{"priorityclasses"}, all...),
			rule("", []string{"events"}, "create", "patch"),
			rule("", []string{"namespaces"}, "get"),
			rule("rbac.authorization.k8s.io", []string{"clusterroles", "clusterrolebindings"}, all...),
			rule("rbac.authorization.k8s.io", []string{"clusterroles", "roles"}, "escalate"),
			bind("clusterroles", clusterRoles),
			rule("apiregistration.k8s.io", []string{"apiservices"}, all...),
			rule("admissionregistration.k8s.io", []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings", "validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, all...),
		},
		Namespace: []rbacv1.PolicyRule{
			rule("", []string{"serviceaccounts", "services", "secrets", "configmaps"}, all...),
			// The components' pods: their image pulls are reported on the CR.
			rule("", []string{"pods"}, "get", "list", "watch"),
			rule("apps", []string{"deployments", "daemonsets"}, all...),
			rule("policy", []string{"poddisruptionbudgets"}, all...),
			rule("networking.k8s.io", []string{"networkpolicies"}, all...),
			rule("batch", []string{"jobs"}, all...),
			rule("rbac.authorization.k8s.io", []string{"roles", "rolebindings"}, all...),
			rule("coordination.k8s.io", []string{"leases"}, "get", "create", "update"),
			rule(MonitoringGroup, []string{"servicemonitors", "prometheusrules"}, all...),
		},
		KubeSystem: []rbacv1.PolicyRule{
			rule("rbac.authorization.k8s.io", []string{"rolebindings"}, all...),
		},
	}
	if len(roles) > 0 {
		p.Namespace = append(p.Namespace, bind("roles", roles))
	}
	if len(kubeSystemRoles) > 0 {
		p.KubeSystem = append(p.KubeSystem, bind("roles", kubeSystemRoles))
	}
	return p, nil
}

// bindingsConfig is a configuration of an installation in namespace whose
// strategy holds every role binding a KubeVirt CR can ask for: the metrics
// reader's is there only when the CR names Prometheus's namespace.
func bindingsConfig(namespace string) *DeploymentConfig {
	return &DeploymentConfig{Namespace: namespace, Registry: "registry", Version: "version",
		AdditionalProperties: map[string]string{PropertyMonitorNamespace: "monitoring"}}
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// OperatorManifest is OperatorObjects as a multi-document YAML file, what
// `virt-operator --dump-operator-manifest` prints and `kubectl apply -f` takes.
func OperatorManifest(cfg OperatorConfig) ([]byte, error) {
	objs, err := OperatorObjects(cfg)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString("# vmkit's virt-operator: apply this, then create a KubeVirt CR.\n")
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("installstrategy: %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	return buf.Bytes(), nil
}

// KubeVirtCRName is the name of the KubeVirt CR a release ships, KubeVirt's.
const KubeVirtCRName = "kubevirt"

// DefaultKubeVirt is the KubeVirt CR a release ships beside the operator's
// manifest (kubevirt-cr.yaml), as KubeVirt's does: named kubevirt, in
// namespace (default kubevirt), pulling images IfNotPresent, no feature
// gates, the components of the operator's own version and registry.
func DefaultKubeVirt(namespace string) *v1.KubeVirt {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return &v1.KubeVirt{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "KubeVirt"},
		ObjectMeta: metav1.ObjectMeta{Name: KubeVirtCRName, Namespace: namespace},
		Spec: v1.KubeVirtSpec{
			ImagePullPolicy: corev1.PullIfNotPresent,
			Configuration:   v1.KubeVirtConfiguration{DeveloperConfiguration: &v1.DeveloperConfiguration{FeatureGates: []string{}}},
		},
	}
}

// KubeVirtManifest is kv as a YAML file for `kubectl create -f`, without
// status.
func KubeVirtManifest(kv *v1.KubeVirt) ([]byte, error) {
	kv = kv.DeepCopy()
	kv.TypeMeta = metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "KubeVirt"}
	kv.Status = v1.KubeVirtStatus{}
	data, err := yaml.Marshal(kv)
	if err != nil {
		return nil, fmt.Errorf("installstrategy: KubeVirt %s/%s: %w", kv.Namespace, kv.Name, err)
	}
	return append([]byte("# vmkit: the KubeVirt CR from which virt-operator installs everything else.\n"), data...), nil
}
