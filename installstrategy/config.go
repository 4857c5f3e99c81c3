package installstrategy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Environment variables virt-operator reads its own configuration from, with
// KubeVirt's names.
const (
	// EnvOperatorImage is the operator's own image; the registry, image
	// prefix and version of the components are derived from it.
	EnvOperatorImage = "OPERATOR_IMAGE"
	// EnvTargetInstallNamespace is the namespace the components are installed in.
	EnvTargetInstallNamespace = "TARGET_INSTALL_NAMESPACE"
	// EnvTargetImagePullPolicy is the pull policy of the components' images.
	EnvTargetImagePullPolicy = "TARGET_IMAGE_PULL_POLICY"
	// EnvTargetDeploymentConfig holds a whole DeploymentConfig as JSON; when
	// set it wins over the other variables (the operator passes the resolved
	// configuration to the --dump-install-strategy Job this way).
	EnvTargetDeploymentConfig = "TARGET_DEPLOYMENT_CONFIG"
	// EnvVersion is the version of the components when EnvOperatorImage
	// names the operator by digest, which carries no tag.
	EnvVersion = "KUBEVIRT_VERSION"
	// EnvAPIDigest, EnvControllerDigest, EnvHandlerDigest and
	// EnvLauncherDigest pin the components' images by digest (sha256:...),
	// as a release's manifest does: the component's image is then
	// <registry>/<prefix><component>@<digest> rather than :<version>.
	EnvAPIDigest        = "VIRT_API_SHASUM"
	EnvControllerDigest = "VIRT_CONTROLLER_SHASUM"
	EnvHandlerDigest    = "VIRT_HANDLER_SHASUM"
	EnvLauncherDigest   = "VIRT_LAUNCHER_SHASUM"
	// EnvExportServerDigest pins the export server's image likewise.
	EnvExportServerDigest = "VIRT_EXPORTSERVER_SHASUM"
	// EnvHostNetwork, vmkit's own, puts every component's pod on the host
	// network with its servers listening on the address it holds (e.g.
	// 127.0.0.1): for single-node clusters without a pod network.
	EnvHostNetwork = "VMKIT_HOST_NETWORK"
	// EnvWithoutVirtAPI, vmkit's own, set to "true" leaves virt-api (its
	// Deployment, Service and APIService) out of the strategy: for
	// clusters where another virt-api serves subresources.kubevirt.io.
	// Unset, virt-api is installed.
	EnvWithoutVirtAPI = "VMKIT_WITHOUT_VIRT_API"
	// EnvPassthroughPrefix marks variables passed on to every component:
	// KV_IO_EXTRA_ENV_FOO=bar sets FOO=bar in each component's container.
	EnvPassthroughPrefix = "KV_IO_EXTRA_ENV_"
)

// Keys of DeploymentConfig.AdditionalProperties, filled from the KubeVirt CR.
const (
	// PropertyUseEmulation is "true" when guests may run under QEMU TCG.
	PropertyUseEmulation = "UseEmulation"
	// PropertyFeatureGates is the comma-separated, sorted list of the
	// KubeVirt feature gates turned on (the CR's
	// spec.configuration.developerConfiguration.featureGates), passed to
	// virt-controller as --feature-gates.
	PropertyFeatureGates = "FeatureGates"
	// PropertyCPUAllocationRatio is the CR's
	// spec.configuration.developerConfiguration.cpuAllocationRatio (vCPUs
	// per requested host CPU), passed to virt-controller as
	// --cpu-allocation-ratio; unset, virt-controller's default of 10.
	PropertyCPUAllocationRatio = "CPUAllocationRatio"
	// PropertyImagePullSecrets is a comma-separated list of secret names.
	PropertyImagePullSecrets = "ImagePullSecrets"
	// PropertyInfraReplicas is the replica count of virt-api and virt-controller.
	PropertyInfraReplicas = "InfraReplicas"
	// PropertyInfraPlacement and PropertyWorkloadsPlacement hold a
	// v1.NodePlacement as JSON.
	PropertyInfraPlacement     = "InfraPlacement"
	PropertyWorkloadsPlacement = "WorkloadsPlacement"
	// PropertyMonitorNamespace and PropertyMonitorAccount name Prometheus' service account.
	PropertyMonitorNamespace = "MonitorNamespace"
	PropertyMonitorAccount   = "MonitorAccount"
	// PropertyProductName, PropertyProductVersion and PropertyProductComponent
	// label the components (app.kubernetes.io/part-of, version, component).
	PropertyProductName      = "ProductName"
	PropertyProductVersion   = "ProductVersion"
	PropertyProductComponent = "ProductComponent"
	// PropertyUninstallStrategy is the CR's spec.uninstallStrategy.
	PropertyUninstallStrategy = "UninstallStrategy"
)

