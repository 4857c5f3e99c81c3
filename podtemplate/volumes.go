package podtemplate

import (
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Names and paths of the pod's own volumes, KubeVirt's.
const (
	volPrivate        = "private"            // the launcher's private state
	volPublic         = "public"             // Config.ShareDir, shared with the node agent
	volSockets        = "sockets"            // ShareDir/sockets: the launcher's command socket
	volBinShare       = "virt-bin-share-dir" // the container-disk helper, copied out of the launcher image
	volLibvirtRuntime = "libvirt-runtime"    // libvirt's runtime directory
	volEphemeral      = "ephemeral-disks"    // Config.EphemeralDiskDir
	volContainerDisks = "container-disks"    // Config.ContainerDiskDir
	volHotplug        = "hotplug-disks"      // Config.HotplugDiskDir
	volHugepages      = "hugepages"          // hugetlbfs for a guest backed by huge pages
	volHugepagesDir   = "hugetblfs-dir"      // libvirt's directory on it (KubeVirt's spelling)
	volVMState        = "vm-state"           // the backend-storage claim, at VMStateDir

	privateDir        = "/var/run/kubevirt-private"
	libvirtRuntimeDir = "/var/run/libvirt"
	hugepagesDir      = "/dev/hugepages"
	hostDisksDir      = privateDir + "/vmi-disks"
	configMapDir      = privateDir + "/config-map"
	secretDir         = privateDir + "/secret"
	downwardAPIDir    = privateDir + "/downwardapi"
	sysprepDir        = privateDir + "/sysprep"
)

// isOwnVolumeName reports whether name is one of the pod's own volumes,
// which a VMI volume that becomes a pod volume must not use.
func isOwnVolumeName(name string) bool {
	switch name {
	case volPrivate, volPublic, volSockets, volBinShare, volLibvirtRuntime,
		volEphemeral, volContainerDisks, volHotplug, volHugepages, volHugepagesDir, volVMState:
		return true
	}
	return false
}

// podStorage is what the VMI's volumes add to the pod.
type podStorage struct {
	// volumes are pod volumes, in the VMI's order.
	volumes []corev1.Volume
	// mounts and devices are the compute container's.
	mounts  []corev1.VolumeMount
	devices []corev1.VolumeDevice
	// serviceAccount is the service account a serviceAccount volume names.
	serviceAccount string
}

// vmiStorage turns the VMI's volumes into pod volumes and compute mounts:
//
//   - persistentVolumeClaim, dataVolume and ephemeral: the claim, mounted at
//     /var/run/kubevirt-private/vmi-disks/<name>, or attached as /dev/<name>
//     when Config.ClaimVolumeMode says it is a block device; hotpluggable
//     claims are left to the node agent;
//   - hostDisk, only with Config.FeatureGates' HostDiskGate: the image's
//     directory on the node (hostPath), mounted there too, so that the image
//     is <dir>/<name>/<base name of hostDisk.path> in the pod; a directory
//     that would expose the node's system (DeniedHostDiskPath) is refused
//     even with the gate;
//   - configMap, secret, downwardAPI, sysprep: mounted read-only under
//     /var/run/kubevirt-private/<kind>/<name>, where the launcher builds the
//     ISO image the guest sees;
//   - cloudInitNoCloud and cloudInitConfigDrive with a secretRef: the Secret
//     as <name>-udata / <name>-ndata, its keys mounted under
//     /var/run/kubevirt-private/secret/<name>/;
//   - serviceAccount: no volume; the pod runs as that service account with
//     its token mounted;
//   - containerDisk, emptyDisk and inline cloud-init: no volume of their own.
//
// Every volume is checked first: its name, exactly one source, and the
// fields the pod needs. cfg supplies ClaimVolumeMode and FeatureGates. The
// volumes and mounts are appended to s's (sized by storageCounts, so that
// they need not grow).
func vmiStorage(f *guestFacts, spec *v1.VirtualMachineInstanceSpec, namespace string, cfg *Config, s *podStorage) error {
	claimMode := cfg.ClaimVolumeMode
	first := len(s.volumes)
	vols := spec.Volumes
	for i := range vols {
		vol := &vols[i]
		field := volField(i)
		if err := checkVolume(f, vols, i, field); err != nil {
			return err
		}
		src := &vol.VolumeSource
		switch {
		case src.PersistentVolumeClaim != nil:
			pvc := src.PersistentVolumeClaim
			if pvc.ClaimName == "" {
				return f.ref.errorf(field.at(".persistentVolumeClaim.claimName"), "required")
			}
			if pvc.Hotpluggable {
				continue
			}
			if err := s.addClaim(f, vol.Name, pvc.ClaimName, pvc.ReadOnly, namespace, field, ".persistentVolumeClaim", claimMode); err != nil {
				return err
			}
		case src.DataVolume != nil:
			if src.DataVolume.Name == "" {
				return f.ref.errorf(field.at(".dataVolume.name"), "required")
			}
			if src.DataVolume.Hotpluggable {
				continue
			}
			if err := s.addClaim(f, vol.Name, src.DataVolume.Name, false, namespace, field, ".dataVolume", claimMode); err != nil {
				return err
			}
		case src.Ephemeral != nil:
			pvc := src.Ephemeral.PersistentVolumeClaim
			if pvc == nil || pvc.ClaimName == "" {
				return f.ref.errorf(field.at(".ephemeral.persistentVolumeClaim.claimName"), "required")
			}
			if err := s.addClaim(f, vol.Name, pvc.ClaimName, pvc.ReadOnly, namespace, field, ".ephemeral.persistentVolumeClaim", claimMode); err != nil {
				return err
			}
		case src.HostDisk != nil:
			if !cfg.gateEnabled(HostDiskGate) {
				return f.ref.errorf(field.at(".hostDisk"), "the %s feature gate is not enabled (KubeVirt CR spec.configuration.developerConfiguration.featureGates)", HostDiskGate)
			}
			if err := s.addHostDisk(f, vol, field); err != nil {
				return err
			}
		case src.ConfigMap != nil:
			if src.ConfigMap.Name == "" {
				return f.ref.errorf(field.at(".configMap.name"), "required")
			}
			s.add(vol.Name, corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: src.ConfigMap.Name},
				Optional:             copyBool(src.ConfigMap.Optional),
			}}, configMapDir+"/"+vol.Name)
		case src.Secret != nil:
			if src.Secret.SecretName == "" {
				return f.ref.errorf(field.at(".secret.secretName"), "required")
			}
			s.add(vol.Name, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: src.Secret.SecretName,
				Optional:   copyBool(src.Secret.Optional),
			}}, secretDir+"/"+vol.Name)
		case src.DownwardAPI != nil:
			items := make([]corev1.DownwardAPIVolumeFile, len(src.DownwardAPI.Fields))
			for j := range src.DownwardAPI.Fields {
				src.DownwardAPI.Fields[j].DeepCopyInto(&items[j])
			}
			s.add(vol.Name, corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}, downwardAPIDir+"/"+vol.Name)
		case src.Sysprep != nil:
			if err := s.addSysprep(f, vol, field); err != nil {
				return err
			}
		case src.ServiceAccount != nil:
			name := src.ServiceAccount.ServiceAccountName
			if !isDNSSubdomain(name) {
				return f.ref.errorf(field.at(".serviceAccount.serviceAccountName"), "%q: %s", name, dnsSubdomainError(name))
			}
			if s.serviceAccount != "" && s.serviceAccount != name {
				return f.ref.errorf(field.at(".serviceAccount"), "a second service account (%q after %q); a pod runs as one", name, s.serviceAccount)
			}
			s.serviceAccount = name
		case src.CloudInitNoCloud != nil:
			c := src.CloudInitNoCloud
			if err := s.addCloudInitSecrets(f, vol.Name, c.UserDataSecretRef, c.NetworkDataSecretRef, field, ".cloudInitNoCloud"); err != nil {
				return err
			}
		case src.CloudInitConfigDrive != nil:
			c := src.CloudInitConfigDrive
			if err := s.addCloudInitSecrets(f, vol.Name, c.UserDataSecretRef, c.NetworkDataSecretRef, field, ".cloudInitConfigDrive"); err != nil {
				return err
			}
		case src.ContainerDisk != nil:
			if err := checkContainerDisk(f, vol, field); err != nil {
				return err
			}
		case src.EmptyDisk != nil:
			if src.EmptyDisk.Capacity.Sign() <= 0 {
				return f.ref.errorf(field.at(".emptyDisk.capacity"), "%s must be more than 0", src.EmptyDisk.Capacity.String())
			}
		}
	}
	return checkPodVolumeNames(f, spec, s.volumes[first:])
}

