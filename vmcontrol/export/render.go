package export

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	exportv1 "github.com/vmkit/vmkit/vmapi/export/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Names, labels, ports and paths of what the controller creates (KubeVirt's,
// so KubeVirt's virtctl finds the Service by name and its pods by label).
const (
	// ServiceLabel on an export server pod selects it for its Service.
	ServiceLabel = "kubevirt.io.virt-export-service"
	// ServicePort is the Service's HTTPS port; the server listens on
	// ServerPort.
	ServicePort = 443
	ServerPort  = 8443
	// ReadinessPath answers 200 once the server listens.
	ReadinessPath = "/exportready"
	// ManifestsPath and SecretManifestPath serve the VM's manifests and the
	// token header Secret, under /internal and /external.
	ManifestsPath      = "/manifests/all"
	SecretManifestPath = "/manifests/secret"
	// ContentTypeAnnotation is CDI's content type of a claim; "kubevirt"
	// (or empty) means the claim holds a disk image (disk.img).
	ContentTypeAnnotation = "cdi.kubevirt.io/storage.contentType"

	namePrefix          = "virt-export"
	fileSystemMountPath = "/export-volumes"
	blockMountPath      = "/dev/export-volumes"
	manifestDataPath    = "/manifest_data"
	qemuID              = 107 // the launcher's user, which owns disk.img
	maxNameLength       = 63  // a DNS-1035 label: Service names
)

// shortName is prefix-name, or prefix-<start of name>-<hash> when that is
// longer than a DNS label, as KubeVirt's naming.GetName.
func shortName(prefix, name string) string {
	full := prefix + "-" + name
	if len(full) <= maxNameLength {
		return full
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:10]
	keep := maxNameLength - len(prefix) - len(hash) - 2
	return strings.TrimRight(prefix+"-"+name[:keep], "-.") + "-" + hash
}

// ServiceName is the name of an export's Service and server pod.
func ServiceName(export *exportv1.VirtualMachineExport) string {
	return shortName(namePrefix, export.Name)
}

// DefaultTokenSecretName is the token Secret the controller creates for an
// export without spec.tokenSecretRef (KubeVirt's export-token-<name>).
func DefaultTokenSecretName(export *exportv1.VirtualMachineExport) string {
	return shortName("export-token", export.Name)
}

func tlsSecretName(export *exportv1.VirtualMachineExport) string {
	return shortName("virt-export-tls", export.Name)
}

func manifestConfigMapName(export *exportv1.VirtualMachineExport) string {
	return shortName("exporter-vm-manifest", export.Name)
}

// ExpirationTime is when the export is deleted: its creation plus
// spec.ttlDuration or DefaultDurationTTL.
func ExpirationTime(export *exportv1.VirtualMachineExport) time.Time {
	ttl := exportv1.DefaultDurationTTL
	if export.Spec.TTLDuration != nil {
		ttl = export.Spec.TTLDuration.Duration
	}
	return export.CreationTimestamp.Add(ttl)
}

// ownerRef makes the export the controller of what it creates, so garbage
// collection removes them with it. blockOwnerDeletion stays off: it would
// need update on the export's finalizers, as KubeVirt notes.
func ownerRef(export *exportv1.VirtualMachineExport) metav1.OwnerReference {
	ref := metav1.NewControllerRef(export, exportv1.VirtualMachineExportGroupVersionKind)
	ref.BlockOwnerDeletion = ptr.To(false)
	return *ref
}

func objectMeta(export *exportv1.VirtualMachineExport, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: export.Namespace,
		Labels:          map[string]string{v1.AppLabel: exportv1.App, ServiceLabel: ServiceName(export)},
		OwnerReferences: []metav1.OwnerReference{ownerRef(export)},
	}
}

// renderService is the export's Service: 443 to the server's 8443.
func renderService(export *exportv1.VirtualMachineExport) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(export, ServiceName(export)),
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{ServiceLabel: ServiceName(export)},
			Ports: []corev1.ServicePort{{
				Name: "export", Protocol: corev1.ProtocolTCP, Port: ServicePort,
				TargetPort: intstr.FromInt32(ServerPort),
			}},
		},
	}
}