// DefaultNamespace is where the components go when no namespace is configured.
const DefaultNamespace = "kubevirt"

// DeploymentConfig is everything a strategy is generated from. Two configs
// with the same ID generate the same strategy.
type DeploymentConfig struct {
	// ID is a stable hash of every other field (see SetID).
	ID string `json:"id"`
	// Namespace the components are installed in.
	Namespace string `json:"namespace"`
	// Registry the images are pulled from, e.g. quay.io/kubevirt.
	Registry string `json:"registry"`
	// ImagePrefix is put before each component's image name.
	ImagePrefix string `json:"imagePrefix,omitempty"`
	// Version is the image tag of the components.
	Version string `json:"version"`
	// Digests (sha256:...) pin the components' images; an image with a
	// digest is referenced by it instead of by Version.
	OperatorDigest   string `json:"operatorDigest,omitempty"`
	APIDigest        string `json:"apiDigest,omitempty"`
	ControllerDigest string `json:"controllerDigest,omitempty"`
	HandlerDigest    string `json:"handlerDigest,omitempty"`
	LauncherDigest   string `json:"launcherDigest,omitempty"`
	// ExportServerDigest pins ExportServerComponent's image.
	ExportServerDigest string `json:"exportServerDigest,omitempty"`
	// ImagePullPolicy of the components (IfNotPresent when empty).
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// AdditionalProperties are settings of the KubeVirt CR that shape the
	// strategy; the keys are the Property* constants.
	AdditionalProperties map[string]string `json:"additionalProperties,omitempty"`
	// PassthroughEnv is set in every component's container.
	PassthroughEnv map[string]string `json:"passthroughEnv,omitempty"`
	// HostNetwork, when set, is an address of the nodes: every component's
	// pod and every launcher pod uses the host network, and the
	// components' servers listen on this address (see EnvHostNetwork).
	HostNetwork string `json:"hostNetwork,omitempty"`
	// WithoutVirtAPI leaves virt-api out, for clusters where another
	// virt-api serves subresources.kubevirt.io (see EnvWithoutVirtAPI).
	WithoutVirtAPI bool `json:"withoutVirtAPI,omitempty"`
}