// backendStorage adds the VMI's backend-storage claim (its persistent TPM
// and EFI state), mounted at VMStateDir, when the VMI has persistent state;
// that needs the VMPersistentState feature gate.
func backendStorage(f *guestFacts, vmi *v1.VirtualMachineInstance, cfg *Config, s *podStorage) error {
	spec := &vmi.Spec
	if !v1.NeedsBackendStorage(spec) {
		return nil
	}
	if !cfg.gateEnabled(VMPersistentStateGate) {
		field := "spec.domain.firmware.bootloader.efi.persistent"
		if v1.PersistentTPM(spec) {
			field = "spec.domain.devices.tpm.persistent"
		}
		return f.ref.errorf(field, "the %s feature gate is not enabled (KubeVirt CR spec.configuration.developerConfiguration.featureGates)", VMPersistentStateGate)
	}
	claim := v1.BackendStorageClaimName(vmi.Name)
	if !isDNSSubdomain(claim) {
		return f.ref.errorf("metadata.name", "the backend-storage claim name %q: %s", claim, dnsSubdomainError(claim))
	}
	s.volumes = append(s.volumes, corev1.Volume{Name: volVMState, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}})
	s.mounts = append(s.mounts, corev1.VolumeMount{Name: volVMState, MountPath: VMStateDir})
	return nil
}

