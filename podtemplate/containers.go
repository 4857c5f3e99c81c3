package podtemplate

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Container names, commands and paths, KubeVirt's.
const (
	// ComputeContainerName is the container running virt-launcher, libvirt
	// and QEMU; it is always the pod's first container.
	ComputeContainerName = "compute"

	launcherBinary      = "/usr/bin/virt-launcher"
	containerDiskBinary = "/usr/bin/container-disk"
	binaryInitName      = "container-disk-binary" // copies containerDiskBinary into volBinShare
	binaryInitMountPath = "/init/usr/bin"
	diskContainerPrefix = "volume" // volume<name> serves a disk, volume<name>-init pulls its image
	initSuffix          = "-init"
	// kernelBootVolumeName is the name of the kernel boot image's containers
	// (volumekernel-boot-volume); kernelBootDiskName is the name it serves
	// its files under.
	kernelBootVolumeName = "kernel-boot-volume"
	kernelBootDiskName   = "kernel-boot"

	// launcherGracePadding pads the guest's grace period for the launcher,
	// and twice over for the pod, so the node agent shuts the guest down
	// before the kubelet kills the launcher.
	launcherGracePadding = 15
)

// launcherGracePeriods returns the launcher's --grace-period-seconds and the
// pod's terminationGracePeriodSeconds for a guest grace period.
func launcherGracePeriods(guest int64) (launcher, pod int64) {
	return guest + launcherGracePadding, guest + 2*launcherGracePadding
}

// launcherArgs are virt-launcher's flags for a VMI.
func (r *Renderer) launcherArgs(vmi *v1.VirtualMachineInstance, f *guestFacts) []string {
	launcherGrace, _ := launcherGracePeriods(f.graceSeconds)
	args := make([]string, 0, 23)
	args = append(args,
		"--qemu-timeout", r.qemuTimeout,
		"--name", vmi.Name,
		"--uid", string(vmi.UID),
		"--namespace", vmi.Namespace,
		"--kubevirt-share-dir", r.cfg.ShareDir,
		"--ephemeral-disk-dir", r.cfg.EphemeralDiskDir,
		"--container-disk-dir", r.cfg.ContainerDiskDir,
		"--grace-period-seconds", strconv.FormatInt(launcherGrace, 10),
		"--hook-sidecars", "0",
		"--less-pvc-space-toleration", r.pvcToleration,
		"--ovmf-path", r.cfg.OVMFPath,
	)
	if r.cfg.EmulationAllowed {
		args = append(args, "--use-emulation")
	}
	if r.cfg.gateEnabled(ExpandDisksGate) {
		args = append(args, "--expand-disks")
	}
	return args
}

// computeContainer is the container running virt-launcher.
func (r *Renderer) computeContainer(vmi *v1.VirtualMachineInstance, f *guestFacts, res corev1.ResourceRequirements, mounts []corev1.VolumeMount, devices []corev1.VolumeDevice) corev1.Container {
	nonRoot := r.nonRoot()
	env := &struct {
		vars  [1 + len(xdgEnv)]corev1.EnvVar
		src   corev1.EnvVarSource
		field corev1.ObjectFieldSelector
	}{}
	env.field.FieldPath = "metadata.name"
	env.src.FieldRef = &env.field
	env.vars[0] = corev1.EnvVar{Name: "POD_NAME", ValueFrom: &env.src}
	n := 1
	if nonRoot {
		n += copy(env.vars[1:], xdgEnv[:])
	}
	return corev1.Container{
		Name:                     ComputeContainerName,
		Image:                    r.cfg.LauncherImage,
		ImagePullPolicy:          r.cfg.ImagePullPolicy,
		Command:                  []string{launcherBinary},
		Args:                     r.launcherArgs(vmi, f),
		Env:                      env.vars[:n:n],
		Resources:                res,
		VolumeMounts:             mounts,
		VolumeDevices:            devices,
		Ports:                    containerPorts(vmi.Spec.Domain.Devices.Interfaces),
		SecurityContext:          computeSecurityContext(f.dedicated, nonRoot, f.passt.on),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		ReadinessProbe:           r.launcherProbe(vmi, readinessProbeKind, vmi.Spec.ReadinessProbe),
		LivenessProbe:            r.launcherProbe(vmi, livenessProbeKind, vmi.Spec.LivenessProbe),
	}
}

// containerPorts exposes the ports the interfaces forward to the guest.
func containerPorts(ifaces []v1.Interface) []corev1.ContainerPort {
	n := 0
	for i := range ifaces {
		n += len(ifaces[i].Ports)
	}
	if n == 0 {
		return nil
	}
	ports := make([]corev1.ContainerPort, 0, n)
	for i := range ifaces {
		for _, p := range ifaces[i].Ports {
			proto := corev1.ProtocolTCP
			if p.Protocol != "" {
				proto = corev1.Protocol(p.Protocol)
			}
			ports = append(ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.Port, Protocol: proto})
		}
	}
	return ports
}