// ComputeID returns the stable hash of every field but ID: the first 16 hex
// digits of the SHA-256 of the config's JSON (map keys sorted).
func (c *DeploymentConfig) ComputeID() string {
	cp := *c
	cp.ID = ""
	data, err := json.Marshal(&cp)
	if err != nil { // a struct of strings and string maps always marshals
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// SetID sets ID to ComputeID() and returns c.
func (c *DeploymentConfig) SetID() *DeploymentConfig {
	c.ID = c.ComputeID()
	return c
}

// Validate checks the fields Generate relies on.
func (c *DeploymentConfig) Validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("namespace is empty"))
	}
	if c.Registry == "" {
		errs = append(errs, errors.New("registry is empty"))
	}
	if c.Version == "" {
		errs = append(errs, errors.New("version is empty"))
	}
	switch c.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, fmt.Errorf("imagePullPolicy %q is not Always, IfNotPresent or Never", c.ImagePullPolicy))
	}
	if n, ok := c.AdditionalProperties[PropertyCPUAllocationRatio]; ok {
		if r, err := strconv.Atoi(n); err != nil || r < 1 {
			errs = append(errs, fmt.Errorf("additionalProperties[%s] %q is not a ratio of at least 1", PropertyCPUAllocationRatio, n))
		}
	}
	if n, ok := c.AdditionalProperties[PropertyInfraReplicas]; ok {
		if r, err := strconv.Atoi(n); err != nil || r < 0 {
			errs = append(errs, fmt.Errorf("additionalProperties[%s] %q is not a replica count", PropertyInfraReplicas, n))
		}
	}
	for _, key := range []string{PropertyInfraPlacement, PropertyWorkloadsPlacement} {
		if _, err := c.placement(key); err != nil {
			errs = append(errs, err)
		}
	}
	for field, d := range map[string]string{"operatorDigest": c.OperatorDigest, "apiDigest": c.APIDigest,
		"controllerDigest": c.ControllerDigest, "handlerDigest": c.HandlerDigest, "launcherDigest": c.LauncherDigest,
		"exportServerDigest": c.ExportServerDigest} {
		if err := checkDigest(d); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
	}
	if c.HostNetwork != "" && net.ParseIP(c.HostNetwork) == nil {
		errs = append(errs, fmt.Errorf("hostNetwork %q is not an IP address", c.HostNetwork))
	}
	if c.ID != "" && c.ID != c.ComputeID() {
		errs = append(errs, fmt.Errorf("id %q is not the hash of the config (%q)", c.ID, c.ComputeID()))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deployment config: %w", err)
	}
	return nil
}

// JSON returns the config as JSON, as KubeVirt's status.targetDeploymentConfig holds it.
func (c *DeploymentConfig) JSON() string {
	data, _ := json.Marshal(c)
	return string(data)
}