// storageCounts returns how many pod volumes and compute mounts (or
// devices) the VMI's volumes become, at most.
func storageCounts(spec *v1.VirtualMachineInstanceSpec) (volumes, mounts int) {
	for i := range spec.Volumes {
		src := &spec.Volumes[i].VolumeSource
		switch {
		case src.PersistentVolumeClaim != nil, src.DataVolume != nil, src.Ephemeral != nil, src.HostDisk != nil,
			src.ConfigMap != nil, src.Secret != nil, src.DownwardAPI != nil, src.Sysprep != nil:
			volumes, mounts = volumes+1, mounts+1
		case src.CloudInitNoCloud != nil:
			v, m := cloudInitCounts(src.CloudInitNoCloud.UserDataSecretRef, src.CloudInitNoCloud.NetworkDataSecretRef)
			volumes, mounts = volumes+v, mounts+m
		case src.CloudInitConfigDrive != nil:
			v, m := cloudInitCounts(src.CloudInitConfigDrive.UserDataSecretRef, src.CloudInitConfigDrive.NetworkDataSecretRef)
			volumes, mounts = volumes+v, mounts+m
		}
	}
	return volumes, mounts
}

func cloudInitCounts(refs ...*corev1.LocalObjectReference) (volumes, mounts int) {
	for _, r := range refs {
		if r != nil {
			volumes, mounts = volumes+1, mounts+2
		}
	}
	return volumes, mounts
}

// checkVolume checks a VMI volume's name (unique, a DNS label) and that it
// sets exactly one source.
func checkVolume(f *guestFacts, vols []v1.Volume, i int, field volField) error {
	vol := &vols[i]
	if !isDNSLabel(vol.Name) {
		return f.ref.errorf(field.at(".name"), "%q: %s", vol.Name, dnsLabelError(vol.Name))
	}
	for j := range i {
		if vols[j].Name == vol.Name {
			return f.ref.errorf(field.at(".name"), "%q is also the name of spec.volumes[%d]", vol.Name, j)
		}
	}
	if n := countSources(&vol.VolumeSource); n != 1 {
		return f.ref.errorf(field.at(""), "volume %q sets %d sources; it must set exactly one of containerDisk, persistentVolumeClaim, dataVolume, ephemeral, emptyDisk, hostDisk, cloudInitNoCloud, cloudInitConfigDrive, configMap, secret, downwardAPI, serviceAccount and sysprep", vol.Name, n)
	}
	return nil
}

// volField is spec.volumes[i], turned into a field path only for an error.
type volField int

func (i volField) at(suffix string) string {
	return "spec.volumes[" + strconv.Itoa(int(i)) + "]" + suffix
}