// exportVolume is a claim the server serves.
type exportVolume struct {
	claim *corev1.PersistentVolumeClaim
	// diskImage: the claim holds a disk image (a VM's disk, a Block claim,
	// or CDI's kubevirt content type), served raw and gzip; otherwise its
	// files are served as tar.gz and as a directory listing.
	diskImage bool
}

func isBlock(claim *corev1.PersistentVolumeClaim) bool {
	return claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock
}

// volumeURIs are the server paths of a volume, by format.
func volumeURIs(vol exportVolume) map[exportv1.ExportVolumeFormat]string {
	base := "/volumes/" + vol.claim.Name
	if vol.diskImage || isBlock(vol.claim) {
		return map[exportv1.ExportVolumeFormat]string{exportv1.KubeVirtRaw: base + "/disk.img", exportv1.KubeVirtGz: base + "/disk.img.gz"}
	}
	return map[exportv1.ExportVolumeFormat]string{exportv1.ArchiveGz: base + "/disk.tar.gz", exportv1.Dir: base + "/dir/"}
}

// formatOrder is the order of formats in the status links (KubeVirt's).
var formatOrder = []exportv1.ExportVolumeFormat{exportv1.KubeVirtRaw, exportv1.KubeVirtGz, exportv1.Dir, exportv1.ArchiveGz}

// podConfig is what renderPod needs besides the export.
type podConfig struct {
	image         string
	tokenSecret   string
	deadline      time.Time
	volumes       []exportVolume
	manifests     bool // a VM source: serve its manifests
	pullPolicy    corev1.PullPolicy
	resourceLimit corev1.ResourceList
}

// renderPod is the export server pod: the claims read-only (Block claims as
// devices), the serving pair and the token from Secrets, the manifest data
// from a ConfigMap, and the server's environment (KubeVirt's variables).
func renderPod(export *exportv1.VirtualMachineExport, cfg podConfig) *corev1.Pod {
	env := []corev1.EnvVar{
		{Name: "CERT_FILE", Value: "/cert/tls.crt"},
		{Name: "KEY_FILE", Value: "/cert/tls.key"},
		{Name: "TOKEN_FILE", Value: "/token/token"},
		{Name: "DEADLINE", Value: cfg.deadline.UTC().Format(time.RFC3339)},
	}
	if cfg.manifests {
		env = append(env, corev1.EnvVar{Name: "EXPORT_VM_DEF_URI", Value: ManifestsPath},
			corev1.EnvVar{Name: "EXPORT_SECRET_DEF_URI", Value: SecretManifestPath})
	}
	container := corev1.Container{
		Name:            "exporter",
		Image:           cfg.image,
		ImagePullPolicy: cfg.pullPolicy,
		Ports:           []corev1.ContainerPort{{Name: "export", ContainerPort: ServerPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Scheme: corev1.URISchemeHTTPS, Path: ReadinessPath, Port: intstr.FromInt32(ServerPort),
			}},
			PeriodSeconds: 1,
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "certificates", MountPath: "/cert", ReadOnly: true},
			{Name: "token", MountPath: "/token", ReadOnly: true},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		Resources: corev1.ResourceRequirements{Limits: cfg.resourceLimit},
	}
	pod := &corev1.Pod{
		ObjectMeta: objectMeta(export, ServiceName(export)),
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](qemuID),
				RunAsGroup:     ptr.To[int64](qemuID),
				FSGroup:        ptr.To[int64](qemuID),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: []corev1.Volume{
				{Name: "certificates", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tlsSecretName(export)}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: cfg.tokenSecret}}},
			},
		},
	}
	for k, v := range export.Labels {
		if _, taken := pod.Labels[k]; !taken {
			pod.Labels[k] = v
		}
	}
	if len(export.Annotations) > 0 {
		pod.Annotations = map[string]string{}
		for k, v := range export.Annotations {
			pod.Annotations[k] = v
		}
	}
	if cfg.manifests {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "manifest-data", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: manifestConfigMapName(export)}},
		}})
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "manifest-data", MountPath: manifestDataPath, ReadOnly: true})
	}
	for i, vol := range cfg.volumes {
		name := "volume-" + fmt.Sprint(i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: vol.claim.Name, ReadOnly: true},
		}})
		var mountPoint string
		if isBlock(vol.claim) {
			mountPoint = path.Join(blockMountPath, vol.claim.Name)
			container.VolumeDevices = append(container.VolumeDevices, corev1.VolumeDevice{Name: name, DevicePath: mountPoint})
		} else {
			mountPoint = path.Join(fileSystemMountPath, vol.claim.Name)
			container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: mountPoint, ReadOnly: true})
		}
		prefix := fmt.Sprintf("VOLUME%d_EXPORT_", i)
		env = append(env, corev1.EnvVar{Name: prefix + "PATH", Value: mountPoint})
		uris := volumeURIs(vol)
		for _, f := range formatOrder {
			if uri, ok := uris[f]; ok {
				env = append(env, corev1.EnvVar{Name: prefix + formatEnv[f], Value: uri})
			}
		}
	}
	container.Env = env
	pod.Spec.Containers = []corev1.Container{container}
	return pod
}