// diskContainers returns the helper containers of the VMI's container disks
// and kernel boot image: the container-disk-binary init container, then for
// each image an init container (volume<name>-init, which makes the kubelet
// pull the image before the launcher starts) and a sidecar (volume<name>,
// which serves the image's disk at <ContainerDiskDir>/<vmi uid>/disk_<index
// of the volume>). The sidecars are appended to containers, which has room
// for them (see helperCount). It returns no init containers when the VMI
// has neither.
//
// In a Guaranteed pod (dedicated CPUs) the init container also copies the
// image in, with computeCPU, the compute container's CPU: the sidecar there
// has KubeVirt's 10m (requests = limits), under which copying a kernel took
// 10 s of a 17 s start. An init container's CPU costs the node nothing the
// pod does not already ask for (a pod asks for the larger of its biggest
// init container and the sum of its containers), and the CPU manager hands
// its exclusive CPUs on to the compute container. Elsewhere the sidecar
// copies, under a 100m limit, while the node agent wires the network.
func (r *Renderer) diskContainers(vmi *v1.VirtualMachineInstance, f *guestFacts, computeCPU resource.Quantity, containers []corev1.Container) (initContainers, sidecars []corev1.Container) {
	sidecars = containers
	n := helperCount(f)
	if n == 0 {
		return nil, sidecars
	}
	initContainers = make([]corev1.Container, 0, n+1)
	diskDir := r.cfg.ContainerDiskDir + "/" + string(vmi.UID)
	initContainers = append(initContainers, corev1.Container{
		Name:                     binaryInitName,
		Image:                    r.cfg.LauncherImage,
		ImagePullPolicy:          r.cfg.ImagePullPolicy,
		Command:                  []string{"/usr/bin/cp"},
		Args:                     []string{"--preserve=all", containerDiskBinary, binaryInitMountPath + "/container-disk"},
		VolumeMounts:             []corev1.VolumeMount{{Name: volBinShare, MountPath: binaryInitMountPath}},
		Resources:                helperResources(f.dedicated, false),
		SecurityContext:          helperSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})
	// add adds an image's two containers: an init container that makes
	// the kubelet pull the image (and copies it in a Guaranteed pod), and
	// the sidecar that serves the disk.
	add := func(name, image string, policy corev1.PullPolicy, servedAs string) {
		for _, init := range [...]bool{true, false} {
			c := corev1.Container{
				Image:           image,
				ImagePullPolicy: policy,
				Command:         []string{containerDiskBinary},
				VolumeMounts: []corev1.VolumeMount{
					{Name: volContainerDisks, MountPath: diskDir},
					{Name: volBinShare, MountPath: "/usr/bin"},
				},
				Resources:                helperResources(f.dedicated, !init),
				SecurityContext:          helperSecurityContext(),
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}
			switch {
			case init && f.dedicated:
				c.Name = diskContainerPrefix + name + initSuffix
				c.Args = []string{"--copy-path", diskDir + "/" + servedAs, "--copy-only"}
				c.Resources = copyingInitResources(computeCPU)
				initContainers = append(initContainers, c)
			case init:
				c.Name = diskContainerPrefix + name + initSuffix
				c.Args = []string{"--no-op"}
				initContainers = append(initContainers, c)
			default:
				c.Name = diskContainerPrefix + name
				c.Args = []string{"--copy-path", diskDir + "/" + servedAs}
				sidecars = append(sidecars, c)
			}
		}
	}
	for i := range vmi.Spec.Volumes {
		vol := &vmi.Spec.Volumes[i]
		if cd := vol.ContainerDisk; cd != nil {
			add(vol.Name, cd.Image, cd.ImagePullPolicy, "disk_"+strconv.Itoa(i))
		}
	}
	if f.kernelBoot {
		kb := vmi.Spec.Domain.Firmware.KernelBoot.Container
		add(kernelBootVolumeName, kb.Image, kb.ImagePullPolicy, kernelBootDiskName)
	}
	return initContainers, sidecars
}

// helperCount is the number of images served by sidecars: the container
// disks and the kernel boot image.
func helperCount(f *guestFacts) int {
	if f.kernelBoot {
		return f.containerDisks + 1
	}
	return f.containerDisks
}

// imagePullSecrets are the container disks' and the kernel boot image's pull
// secrets, then the configured ones, each once.
func (r *Renderer) imagePullSecrets(spec *v1.VirtualMachineInstanceSpec) []corev1.LocalObjectReference {
	var secrets []corev1.LocalObjectReference
	add := func(name string) {
		if name == "" {
			return
		}
		for _, s := range secrets {
			if s.Name == name {
				return
			}
		}
		secrets = append(secrets, corev1.LocalObjectReference{Name: name})
	}
	for i := range spec.Volumes {
		if cd := spec.Volumes[i].ContainerDisk; cd != nil {
			add(cd.ImagePullSecret)
		}
	}
	if fw := spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil && fw.KernelBoot.Container != nil {
		add(fw.KernelBoot.Container.ImagePullSecret)
	}
	for _, s := range r.cfg.ImagePullSecrets {
		add(s)
	}
	return secrets
}