func countSources(s *v1.VolumeSource) int {
	n := 0
	for _, set := range [...]bool{
		s.HostDisk != nil, s.PersistentVolumeClaim != nil, s.CloudInitNoCloud != nil,
		s.CloudInitConfigDrive != nil, s.Sysprep != nil, s.ContainerDisk != nil,
		s.Ephemeral != nil, s.EmptyDisk != nil, s.DataVolume != nil, s.ConfigMap != nil,
		s.Secret != nil, s.DownwardAPI != nil, s.ServiceAccount != nil,
	} {
		if set {
			n++
		}
	}
	return n
}

// checkPodVolumeNames rejects a VMI volume whose pod volume would take the
// name of one of the pod's own volumes or of another pod volume (a volume
// named x-udata next to cloud-init x with a secretRef).
func checkPodVolumeNames(f *guestFacts, spec *v1.VirtualMachineInstanceSpec, vols []corev1.Volume) error {
	for i := range vols {
		name := vols[i].Name
		if isOwnVolumeName(name) {
			return f.ref.errorf(sourceOf(spec, name).at(".name"), "%q is the name of one of the launcher pod's own volumes", name)
		}
		for j := range i {
			if vols[j].Name == name {
				return f.ref.errorf(sourceOf(spec, name).at(".name"), "%q is also the pod volume of another volume's secret", name)
			}
		}
	}
	return nil
}

// sourceOf is the VMI volume a pod volume comes from: the one of that name,
// else the cloud-init volume whose Secret it mounts.
func sourceOf(spec *v1.VirtualMachineInstanceSpec, podVolume string) volField {
	if i := indexOfVolume(spec.Volumes, podVolume); i >= 0 {
		return volField(i)
	}
	for _, suffix := range [...]string{"-udata", "-ndata"} {
		if base, ok := strings.CutSuffix(podVolume, suffix); ok {
			if i := indexOfVolume(spec.Volumes, base); i >= 0 {
				return volField(i)
			}
		}
	}
	return -1 // not reached: every pod volume comes from a VMI volume
}

func (s *podStorage) add(name string, src corev1.VolumeSource, mountPath string) {
	s.volumes = append(s.volumes, corev1.Volume{Name: name, VolumeSource: src})
	s.mounts = append(s.mounts, corev1.VolumeMount{Name: name, MountPath: mountPath, ReadOnly: true})
}

// addClaim adds a claim as a filesystem mount or, for a block claim, a device.
func (s *podStorage) addClaim(f *guestFacts, name, claim string, readOnly bool, namespace string, field volField, kind string, claimMode func(string, string) (corev1.PersistentVolumeMode, error)) error {
	if !isDNSSubdomain(claim) {
		return f.ref.errorf(field.at(kind), "claim name %q: %s", claim, dnsSubdomainError(claim))
	}
	block := false
	if claimMode != nil {
		mode, err := claimMode(namespace, claim)
		if err != nil {
			e := f.ref.errorf(field.at(kind), "volume mode of claim %q", claim)
			e.Err = err
			return e
		}
		block = mode == corev1.PersistentVolumeBlock
	}
	s.volumes = append(s.volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly},
	}})
	if block {
		s.devices = append(s.devices, corev1.VolumeDevice{Name: name, DevicePath: "/dev/" + name})
	} else {
		s.mounts = append(s.mounts, corev1.VolumeMount{Name: name, MountPath: hostDisksDir + "/" + name})
	}
	return nil
}

// addHostDisk mounts the directory of a host disk image: Directory for an
// existing image, DirectoryOrCreate when the image may be created. The
// caller checks the HostDisk feature gate; a directory DeniedHostDiskPath
// names is refused here.
func (s *podStorage) addHostDisk(f *guestFacts, vol *v1.Volume, field volField) error {
	hd := vol.HostDisk
	if !path.IsAbs(hd.Path) || path.Clean(hd.Path) != hd.Path {
		return f.ref.errorf(field.at(".hostDisk.path"), "%q must be a clean absolute path", hd.Path)
	}
	dir := path.Dir(hd.Path)
	if dir == "/" || dir == hd.Path {
		return f.ref.errorf(field.at(".hostDisk.path"), "%q: the image must be in a directory other than /, which would expose the node's root", hd.Path)
	}
	if denied := DeniedHostDiskPath(hd.Path); denied != "" {
		return f.ref.errorf(field.at(".hostDisk.path"), "%q: its directory %s would mount %s of the node into the launcher pod, read-write; host disks must be in a directory of their own, such as /data/images", hd.Path, dir, denied)
	}
	var t corev1.HostPathType
	switch hd.Type {
	case v1.HostDiskExists:
		t = corev1.HostPathDirectory
	case v1.HostDiskExistsOrCreateEmpty:
		t = corev1.HostPathDirectoryOrCreate
		if hd.Capacity.Sign() <= 0 {
			return f.ref.errorf(field.at(".hostDisk.capacity"), "required for type DiskOrCreate")
		}
	default:
		return f.ref.errorf(field.at(".hostDisk.type"), "%q is not Disk or DiskOrCreate", hd.Type)
	}
	s.volumes = append(s.volumes, corev1.Volume{Name: vol.Name, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &t},
	}})
	s.mounts = append(s.mounts, corev1.VolumeMount{Name: vol.Name, MountPath: hostDisksDir + "/" + vol.Name})
	return nil
}