// formatEnv is the environment variable suffix of each format's URI.
var formatEnv = map[exportv1.ExportVolumeFormat]string{
	exportv1.KubeVirtRaw: "RAW_URI", exportv1.KubeVirtGz: "RAW_GZIP_URI",
	exportv1.Dir: "DIR_URI", exportv1.ArchiveGz: "ARCHIVE_URI",
}

// renderManifestData is the ConfigMap the server reads the VM's manifests
// from: the VM (without status and server-set metadata), the internal host
// and a ConfigMap holding the CA, and the export's name.
func renderManifestData(export *exportv1.VirtualMachineExport, vm *v1.VirtualMachine, caBundle string) (*corev1.ConfigMap, error) {
	clean := &v1.VirtualMachine{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace, Labels: vm.Labels, Annotations: vm.Annotations,
		},
		Spec: *vm.Spec.DeepCopy(),
	}
	vmJSON, err := json.Marshal(clean)
	if err == nil {
		// Without the status the struct always encodes ("status":{}).
		var m map[string]any
		if err = json.Unmarshal(vmJSON, &m); err == nil {
			delete(m, "status")
			vmJSON, err = json.Marshal(m)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("encoding VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	caCM := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "export-ca-cm-" + export.Name},
		Data:       map[string]string{"ca.pem": caBundle},
	}
	caJSON, err := json.Marshal(caCM)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: objectMeta(export, manifestConfigMapName(export)),
		Data: map[string]string{
			"virtualmachine-manifest": string(vmJSON),
			"internal_host":           internalHost(export),
			"internal_ca_cm":          string(caJSON),
			"export-name":             export.Name,
		},
	}
	return cm, nil
}

// internalHost is the Service's cluster DNS name, the internal links' host.
func internalHost(export *exportv1.VirtualMachineExport) string {
	return ServiceName(export) + "." + export.Namespace + ".svc"
}

// internalLinks are the status links through the Service.
func internalLinks(export *exportv1.VirtualMachineExport, volumes []exportVolume, manifests bool, caBundle string) *exportv1.VirtualMachineExportLink {
	base := "https://" + internalHost(export)
	link := &exportv1.VirtualMachineExportLink{Cert: caBundle}
	for _, vol := range volumes {
		ev := exportv1.VirtualMachineExportVolume{Name: vol.claim.Name}
		uris := volumeURIs(vol)
		for _, f := range formatOrder {
			if uri, ok := uris[f]; ok {
				ev.Formats = append(ev.Formats, exportv1.VirtualMachineExportVolumeFormat{Format: f, Url: base + uri})
			}
		}
		link.Volumes = append(link.Volumes, ev)
	}
	if manifests {
		link.Manifests = []exportv1.VirtualMachineExportManifest{
			{Type: exportv1.AllManifests, Url: base + "/internal" + ManifestsPath},
			{Type: exportv1.AuthHeader, Url: base + "/internal" + SecretManifestPath},
		}
	}
	return link
}