// ParseDeploymentConfig reads a config written by JSON and checks it.
func ParseDeploymentConfig(s string) (*DeploymentConfig, error) {
	c := &DeploymentConfig{}
	if err := json.Unmarshal([]byte(s), c); err != nil {
		return nil, fmt.Errorf("deployment config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// DigestEnv maps each component whose image a digest can pin to the
// variable that carries it (EnvAPIDigest, ...).
var DigestEnv = map[string]string{
	v1.VirtAPIValue:        EnvAPIDigest,
	v1.VirtControllerValue: EnvControllerDigest,
	v1.VirtHandlerValue:    EnvHandlerDigest,
	v1.VirtLauncherValue:   EnvLauncherDigest,
	ExportServerComponent:  EnvExportServerDigest,
}

// ExportServerComponent is the export server's image name (KubeVirt's
// virt-exportserver): virt-controller's VirtualMachineExport servers.
const ExportServerComponent = "virt-exportserver"

// checkDigest fails unless d is empty or sha256: and 64 lowercase hex digits.
func checkDigest(d string) error {
	if d == "" {
		return nil
	}
	hexPart, ok := strings.CutPrefix(d, "sha256:")
	if _, err := hex.DecodeString(hexPart); !ok || err != nil || len(hexPart) != 64 || strings.ToLower(hexPart) != hexPart {
		return fmt.Errorf("%q is not a digest (sha256: and 64 lowercase hexadecimal digits)", d)
	}
	return nil
}

// Image returns the reference of a component's image, e.g.
// quay.io/kubevirt/virt-api:v1.4.0 or quay.io/kubevirt/virt-api@sha256:....
// component is virt-operator, virt-api, virt-controller, virt-handler,
// virt-launcher or virt-exportserver.
func (c *DeploymentConfig) Image(component string) string {
	var digest string
	switch component {
	case v1.VirtOperatorValue:
		digest = c.OperatorDigest
	case v1.VirtAPIValue:
		digest = c.APIDigest
	case v1.VirtControllerValue:
		digest = c.ControllerDigest
	case v1.VirtHandlerValue:
		digest = c.HandlerDigest
	case v1.VirtLauncherValue:
		digest = c.LauncherDigest
	case ExportServerComponent:
		digest = c.ExportServerDigest
	}
	name := c.Registry + "/" + c.ImagePrefix + component
	if digest != "" {
		return name + "@" + digest
	}
	return name + ":" + c.Version
}

// PullPolicy returns ImagePullPolicy, IfNotPresent when empty.
func (c *DeploymentConfig) PullPolicy() corev1.PullPolicy {
	if c.ImagePullPolicy == "" {
		return corev1.PullIfNotPresent
	}
	return c.ImagePullPolicy
}

func (c *DeploymentConfig) property(key string) string { return c.AdditionalProperties[key] }

func (c *DeploymentConfig) placement(key string) (*v1.NodePlacement, error) {
	raw := c.AdditionalProperties[key]
	if raw == "" {
		return nil, nil
	}
	p := &v1.NodePlacement{}
	if err := json.Unmarshal([]byte(raw), p); err != nil {
		return nil, fmt.Errorf("additionalProperties[%s]: %w", key, err)
	}
	return p, nil
}

// ConfigFromEnv reads the operator's configuration from the environment
// (getenv is usually os.Getenv; environ, usually os.Environ, supplies the
// passthrough variables and may be nil). TARGET_DEPLOYMENT_CONFIG, when
// set, is the whole config; otherwise the registry, prefix and version come
// from OPERATOR_IMAGE, the namespace from TARGET_INSTALL_NAMESPACE (default
// kubevirt) and the pull policy from TARGET_IMAGE_PULL_POLICY.
func ConfigFromEnv(getenv func(string) string, environ []string) (*DeploymentConfig, error) {
	if raw := getenv(EnvTargetDeploymentConfig); raw != "" {
		c, err := ParseDeploymentConfig(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvTargetDeploymentConfig, err)
		}
		return c.SetID(), nil
	}
	image := getenv(EnvOperatorImage)
	if image == "" {
		return nil, fmt.Errorf("%s is not set", EnvOperatorImage)
	}
	ref, err := parseImage(image)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvOperatorImage, err)
	}
	c := &DeploymentConfig{
		Namespace:          getenv(EnvTargetInstallNamespace),
		Registry:           ref.registry,
		ImagePrefix:        ref.prefix,
		Version:            ref.tag,
		OperatorDigest:     ref.digest,
		ImagePullPolicy:    corev1.PullPolicy(getenv(EnvTargetImagePullPolicy)),
		HostNetwork:        getenv(EnvHostNetwork),
		APIDigest:          getenv(EnvAPIDigest),
		ControllerDigest:   getenv(EnvControllerDigest),
		HandlerDigest:      getenv(EnvHandlerDigest),
		LauncherDigest:     getenv(EnvLauncherDigest),
		ExportServerDigest: getenv(EnvExportServerDigest),
	}
	if v := getenv(EnvWithoutVirtAPI); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a boolean", EnvWithoutVirtAPI, v)
		}
		c.WithoutVirtAPI = b
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Version == "" {
		c.Version = getenv(EnvVersion)
	}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(name, EnvPassthroughPrefix) && len(name) > len(EnvPassthroughPrefix) {
			if c.PassthroughEnv == nil {
				c.PassthroughEnv = map[string]string{}
			}
			c.PassthroughEnv[strings.TrimPrefix(name, EnvPassthroughPrefix)] = value
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c.SetID(), nil
}

// featureGates joins gate names with commas, sorted and each once; blank
// names are dropped. A name with a comma or white space in it cannot be
// passed on and is an error.
func featureGates(gates []string) (string, error) {
	var names []string
	for _, g := range gates {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		if strings.ContainsAny(g, ", \t\n") {
			return "", fmt.Errorf("%q is not a feature gate name", g)
		}
		names = append(names, g)
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ","), nil
}

type imageRef struct{ registry, prefix, tag, digest string }

// parseImage splits registry/path/<prefix>virt-operator(:tag|@digest).
func parseImage(image string) (imageRef, error) {
	var ref imageRef
	slash := strings.LastIndex(image, "/")
	if slash <= 0 {
		return ref, fmt.Errorf("image %q has no registry", image)
	}
	ref.registry, image = image[:slash], image[slash+1:]
	if name, digest, ok := strings.Cut(image, "@"); ok {
		image, ref.digest = name, digest
	} else if name, tag, ok := strings.Cut(image, ":"); ok {
		image, ref.tag = name, tag
	}
	prefix, ok := strings.CutSuffix(image, v1.VirtOperatorValue)
	if !ok {
		return ref, fmt.Errorf("image name %q does not end in %s", image, v1.VirtOperatorValue)
	}
	ref.prefix = prefix
	return ref, nil
}