// deniedHostDirs are the node's directories no hostDisk may mount: the
// system, the kubelet's and the container runtimes' state (other pods'
// volumes, secrets and images), home directories, and where root's jobs
// and programs live. Every directory under them is denied too, and so is
// every directory above one, whose mount would contain it. A directory
// whose base name starts with "lib" directly under / (/lib, /lib64,
// /libx32, …) is denied as well.
var deniedHostDirs = []string{
	"/bin", "/boot", "/dev", "/etc", "/home", "/opt", "/proc", "/root", "/run", "/sbin", "/sys", "/usr",
	"/var/lib/kubelet", "/var/run", "/var/lib/containerd", "/var/lib/containers", "/var/lib/docker",
	"/var/lib/cni", "/var/lib/etcd", "/var/spool",
}

// DeniedHostDiskPath returns the node directory that no VMI may reach and
// that the launcher pod's mount of p's directory would expose (p is a
// hostDisk.path, clean and absolute): that directory itself, the denied
// one it is under, or a denied one under it; "" when p's directory may be
// mounted. The HostDisk feature gate lets every user who may create a VMI
// mount a node directory read-write, so the renderer refuses these
// whatever the gate says. The check is lexical: a symbolic link on the node
// from an allowed directory to a denied one is not seen.
func DeniedHostDiskPath(p string) string {
	dir := path.Dir(p)
	if dir == "/" {
		return "/"
	}
	if first, _, _ := strings.Cut(dir[1:], "/"); strings.HasPrefix(first, "lib") {
		return "/" + first
	}
	for _, d := range deniedHostDirs {
		if dir == d || strings.HasPrefix(dir, d+"/") || strings.HasPrefix(d, dir+"/") {
			return d
		}
	}
	return ""
}

func (s *podStorage) addSysprep(f *guestFacts, vol *v1.Volume, field volField) error {
	sp := vol.Sysprep
	var src corev1.VolumeSource
	switch {
	case sp.Secret != nil && sp.ConfigMap != nil:
		return f.ref.errorf(field.at(".sysprep"), "set secret or configMap, not both")
	case sp.Secret != nil && sp.Secret.Name != "":
		src.Secret = &corev1.SecretVolumeSource{SecretName: sp.Secret.Name}
	case sp.ConfigMap != nil && sp.ConfigMap.Name != "":
		src.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: sp.ConfigMap.Name}}
	default:
		return f.ref.errorf(field.at(".sysprep"), "needs the name of a secret or a configMap holding the answer file")
	}
	s.add(vol.Name, src, sysprepDir+"/"+vol.Name)
	return nil
}

// addCloudInitSecrets mounts the user-data and network-data Secrets of a
// cloud-init volume under both key spellings the launcher accepts.
func (s *podStorage) addCloudInitSecrets(f *guestFacts, name string, userData, networkData *corev1.LocalObjectReference, field volField, kind string) error {
	for _, ref := range [...]struct {
		secret *corev1.LocalObjectReference
		suffix string
		keys   [2]string
		field  string
	}{
		{userData, "-udata", [2]string{"userdata", "userData"}, ".secretRef.name"},
		{networkData, "-ndata", [2]string{"networkdata", "networkData"}, ".networkDataSecretRef.name"},
	} {
		if ref.secret == nil {
			continue
		}
		if ref.secret.Name == "" {
			return f.ref.errorf(field.at(kind+ref.field), "required")
		}
		podVol := name + ref.suffix
		if len(podVol) > validation.DNS1123LabelMaxLength {
			return f.ref.errorf(field.at(kind), "the pod volume %q for the secret would be longer than %d characters; shorten the volume name", podVol, validation.DNS1123LabelMaxLength)
		}
		s.volumes = append(s.volumes, corev1.Volume{Name: podVol, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: ref.secret.Name},
		}})
		dir := secretDir + "/" + name + "/"
		for _, key := range ref.keys {
			s.mounts = append(s.mounts, corev1.VolumeMount{Name: podVol, MountPath: dir + key, SubPath: key, ReadOnly: true})
		}
	}
	return nil
}

// checkContainerDisk checks what the disk's containers need: an image, a
// valid pull policy and a name short enough for volume<name>-init.
func checkContainerDisk(f *guestFacts, vol *v1.Volume, field volField) error {
	cd := vol.ContainerDisk
	if cd.Image == "" {
		return f.ref.errorf(field.at(".containerDisk.image"), "required")
	}
	if !validPullPolicy(cd.ImagePullPolicy) {
		return f.ref.errorf(field.at(".containerDisk.imagePullPolicy"), "%q is not Always, IfNotPresent or Never", cd.ImagePullPolicy)
	}
	if n := len(diskContainerPrefix) + len(vol.Name) + len(initSuffix); n > validation.DNS1123LabelMaxLength {
		return f.ref.errorf(field.at(".name"), "%q is too long for a containerDisk: its init container %s%s%s would have %d characters, more than %d",
			vol.Name, diskContainerPrefix, vol.Name, initSuffix, n, validation.DNS1123LabelMaxLength)
	}
	if f.kernelBoot && vol.Name == kernelBootVolumeName {
		return f.ref.errorf(field.at(".name"), "%q is reserved for the kernel boot container", vol.Name)
	}
	return nil
}

func validPullPolicy(p corev1.PullPolicy) bool {
	switch p {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return true
	}
	return false
}

// ownVolumes returns the pod's own volumes and the compute container's
// mounts of them, with room for the VMI's.
func (r *Renderer) ownVolumes(f *guestFacts, spec *v1.VirtualMachineInstanceSpec, vmiVolumes, vmiMounts int) ([]corev1.Volume, []corev1.VolumeMount) {
	hotplug := !spec.Domain.Devices.DisableHotplug
	helpers := f.containerDisks > 0 || f.kernelBoot
	nv, nm := 6, 6
	if hotplug {
		nv, nm = nv+1, nm+1
	}
	if helpers {
		nv++
	}
	if f.hugePages != "" {
		nv, nm = nv+2, nm+2
	}
	vols := make([]corev1.Volume, 0, nv+vmiVolumes)
	mounts := make([]corev1.VolumeMount, 0, nm+vmiMounts)
	emptyDir := func(name string) {
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	mount := func(name, dir string) *corev1.VolumeMount {
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: dir})
		return &mounts[len(mounts)-1]
	}

	emptyDir(volPrivate)
	mount(volPrivate, privateDir)
	emptyDir(volPublic)
	mount(volPublic, r.cfg.ShareDir)
	emptyDir(volSockets)
	mount(volSockets, r.socketsDir)
	emptyDir(volLibvirtRuntime)
	mount(volLibvirtRuntime, libvirtRuntimeDir)
	emptyDir(volEphemeral)
	mount(volEphemeral, r.cfg.EphemeralDiskDir)
	emptyDir(volContainerDisks)
	mount(volContainerDisks, r.cfg.ContainerDiskDir)
	if helpers {
		emptyDir(volBinShare)
	}
	if hotplug {
		emptyDir(volHotplug)
		prop := corev1.MountPropagationHostToContainer
		mount(volHotplug, r.cfg.HotplugDiskDir).MountPropagation = &prop
	}
	if f.hugePages != "" {
		emptyDir(volHugepages)
		vols[len(vols)-1].EmptyDir.Medium = corev1.StorageMediumHugePages
		mount(volHugepages, hugepagesDir)
		// libvirt's directory for the guest's memory files is a hugetlbfs
		// of its own too (KubeVirt's): the fsGroup makes it writable by a
		// non-root launcher, and the guest's RAM stays in huge pages.
		emptyDir(volHugepagesDir)
		vols[len(vols)-1].EmptyDir.Medium = corev1.StorageMediumHugePages
		mount(volHugepagesDir, hugepagesDir+"/libvirt/qemu")
	}
	return vols, mounts
}

func copyBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	c := *b
	return &c
}