// ConfigForKubeVirt returns the config to install for a KubeVirt CR: the
// operator's own config with the CR's registry, tag and pull policy and the
// CR settings that shape the strategy as additional properties. Digests
// pin the operator's own version only, so they are dropped when the CR asks
// for another tag or registry.
func ConfigForKubeVirt(operator *DeploymentConfig, kv *v1.KubeVirt) (*DeploymentConfig, error) {
	c := *operator
	c.ID = ""
	c.AdditionalProperties = maps.Clone(operator.AdditionalProperties)
	c.PassthroughEnv = maps.Clone(operator.PassthroughEnv)
	spec := &kv.Spec
	if (spec.ImageTag != "" && spec.ImageTag != c.Version) || (spec.ImageRegistry != "" && spec.ImageRegistry != c.Registry) {
		c.OperatorDigest, c.APIDigest, c.ControllerDigest, c.HandlerDigest, c.LauncherDigest, c.ExportServerDigest = "", "", "", "", "", ""
	}
	if spec.ImageTag != "" {
		c.Version = spec.ImageTag
	}
	if spec.ImageRegistry != "" {
		c.Registry = spec.ImageRegistry
	}
	if spec.ImagePullPolicy != "" {
		c.ImagePullPolicy = spec.ImagePullPolicy
	}
	props := map[string]string{}
	set := func(key, value string) {
		if value != "" {
			props[key] = value
		}
	}
	if dc := spec.Configuration.DeveloperConfiguration; dc != nil {
		if dc.UseEmulation {
			set(PropertyUseEmulation, "true")
		}
		gates, err := featureGates(dc.FeatureGates)
		if err != nil {
			return nil, fmt.Errorf("KubeVirt %s/%s: spec.configuration.developerConfiguration.featureGates: %w", kv.Namespace, kv.Name, err)
		}
		set(PropertyFeatureGates, gates)
		switch r := dc.CPUAllocationRatio; {
		case r < 0:
			return nil, fmt.Errorf("KubeVirt %s/%s: spec.configuration.developerConfiguration.cpuAllocationRatio: %d is not a ratio of at least 1", kv.Namespace, kv.Name, r)
		case r > 0:
			set(PropertyCPUAllocationRatio, strconv.Itoa(r))
		}
	}
	var secrets []string
	for _, s := range spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	set(PropertyImagePullSecrets, strings.Join(secrets, ","))
	if spec.Infra != nil && spec.Infra.Replicas != nil {
		set(PropertyInfraReplicas, strconv.Itoa(int(*spec.Infra.Replicas)))
	}
	for key, cc := range map[string]*v1.ComponentConfig{PropertyInfraPlacement: spec.Infra, PropertyWorkloadsPlacement: spec.Workloads} {
		if cc != nil && cc.NodePlacement != nil {
			raw, err := json.Marshal(cc.NodePlacement)
			if err != nil {
				return nil, fmt.Errorf("KubeVirt %s/%s: %s: %w", kv.Namespace, kv.Name, key, err)
			}
			set(key, string(raw))
		}
	}
	set(PropertyMonitorNamespace, spec.MonitorNamespace)
	set(PropertyMonitorAccount, spec.MonitorAccount)
	set(PropertyProductName, spec.ProductName)
	set(PropertyProductVersion, spec.ProductVersion)
	set(PropertyProductComponent, spec.ProductComponent)
	set(PropertyUninstallStrategy, string(spec.UninstallStrategy))
	if len(props) > 0 && c.AdditionalProperties == nil {
		c.AdditionalProperties = map[string]string{}
	}
	maps.Copy(c.AdditionalProperties, props)
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("KubeVirt %s/%s: %w", kv.Namespace, kv.Name, err)
	}
	return c.SetID(), nil
}
