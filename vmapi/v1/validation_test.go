package v1_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// fieldError is what a test asserts about a validation error: its type and
// the exact path of the field it names.
type fieldError struct {
	Type  field.ErrorType
	Field string
}

// fieldErrors projects errs onto (type, path) pairs, and fails the test if
// an error carries no explanation a user could act on.
func fieldErrors(t *testing.T, errs field.ErrorList) []fieldError {
	t.Helper()
	var out []fieldError
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeRequired, field.ErrorTypeInvalid, field.ErrorTypeForbidden:
			if e.Detail == "" {
				t.Errorf("%s error on %s has no explanation", e.Type, e.Field)
			}
		}
		out = append(out, fieldError{e.Type, e.Field})
	}
	return out
}

// sortFieldErrors makes comparisons independent of the order checks run in.
var sortFieldErrors = cmpopts.SortSlices(func(a, b fieldError) bool {
	if a.Field != b.Field {
		return a.Field < b.Field
	}
	return a.Type < b.Type
})

func uintPtr(u uint) *uint           { return &u }
func int64Ptr(i int64) *int64        { return &i }
func int32Ptr(i int32) *int32        { return &i }
func qty(s string) resource.Quantity { return resource.MustParse(s) }
func qtyPtr(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// testVMI is a valid, realistic VMI: a Fedora container disk booted first,
// a cloud-init disk, 1Gi of memory and a masquerade interface on the pod
// network.
func testVMI() *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: "testvmi", Namespace: "default"},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Resources: v1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceMemory: qty("1Gi")},
				},
				Devices: v1.Devices{
					Disks: []v1.Disk{
						{Name: "rootdisk", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}, BootOrder: uintPtr(1)},
						{Name: "cloudinitdisk", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
					},
					Interfaces: []v1.Interface{{
						Name:                   "default",
						InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}},
					}},
				},
			},
			Volumes: []v1.Volume{
				{Name: "rootdisk", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:40"}}},
				{Name: "cloudinitdisk", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\npassword: fedora\n"}}},
			},
			Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
		},
	}
}

// addMultusNetwork connects the VMI to a multus network through a bridge.
func addMultusNetwork(vmi *v1.VirtualMachineInstance, name string, isDefault bool) {
	vmi.Spec.Networks = append(vmi.Spec.Networks, v1.Network{
		Name:          name,
		NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "vms/" + name, Default: isDefault}},
	})
	vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces, v1.Interface{
		Name:                   name,
		InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}},
	})
}

// addVolumeDisk adds a disk backed by a volume with the given source.
func addVolumeDisk(vmi *v1.VirtualMachineInstance, name string, src v1.VolumeSource) {
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: name})
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: name, VolumeSource: src})
}

func rootDisk(vmi *v1.VirtualMachineInstance) *v1.Disk { return &vmi.Spec.Domain.Devices.Disks[0] }
func firstIface(vmi *v1.VirtualMachineInstance) *v1.Interface {
	return &vmi.Spec.Domain.Devices.Interfaces[0]
}
func noCloud(vmi *v1.VirtualMachineInstance) *v1.CloudInitNoCloudSource {
	return vmi.Spec.Volumes[1].CloudInitNoCloud
}
func setDedicatedCPUs(vmi *v1.VirtualMachineInstance) {
	vmi.Spec.Domain.CPU = &v1.CPU{DedicatedCPUPlacement: true}
}
func setLimits(vmi *v1.VirtualMachineInstance, l corev1.ResourceList) {
	vmi.Spec.Domain.Resources.Limits = l
}
func setRequests(vmi *v1.VirtualMachineInstance, r corev1.ResourceList) {
	vmi.Spec.Domain.Resources.Requests = r
}
func setHugepages(vmi *v1.VirtualMachineInstance, size string) {
	if vmi.Spec.Domain.Memory == nil {
		vmi.Spec.Domain.Memory = &v1.Memory{}
	}
	vmi.Spec.Domain.Memory.Hugepages = &v1.Hugepages{PageSize: size}
}
func setEFI(vmi *v1.VirtualMachineInstance, secureBoot *bool, smm *bool) {
	vmi.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{SecureBoot: secureBoot}}}
	if smm != nil {
		vmi.Spec.Domain.Features = &v1.Features{SMM: &v1.FeatureState{Enabled: smm}}
	}
}
func setKernelBoot(vmi *v1.VirtualMachineInstance, kb v1.KernelBoot) {
	vmi.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &kb}
}

const (
	disks      = "spec.domain.devices.disks"
	interfaces = "spec.domain.devices.interfaces"
	volumes    = "spec.volumes"
	networks   = "spec.networks"
	resources  = "spec.domain.resources"
)

const (
	required     = field.ErrorTypeRequired
	invalid      = field.ErrorTypeInvalid
	forbidden    = field.ErrorTypeForbidden
	duplicate    = field.ErrorTypeDuplicate
	notFound     = field.ErrorTypeNotFound
	notSupported = field.ErrorTypeNotSupported
)

func TestValidateVirtualMachineInstance(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.VirtualMachineInstance)
		want   []fieldError
	}{
		{name: "valid", mutate: func(*v1.VirtualMachineInstance) {}},

		// Memory.
		{name: "no guest memory and no memory request", mutate: func(vmi *v1.VirtualMachineInstance) {
			setRequests(vmi, nil)
		}, want: []fieldError{{required, resources + ".requests.memory"}}},
		{name: "guest memory without memory request", mutate: func(vmi *v1.VirtualMachineInstance) {
			setRequests(vmi, nil)
			vmi.Spec.Domain.Memory = &v1.Memory{Guest: qtyPtr("2Gi")}
		}},
		{name: "zero guest memory", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Memory = &v1.Memory{Guest: qtyPtr("0")}
		}, want: []fieldError{{invalid, "spec.domain.memory.guest"}}},
		{name: "zero memory request", mutate: func(vmi *v1.VirtualMachineInstance) {
			setRequests(vmi, corev1.ResourceList{corev1.ResourceMemory: qty("0")})
		}, want: []fieldError{{invalid, resources + ".requests.memory"}}},
		{name: "negative memory limit", mutate: func(vmi *v1.VirtualMachineInstance) {
			setLimits(vmi, corev1.ResourceList{corev1.ResourceMemory: qty("-1Gi")})
		}, want: []fieldError{{invalid, resources + ".limits.memory"}}},
		{name: "guest memory above memory limit", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Memory = &v1.Memory{Guest: qtyPtr("2Gi")}
			setLimits(vmi, corev1.ResourceList{corev1.ResourceMemory: qty("1Gi")})
		}, want: []fieldError{{invalid, "spec.domain.memory.guest"}}},
		{name: "guest memory equal to memory limit", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Memory = &v1.Memory{Guest: qtyPtr("1Gi")}
			setLimits(vmi, corev1.ResourceList{corev1.ResourceMemory: qty("1024Mi")})
		}},
		{name: "memory limit below memory request", mutate: func(vmi *v1.VirtualMachineInstance) {
			setLimits(vmi, corev1.ResourceList{corev1.ResourceMemory: qty("512Mi")})
		}, want: []fieldError{{invalid, resources + ".limits.memory"}}},

		// Dedicated CPUs.
		{name: "dedicated CPUs with requests equal to limits", mutate: func(vmi *v1.VirtualMachineInstance) {
			setDedicatedCPUs(vmi)
			both := corev1.ResourceList{corev1.ResourceCPU: qty("2"), corev1.ResourceMemory: qty("1Gi")}
			setRequests(vmi, both)
			setLimits(vmi, both.DeepCopy())
		}},
		{name: "dedicated CPUs without limits", mutate: func(vmi *v1.VirtualMachineInstance) {
			setDedicatedCPUs(vmi)
			setRequests(vmi, corev1.ResourceList{corev1.ResourceCPU: qty("2"), corev1.ResourceMemory: qty("1Gi")})
		}},
		{name: "dedicated CPUs with CPU request below limit", mutate: func(vmi *v1.VirtualMachineInstance) {
			setDedicatedCPUs(vmi)
			setRequests(vmi, corev1.ResourceList{corev1.ResourceCPU: qty("2"), corev1.ResourceMemory: qty("1Gi")})
			setLimits(vmi, corev1.ResourceList{corev1.ResourceCPU: qty("4")})
		}, want: []fieldError{{invalid, resources + ".limits.cpu"}}},
		{name: "dedicated CPUs with a fraction of a CPU", mutate: func(vmi *v1.VirtualMachineInstance) {
			setDedicatedCPUs(vmi)
			setRequests(vmi, corev1.ResourceList{corev1.ResourceCPU: qty("1500m"), corev1.ResourceMemory: qty("1Gi")})
		}, want: []fieldError{{invalid, resources + ".requests.cpu"}}},
		{name: "dedicated CPUs with memory request below limit", mutate: func(vmi *v1.VirtualMachineInstance) {
			setDedicatedCPUs(vmi)
			setLimits(vmi, corev1.ResourceList{corev1.ResourceMemory: qty("2Gi")})
		}, want: []fieldError{{invalid, resources + ".limits.memory"}}},
		{name: "fractional CPU without dedicated CPUs", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Resources.Requests[corev1.ResourceCPU] = qty("1500m")
		}},
		{name: "isolated emulator thread without dedicated CPUs", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{IsolateEmulatorThread: true}
		}, want: []fieldError{{forbidden, "spec.domain.cpu.isolateEmulatorThread"}}},

		// Huge pages.
		{name: "hugepages with guest memory a multiple of the page size", mutate: func(vmi *v1.VirtualMachineInstance) {
			setHugepages(vmi, "2Mi")
		}},
		{name: "hugepages without a page size", mutate: func(vmi *v1.VirtualMachineInstance) {
			setHugepages(vmi, "")
		}, want: []fieldError{{required, "spec.domain.memory.hugepages.pageSize"}}},
		{name: "hugepages with a page size that is no quantity", mutate: func(vmi *v1.VirtualMachineInstance) {
			setHugepages(vmi, "2 MB")
		}, want: []fieldError{{invalid, "spec.domain.memory.hugepages.pageSize"}}},
		{name: "hugepages with a zero page size", mutate: func(vmi *v1.VirtualMachineInstance) {
			setHugepages(vmi, "0")
		}, want: []fieldError{{invalid, "spec.domain.memory.hugepages.pageSize"}}},
		{name: "memory request not a multiple of the page size", mutate: func(vmi *v1.VirtualMachineInstance) {
			setRequests(vmi, corev1.ResourceList{corev1.ResourceMemory: qty("1025Mi")})
			setHugepages(vmi, "2Mi")
		}, want: []fieldError{{invalid, resources + ".requests.memory"}}},
		{name: "guest memory not a multiple of the page size", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Memory = &v1.Memory{Guest: qtyPtr("1536Mi")}
			setHugepages(vmi, "1Gi")
			setRequests(vmi, corev1.ResourceList{corev1.ResourceMemory: qty("2Gi")})
		}, want: []fieldError{{invalid, "spec.domain.memory.guest"}}},

		// CPU model and features.
		{name: "named CPU model", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Model: "Skylake-Client-IBRS", Features: []v1.CPUFeature{{Name: "vmx"}, {Name: "pcid", Policy: "disable"}}}
		}},
		{name: "blank CPU model", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Model: " "}
		}, want: []fieldError{{invalid, "spec.domain.cpu.model"}}},
		// KubeVirt refuses more sockets than maxSockets, and admits any
		// number of vCPUs: a node that cannot hold them leaves the VMI
		// unscheduled (vmkit's: Pending, InvalidSpec).
		{name: "sockets above maxSockets", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Sockets: 4, MaxSockets: 2}
		}, want: []fieldError{{invalid, "spec.domain.cpu.sockets"}}},
		{name: "sockets up to maxSockets", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Sockets: 2, MaxSockets: 2}
		}},
		{name: "513 sockets", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Sockets: 513, Cores: 2, MaxSockets: 1024}
		}},
		{name: "CPU model with spaces", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Model: "host model"}
		}, want: []fieldError{{invalid, "spec.domain.cpu.model"}}},
		{name: "CPU feature without a name", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Features: []v1.CPUFeature{{Policy: "require"}}}
		}, want: []fieldError{{required, "spec.domain.cpu.features[0].name"}}},
		{name: "CPU feature listed twice", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Features: []v1.CPUFeature{{Name: "vmx"}, {Name: "vmx", Policy: "disable"}}}
		}, want: []fieldError{{duplicate, "spec.domain.cpu.features[1].name"}}},

		// Firmware.
		{name: "EFI secure boot with SMM unset", mutate: func(vmi *v1.VirtualMachineInstance) {
			setEFI(vmi, nil, nil)
		}},
		{name: "EFI secure boot with SMM disabled", mutate: func(vmi *v1.VirtualMachineInstance) {
			setEFI(vmi, nil, v1.BoolPtr(false))
		}, want: []fieldError{{invalid, "spec.domain.firmware.bootloader.efi.secureBoot"}}},
		{name: "EFI without secure boot and SMM disabled", mutate: func(vmi *v1.VirtualMachineInstance) {
			setEFI(vmi, v1.BoolPtr(false), v1.BoolPtr(false))
		}},
		{name: "kernel boot", mutate: func(vmi *v1.VirtualMachineInstance) {
			setKernelBoot(vmi, v1.KernelBoot{KernelArgs: "console=ttyS0", Container: &v1.KernelBootContainer{
				Image: "quay.io/kubevirt/alpine-ext-kernel-boot-demo", KernelPath: "/boot/vmlinuz-virt", InitrdPath: "/boot/initramfs-virt",
			}})
		}},
		{name: "kernel boot without an image", mutate: func(vmi *v1.VirtualMachineInstance) {
			setKernelBoot(vmi, v1.KernelBoot{Container: &v1.KernelBootContainer{KernelPath: "/boot/vmlinuz"}})
		}, want: []fieldError{{required, "spec.domain.firmware.kernelBoot.container.image"}}},
		{name: "kernel boot without kernel or initrd", mutate: func(vmi *v1.VirtualMachineInstance) {
			setKernelBoot(vmi, v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "example.com/kernel"}})
		}, want: []fieldError{{required, "spec.domain.firmware.kernelBoot.container.kernelPath"}}},
		{name: "kernel boot with relative paths", mutate: func(vmi *v1.VirtualMachineInstance) {
			setKernelBoot(vmi, v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "example.com/kernel", KernelPath: "boot/vmlinuz", InitrdPath: "initrd.img"}})
		}, want: []fieldError{
			{invalid, "spec.domain.firmware.kernelBoot.container.kernelPath"},
			{invalid, "spec.domain.firmware.kernelBoot.container.initrdPath"},
		}},
		{name: "kernel arguments without a kernel", mutate: func(vmi *v1.VirtualMachineInstance) {
			setKernelBoot(vmi, v1.KernelBoot{KernelArgs: "console=ttyS0", Container: &v1.KernelBootContainer{Image: "example.com/kernel", InitrdPath: "/initrd.img"}})
		}, want: []fieldError{{forbidden, "spec.domain.firmware.kernelBoot.kernelArgs"}}},

		// Disks.
		{name: "disk and volume names that are no DNS labels", mutate: func(vmi *v1.VirtualMachineInstance) {
			rootDisk(vmi).Name = "Root_Disk"
			vmi.Spec.Volumes[0].Name = "Root_Disk"
		}, want: []fieldError{{invalid, disks + "[0].name"}, {invalid, volumes + "[0].name"}}},
		{name: "disk without a name", mutate: func(vmi *v1.VirtualMachineInstance) {
			rootDisk(vmi).Name = ""
		}, want: []fieldError{{required, disks + "[0].name"}}},
		{name: "disk name used twice", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Disks[1].Name = "rootdisk"
		}, want: []fieldError{{duplicate, disks + "[1].name"}}},
		{name: "disk naming no volume", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: "datadisk"})
		}, want: []fieldError{{notFound, disks + "[2].name"}}},
		{name: "disk that is also a CD-ROM", mutate: func(vmi *v1.VirtualMachineInstance) {
			rootDisk(vmi).CDRom = &v1.CDRomTarget{}
		}, want: []fieldError{{forbidden, disks + "[0].cdrom"}}},
		{name: "CD-ROM on the virtio bus", mutate: func(vmi *v1.VirtualMachineInstance) {
			rootDisk(vmi).DiskDevice = v1.DiskDevice{CDRom: &v1.CDRomTarget{Bus: v1.DiskBusVirtio}}
		}, want: []fieldError{{notSupported, disks + "[0].cdrom.bus"}}},
		{name: "disk with a PCI address", mutate: func(vmi *v1.VirtualMachineInstance) {
			rootDisk(vmi).Disk.PciAddress = "0000:81:01.0"
		}},
		{name: "disk with a malformed PCI address", mutate: func(vmi *v1.VirtualMachineInstance) {
			rootDisk(vmi).Disk.PciAddress = "0000:81:1.0"
		}, want: []fieldError{{invalid, disks + "[0].disk.pciAddress"}}},
		{name: "SATA disk with a PCI address", mutate: func(vmi *v1.VirtualMachineInstance) {
			rootDisk(vmi).Disk = &v1.DiskTarget{Bus: v1.DiskBusSATA, PciAddress: "0000:81:01.0"}
		}, want: []fieldError{{invalid, disks + "[0].disk.pciAddress"}}},

		// Boot order.
		{name: "boot order shared by two disks", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Disks[1].BootOrder = uintPtr(1)
		}, want: []fieldError{{duplicate, disks + "[1].bootOrder"}}},
		{name: "boot order shared by a disk and an interface", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).BootOrder = uintPtr(1)
		}, want: []fieldError{{duplicate, interfaces + "[0].bootOrder"}}},
		{name: "distinct boot orders", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Disks[1].BootOrder = uintPtr(3)
			firstIface(vmi).BootOrder = uintPtr(2)
		}},
		{name: "boot order zero", mutate: func(vmi *v1.VirtualMachineInstance) {
			rootDisk(vmi).BootOrder = uintPtr(0)
		}, want: []fieldError{{invalid, disks + "[0].bootOrder"}}},

		// Volumes.
		{name: "volume name used twice", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "rootdisk", VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: qty("1Gi")}}})
		}, want: []fieldError{{duplicate, volumes + "[2].name"}}},
		{name: "volume without a source", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[0].VolumeSource = v1.VolumeSource{}
		}, want: []fieldError{{required, volumes + "[0]"}}},
		{name: "volume with two sources", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[0].EmptyDisk = &v1.EmptyDiskSource{Capacity: qty("1Gi")}
		}, want: []fieldError{{forbidden, volumes + "[0].emptyDisk"}}},
		{name: "container disk without an image", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[0].ContainerDisk.Image = ""
		}, want: []fieldError{{required, volumes + "[0].containerDisk.image"}}},
		{name: "empty disk", mutate: func(vmi *v1.VirtualMachineInstance) {
			addVolumeDisk(vmi, "scratch", v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: qty("10Gi")}})
		}},
		{name: "empty disk without a capacity", mutate: func(vmi *v1.VirtualMachineInstance) {
			addVolumeDisk(vmi, "scratch", v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{}})
		}, want: []fieldError{{required, volumes + "[2].emptyDisk.capacity"}}},
		{name: "empty disk with a negative capacity", mutate: func(vmi *v1.VirtualMachineInstance) {
			addVolumeDisk(vmi, "scratch", v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: qty("-1Gi")}})
		}, want: []fieldError{{invalid, volumes + "[2].emptyDisk.capacity"}}},
		{name: "host disk", mutate: func(vmi *v1.VirtualMachineInstance) {
			addVolumeDisk(vmi, "host", v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/var/lib/vms/data.img", Type: v1.HostDiskExistsOrCreateEmpty, Capacity: qty("1Gi")}})
		}},
		{name: "host disk with a relative path", mutate: func(vmi *v1.VirtualMachineInstance) {
			addVolumeDisk(vmi, "host", v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "data.img", Type: v1.HostDiskExists}})
		}, want: []fieldError{{invalid, volumes + "[2].hostDisk.path"}}},
		{name: "host disk DiskOrCreate without a capacity", mutate: func(vmi *v1.VirtualMachineInstance) {
			addVolumeDisk(vmi, "host", v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/data.img", Type: v1.HostDiskExistsOrCreateEmpty}})
		}, want: []fieldError{{required, volumes + "[2].hostDisk.capacity"}}},
		{name: "host disk of an unknown type", mutate: func(vmi *v1.VirtualMachineInstance) {
			addVolumeDisk(vmi, "host", v1.VolumeSource{HostDisk: &v1.HostDisk{Path: "/data.img", Type: "Directory"}})
		}, want: []fieldError{{notSupported, volumes + "[2].hostDisk.type"}}},
		{name: "PVC without a claim name", mutate: func(vmi *v1.VirtualMachineInstance) {
			addVolumeDisk(vmi, "data", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}})
		}, want: []fieldError{{required, volumes + "[2].persistentVolumeClaim.claimName"}}},
		{name: "DataVolume without a name", mutate: func(vmi *v1.VirtualMachineInstance) {
			addVolumeDisk(vmi, "data", v1.VolumeSource{DataVolume: &v1.DataVolumeSource{}})
		}, want: []fieldError{{required, volumes + "[2].dataVolume.name"}}},

		// Cloud-init.
		{name: "cloud-init user data in base64", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[1].CloudInitNoCloud = &v1.CloudInitNoCloudSource{UserDataBase64: "I2Nsb3VkLWNvbmZpZwo="}
		}},
		{name: "cloud-init user data that is not base64", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[1].CloudInitNoCloud = &v1.CloudInitNoCloudSource{UserDataBase64: "#cloud-config"}
		}, want: []fieldError{{invalid, volumes + "[1].cloudInitNoCloud.userDataBase64"}}},
		{name: "cloud-init network data that is not base64", mutate: func(vmi *v1.VirtualMachineInstance) {
			noCloud(vmi).NetworkDataBase64 = "version: 2"
		}, want: []fieldError{{invalid, volumes + "[1].cloudInitNoCloud.networkDataBase64"}}},
		{name: "cloud-init with two user-data sources", mutate: func(vmi *v1.VirtualMachineInstance) {
			noCloud(vmi).UserDataBase64 = "I2Nsb3VkLWNvbmZpZwo="
		}, want: []fieldError{{forbidden, volumes + "[1].cloudInitNoCloud.userDataBase64"}}},
		{name: "cloud-init with two network-data sources", mutate: func(vmi *v1.VirtualMachineInstance) {
			noCloud(vmi).NetworkData = "version: 2"
			noCloud(vmi).NetworkDataSecretRef = &corev1.LocalObjectReference{Name: "netdata"}
		}, want: []fieldError{{forbidden, volumes + "[1].cloudInitNoCloud.networkDataSecretRef"}}},
		{name: "cloud-init without data", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[1].CloudInitNoCloud = &v1.CloudInitNoCloudSource{}
		}, want: []fieldError{{required, volumes + "[1].cloudInitNoCloud.userData"}}},
		{name: "cloud-init with network data only", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[1].CloudInitNoCloud = &v1.CloudInitNoCloudSource{NetworkData: "version: 2\n"}
		}},
		{name: "cloud-init user data from a Secret", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[1].CloudInitNoCloud = &v1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "userdata"}}
		}},
		{name: "cloud-init user data from an unnamed Secret", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[1].CloudInitNoCloud = &v1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{}}
		}, want: []fieldError{{required, volumes + "[1].cloudInitNoCloud.secretRef.name"}}},
		{name: "config drive user data that is not base64", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[1].VolumeSource = v1.VolumeSource{CloudInitConfigDrive: &v1.CloudInitConfigDriveSource{UserDataBase64: "not base64!"}}
		}, want: []fieldError{{invalid, volumes + "[1].cloudInitConfigDrive.userDataBase64"}}},
		{name: "config drive with two user-data sources", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[1].VolumeSource = v1.VolumeSource{CloudInitConfigDrive: &v1.CloudInitConfigDriveSource{
				UserData: "#cloud-config\n", UserDataSecretRef: &corev1.LocalObjectReference{Name: "userdata"},
			}}
		}, want: []fieldError{{forbidden, volumes + "[1].cloudInitConfigDrive.secretRef"}}},
		{name: "config drive without data", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes[1].VolumeSource = v1.VolumeSource{CloudInitConfigDrive: &v1.CloudInitConfigDriveSource{}}
		}, want: []fieldError{{required, volumes + "[1].cloudInitConfigDrive.userData"}}},

		// Interfaces.
		{name: "interface name with a dot", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).Name = "Pod.Net"
			vmi.Spec.Networks[0].Name = "Pod.Net"
		}, want: []fieldError{{invalid, interfaces + "[0].name"}, {invalid, networks + "[0].name"}}},
		// KubeVirt's rule for interface names: letters, digits, '-', '_'.
		{name: "interface name with capitals and an underscore", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).Name = "Pod_Net-1"
			vmi.Spec.Networks[0].Name = "Pod_Net-1"
		}},
		{name: "interface name over 63 characters", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).Name = strings.Repeat("n", 64)
			vmi.Spec.Networks[0].Name = strings.Repeat("n", 64)
		}, want: []fieldError{{field.ErrorTypeTooLong, interfaces + "[0].name"}, {field.ErrorTypeTooLong, networks + "[0].name"}}},
		{name: "interface naming no network", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).Name = "blue"
		}, want: []fieldError{{notFound, interfaces + "[0].name"}}},
		{name: "interface name used twice", mutate: func(vmi *v1.VirtualMachineInstance) {
			addMultusNetwork(vmi, "blue", false)
			vmi.Spec.Domain.Devices.Interfaces[1].Name = "default"
		}, want: []fieldError{{duplicate, interfaces + "[1].name"}}},
		{name: "interface with two bindings", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).Bridge = &v1.InterfaceBridge{}
		}, want: []fieldError{{forbidden, interfaces + "[0].masquerade"}}},
		{name: "masquerade on a multus network", mutate: func(vmi *v1.VirtualMachineInstance) {
			addMultusNetwork(vmi, "blue", false)
			vmi.Spec.Domain.Devices.Interfaces[1].InterfaceBindingMethod = v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}
		}, want: []fieldError{{forbidden, interfaces + "[1].masquerade"}}},
		{name: "passtBinding on a multus network", mutate: func(vmi *v1.VirtualMachineInstance) {
			addMultusNetwork(vmi, "blue", false)
			vmi.Spec.Domain.Devices.Interfaces[1].InterfaceBindingMethod = v1.InterfaceBindingMethod{PasstBinding: &v1.InterfacePasstBinding{}}
		}, want: []fieldError{{forbidden, interfaces + "[1].passtBinding"}}},
		{name: "passtBinding on the pod network", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).InterfaceBindingMethod = v1.InterfaceBindingMethod{PasstBinding: &v1.InterfacePasstBinding{}}
		}},
		{name: "passtBinding and masquerade", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).PasstBinding = &v1.InterfacePasstBinding{}
		}, want: []fieldError{{forbidden, interfaces + "[0].passtBinding"}}},
		{name: "bridge on the pod network", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).InterfaceBindingMethod = v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
		}},
		{name: "DHCP options", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).DHCPOptions = &v1.DHCPOptions{BootFileName: "pxelinux.0", TFTPServerName: "tftp.example", NTPServers: []string{"10.0.0.1"},
				PrivateOptions: []v1.DHCPPrivateOptions{{Option: 224, Value: "a"}, {Option: 254, Value: "b"}}}
		}},
		{name: "DHCP options out of KubeVirt's bounds", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).DHCPOptions = &v1.DHCPOptions{NTPServers: []string{"fd00::1", "ntp.example"},
				PrivateOptions: []v1.DHCPPrivateOptions{{Option: 223}, {Option: 230}, {Option: 230}}}
		}, want: []fieldError{{invalid, interfaces + "[0].dhcpOptions.ntpServers[0]"}, {invalid, interfaces + "[0].dhcpOptions.ntpServers[1]"},
			{invalid, interfaces + "[0].dhcpOptions.privateOptions[0].option"}, {duplicate, interfaces + "[0].dhcpOptions.privateOptions[2].option"}}},
		{name: "MAC address", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).MacAddress = "02:00:00:0a:0b:0c"
		}},
		{name: "malformed MAC address", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).MacAddress = "02:00:00:0a:0b"
		}, want: []fieldError{{invalid, interfaces + "[0].macAddress"}}},
		{name: "8-byte MAC address", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).MacAddress = "02:00:00:0a:0b:0c:0d:0e"
		}, want: []fieldError{{invalid, interfaces + "[0].macAddress"}}},
		{name: "interface with a PCI address", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).PciAddress = "0000:02:1f.7"
		}},
		{name: "interface PCI address with slot above 1f", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).PciAddress = "0000:02:20.0"
		}, want: []fieldError{{invalid, interfaces + "[0].pciAddress"}}},
		{name: "interface PCI address with function 8", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).PciAddress = "0000:02:01.8"
		}, want: []fieldError{{invalid, interfaces + "[0].pciAddress"}}},
		{name: "interface PCI address that is not hexadecimal", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).PciAddress = "000g:02:01.0"
		}, want: []fieldError{{invalid, interfaces + "[0].pciAddress"}}},

		// Ports.
		{name: "same port for TCP and UDP", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).Ports = []v1.Port{{Name: "dns", Port: 53}, {Name: "dns-udp", Protocol: "UDP", Port: 53}}
		}},
		{name: "port zero", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).Ports = []v1.Port{{Port: 0}}
		}, want: []fieldError{{invalid, interfaces + "[0].ports[0].port"}}},
		{name: "port above 65535", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).Ports = []v1.Port{{Port: 80}, {Port: 65536}}
		}, want: []fieldError{{invalid, interfaces + "[0].ports[1].port"}}},
		// KubeVirt admits a port listed twice (the pod lists it twice,
		// which the API server only warns of).
		{name: "port listed twice for TCP", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).Ports = []v1.Port{{Port: 22}, {Port: 22, Protocol: "TCP"}}
		}},
		{name: "port with an unknown protocol", mutate: func(vmi *v1.VirtualMachineInstance) {
			firstIface(vmi).Ports = []v1.Port{{Port: 22, Protocol: "SCTP"}}
		}, want: []fieldError{{notSupported, interfaces + "[0].ports[0].protocol"}}},

		// Networks.
		{name: "multus secondary network", mutate: func(vmi *v1.VirtualMachineInstance) {
			addMultusNetwork(vmi, "blue", false)
		}},
		{name: "network name used twice", mutate: func(vmi *v1.VirtualMachineInstance) {
			addMultusNetwork(vmi, "blue", false)
			vmi.Spec.Networks[1].Name = "default"
			vmi.Spec.Domain.Devices.Interfaces = vmi.Spec.Domain.Devices.Interfaces[:1]
		}, want: []fieldError{{duplicate, networks + "[1].name"}}},
		{name: "network without a source", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Networks[0].Pod = nil
		}, want: []fieldError{{required, networks + "[0]"}}},
		{name: "network that is both pod and multus", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Networks[0].Multus = &v1.MultusNetwork{NetworkName: "blue"}
		}, want: []fieldError{{forbidden, networks + "[0].multus"}}},
		{name: "two pod networks", mutate: func(vmi *v1.VirtualMachineInstance) {
			addMultusNetwork(vmi, "second", false)
			vmi.Spec.Networks[1].NetworkSource = v1.NetworkSource{Pod: &v1.PodNetwork{}}
		}, want: []fieldError{{forbidden, networks + "[1].pod"}}},
		{name: "multus network without a network name", mutate: func(vmi *v1.VirtualMachineInstance) {
			addMultusNetwork(vmi, "blue", false)
			vmi.Spec.Networks[1].Multus.NetworkName = ""
		}, want: []fieldError{{required, networks + "[1].multus.networkName"}}},
		{name: "multus default network instead of the pod network", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Networks = nil
			vmi.Spec.Domain.Devices.Interfaces = nil
			addMultusNetwork(vmi, "blue", true)
		}},
		{name: "two multus default networks", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Networks = nil
			vmi.Spec.Domain.Devices.Interfaces = nil
			addMultusNetwork(vmi, "blue", true)
			addMultusNetwork(vmi, "green", true)
		}, want: []fieldError{{forbidden, networks + "[1].multus.default"}}},
		{name: "multus default network next to the pod network", mutate: func(vmi *v1.VirtualMachineInstance) {
			addMultusNetwork(vmi, "blue", true)
		}, want: []fieldError{{forbidden, networks + "[1].multus.default"}}},

		// Grace period.
		{name: "zero grace period", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.TerminationGracePeriodSeconds = int64Ptr(0)
		}},
		{name: "negative grace period", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.TerminationGracePeriodSeconds = int64Ptr(-1)
		}, want: []fieldError{{invalid, "spec.terminationGracePeriodSeconds"}}},

		// Probes.
		{name: "readiness httpGet and liveness tcpSocket probes", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.ReadinessProbe = &v1.Probe{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(80)}, InitialDelaySeconds: int32Ptr(5), PeriodSeconds: int32Ptr(2)}
			vmi.Spec.LivenessProbe = &v1.Probe{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(22)}, SuccessThreshold: int32Ptr(1)}
		}},
		{name: "exec and guest agent ping probes", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.ReadinessProbe = &v1.Probe{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}, SuccessThreshold: int32Ptr(2)}
			vmi.Spec.LivenessProbe = &v1.Probe{GuestAgentPing: &v1.GuestAgentPing{}}
		}},
		{name: "probe with no check", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.ReadinessProbe = &v1.Probe{PeriodSeconds: int32Ptr(5)}
		}, want: []fieldError{{required, "spec.readinessProbe"}}},
		{name: "probe with two checks", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.LivenessProbe = &v1.Probe{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}, GuestAgentPing: &v1.GuestAgentPing{}}
		}, want: []fieldError{{forbidden, "spec.livenessProbe.guestAgentPing"}}},
		{name: "exec probe without a command", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.ReadinessProbe = &v1.Probe{Exec: &corev1.ExecAction{}}
		}, want: []fieldError{{required, "spec.readinessProbe.exec.command"}}},
		{name: "probe ports out of range", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.ReadinessProbe = &v1.Probe{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(0)}}
			vmi.Spec.LivenessProbe = &v1.Probe{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(65536)}}
		}, want: []fieldError{{invalid, "spec.readinessProbe.httpGet.port"}, {invalid, "spec.livenessProbe.tcpSocket.port"}}},
		{name: "probe port names", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Interfaces[0].Ports = []v1.Port{{Name: "http", Port: 80}}
			vmi.Spec.ReadinessProbe = &v1.Probe{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}
			vmi.Spec.LivenessProbe = &v1.Probe{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("ssh")}}
		}, want: []fieldError{{invalid, "spec.livenessProbe.tcpSocket.port"}}},
		{name: "probe with a bad scheme, path and header", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.ReadinessProbe = &v1.Probe{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80), Scheme: "FTP", Path: "healthz",
				HTTPHeaders: []corev1.HTTPHeader{{Name: "bad header", Value: "x"}}}}
		}, want: []fieldError{{notSupported, "spec.readinessProbe.httpGet.scheme"}, {invalid, "spec.readinessProbe.httpGet.path"}, {invalid, "spec.readinessProbe.httpGet.httpHeaders[0].name"}}},
		{name: "negative probe timings", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.ReadinessProbe = &v1.Probe{GuestAgentPing: &v1.GuestAgentPing{}, InitialDelaySeconds: int32Ptr(-1), TimeoutSeconds: int32Ptr(-1),
				PeriodSeconds: int32Ptr(-1), SuccessThreshold: int32Ptr(-1), FailureThreshold: int32Ptr(-1)}
		}, want: []fieldError{
			{invalid, "spec.readinessProbe.initialDelaySeconds"}, {invalid, "spec.readinessProbe.timeoutSeconds"}, {invalid, "spec.readinessProbe.periodSeconds"},
			{invalid, "spec.readinessProbe.successThreshold"}, {invalid, "spec.readinessProbe.failureThreshold"}}},
		{name: "initial delay that overflows with libvirt's start-up delay", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.ReadinessProbe = &v1.Probe{GuestAgentPing: &v1.GuestAgentPing{}, InitialDelaySeconds: int32Ptr(2147483640)}
		}, want: []fieldError{{invalid, "spec.readinessProbe.initialDelaySeconds"}}},
		{name: "liveness probe with a success threshold above 1", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.LivenessProbe = &v1.Probe{GuestAgentPing: &v1.GuestAgentPing{}, SuccessThreshold: int32Ptr(2)}
		}, want: []fieldError{{invalid, "spec.livenessProbe.successThreshold"}}},
		{name: "network probes without a pod network", mutate: func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.Interfaces = nil
			vmi.Spec.Networks = nil
			vmi.Spec.ReadinessProbe = &v1.Probe{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}
			vmi.Spec.LivenessProbe = &v1.Probe{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}
		}, want: []fieldError{{forbidden, "spec.readinessProbe.httpGet"}, {forbidden, "spec.livenessProbe.tcpSocket"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi := testVMI()
			tt.mutate(vmi)
			before := vmi.DeepCopy()
			got := fieldErrors(t, v1.ValidateVirtualMachineInstance(vmi))
			if diff := cmp.Diff(tt.want, got, sortFieldErrors, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ValidateVirtualMachineInstance errors (-want +got):\n%s\nall errors: %v", diff, v1.ValidateVirtualMachineInstance(vmi))
			}
			if !equality.Semantic.DeepEqual(before, vmi) {
				t.Error("ValidateVirtualMachineInstance changed the VMI")
			}
		})
	}
}

func TestValidateVirtualMachineInstanceNil(t *testing.T) {
	got := fieldErrors(t, v1.ValidateVirtualMachineInstance(nil))
	if diff := cmp.Diff([]fieldError{{field.ErrorTypeInternal, "<nil>"}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got = fieldErrors(t, v1.ValidateVirtualMachineInstanceSpec(field.NewPath("spec", "template", "spec"), nil))
	if diff := cmp.Diff([]fieldError{{required, "spec.template.spec"}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// testVM is a valid VM running testVMI's spec with runStrategy Always.
func testVM() *v1.VirtualMachine {
	vmi := testVMI()
	return &v1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: "testvm", Namespace: "default"},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: v1.RunStrategyPtr(v1.RunStrategyAlways),
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubevirt.io/vm": "testvm"}},
				Spec:       vmi.Spec,
			},
		},
	}
}

func TestValidateVirtualMachine(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.VirtualMachine)
		want   []fieldError
	}{
		{name: "valid", mutate: func(*v1.VirtualMachine) {}},
		{name: "running instead of runStrategy", mutate: func(vm *v1.VirtualMachine) {
			vm.Spec.RunStrategy = nil
			vm.Spec.Running = v1.BoolPtr(true)
		}},
		{name: "neither running nor runStrategy", mutate: func(vm *v1.VirtualMachine) {
			vm.Spec.RunStrategy = nil
		}},
		{name: "running and runStrategy", mutate: func(vm *v1.VirtualMachine) {
			vm.Spec.Running = v1.BoolPtr(false)
		}, want: []fieldError{{forbidden, "spec.running"}}},
		{name: "unknown runStrategy", mutate: func(vm *v1.VirtualMachine) {
			vm.Spec.RunStrategy = v1.RunStrategyPtr("Sometimes")
		}, want: []fieldError{{notSupported, "spec.runStrategy"}}},
		{name: "Unknown is not a runStrategy one may ask for", mutate: func(vm *v1.VirtualMachine) {
			vm.Spec.RunStrategy = v1.RunStrategyPtr(v1.RunStrategyUnknown)
		}, want: []fieldError{{notSupported, "spec.runStrategy"}}},
		{name: "no template", mutate: func(vm *v1.VirtualMachine) {
			vm.Spec.Template = nil
		}, want: []fieldError{{required, "spec.template"}}},
		{name: "invalid template", mutate: func(vm *v1.VirtualMachine) {
			vm.Spec.Template.Spec.Domain.Devices.Disks[1].BootOrder = uintPtr(1)
		}, want: []fieldError{{duplicate, "spec.template.spec.domain.devices.disks[1].bootOrder"}}},
	}
	for _, s := range []v1.VirtualMachineRunStrategy{
		v1.RunStrategyAlways, v1.RunStrategyRerunOnFailure, v1.RunStrategyManual,
		v1.RunStrategyHalted, v1.RunStrategyOnce, v1.RunStrategyWaitAsReceiver,
	} {
		tests = append(tests, struct {
			name   string
			mutate func(*v1.VirtualMachine)
			want   []fieldError
		}{name: "runStrategy " + string(s), mutate: func(vm *v1.VirtualMachine) { vm.Spec.RunStrategy = v1.RunStrategyPtr(s) }})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm := testVM()
			tt.mutate(vm)
			got := fieldErrors(t, v1.ValidateVirtualMachine(vm))
			if diff := cmp.Diff(tt.want, got, sortFieldErrors, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ValidateVirtualMachine errors (-want +got):\n%s", diff)
			}
		})
	}
}

func testReplicaSet() *v1.VirtualMachineInstanceReplicaSet {
	vmi := testVMI()
	return &v1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "testrs", Namespace: "default"},
		Spec: v1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: int32Ptr(3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: &v1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "frontend"}},
				Spec:       vmi.Spec,
			},
		},
	}
}

func TestValidateVirtualMachineInstanceReplicaSet(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.VirtualMachineInstanceReplicaSet)
		want   []fieldError
	}{
		{name: "valid", mutate: func(*v1.VirtualMachineInstanceReplicaSet) {}},
		{name: "zero replicas", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Replicas = int32Ptr(0)
		}},
		{name: "unset replicas", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Replicas = nil
		}},
		{name: "negative replicas", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Replicas = int32Ptr(-1)
		}, want: []fieldError{{invalid, "spec.replicas"}}},
		{name: "no selector", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Selector = nil
		}, want: []fieldError{{required, "spec.selector"}}},
		{name: "empty selector", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Selector = &metav1.LabelSelector{}
		}, want: []fieldError{{invalid, "spec.selector"}}},
		{name: "selector with an invalid label value", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Selector.MatchLabels["app"] = "web server"
		}, want: []fieldError{{invalid, "spec.selector.matchLabels"}}},
		{name: "selector with an unknown operator", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Like", Values: []string{"front"}}}
		}, want: []fieldError{{invalid, "spec.selector.matchExpressions[0].operator"}}},
		{name: "selector expression matching the template", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"frontend", "backend"}}}
		}},
		{name: "selector not matching the template", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Template.ObjectMeta.Labels = map[string]string{"app": "db"}
		}, want: []fieldError{{invalid, "spec.template.metadata.labels"}}},
		{name: "no template", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Template = nil
		}, want: []fieldError{{required, "spec.template"}}},
		{name: "invalid template", mutate: func(rs *v1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Template.Spec.Volumes[0].ContainerDisk.Image = ""
		}, want: []fieldError{{required, "spec.template.spec.volumes[0].containerDisk.image"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := testReplicaSet()
			tt.mutate(rs)
			got := fieldErrors(t, v1.ValidateVirtualMachineInstanceReplicaSet(rs))
			if diff := cmp.Diff(tt.want, got, sortFieldErrors, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ValidateVirtualMachineInstanceReplicaSet errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateVirtualMachineInstanceMigration(t *testing.T) {
	tests := []struct {
		name    string
		vmiName string
		want    []fieldError
	}{
		{name: "valid", vmiName: "testvmi"},
		{name: "no VMI name", vmiName: "", want: []fieldError{{required, "spec.vmiName"}}},
		{name: "invalid VMI name", vmiName: "Test_VMI", want: []fieldError{{invalid, "spec.vmiName"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &v1.VirtualMachineInstanceMigration{
				ObjectMeta: metav1.ObjectMeta{Name: "migrate-testvmi", Namespace: "default"},
				Spec:       v1.VirtualMachineInstanceMigrationSpec{VMIName: tt.vmiName},
			}
			got := fieldErrors(t, v1.ValidateVirtualMachineInstanceMigration(m))
			if diff := cmp.Diff(tt.want, got, sortFieldErrors, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ValidateVirtualMachineInstanceMigration errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateKubeVirt(t *testing.T) {
	const configPath = "spec.configuration"
	gates := func(g ...string) func(*v1.KubeVirt) {
		return func(kv *v1.KubeVirt) {
			kv.Spec.Configuration.DeveloperConfiguration = &v1.DeveloperConfiguration{FeatureGates: g}
		}
	}
	tests := []struct {
		name   string
		mutate func(*v1.KubeVirt)
		want   []fieldError
	}{
		{name: "valid", mutate: func(*v1.KubeVirt) {}},
		{name: "nothing set", mutate: func(kv *v1.KubeVirt) { kv.Spec = v1.KubeVirtSpec{} }},
		{name: "RemoveWorkloads", mutate: func(kv *v1.KubeVirt) {
			kv.Spec.UninstallStrategy = v1.KubeVirtUninstallStrategyRemoveWorkloads
		}},
		{name: "unknown uninstall strategy", mutate: func(kv *v1.KubeVirt) {
			kv.Spec.UninstallStrategy = "KeepEverything"
		}, want: []fieldError{{notSupported, "spec.uninstallStrategy"}}},
		{name: "unknown image pull policy", mutate: func(kv *v1.KubeVirt) {
			kv.Spec.ImagePullPolicy = "Sometimes"
		}, want: []fieldError{{notSupported, "spec.imagePullPolicy"}}},
		{name: "unknown launcher image pull policy", mutate: func(kv *v1.KubeVirt) {
			kv.Spec.Configuration.ImagePullPolicy = "Sometimes"
		}, want: []fieldError{{notSupported, configPath + ".imagePullPolicy"}}},
		{name: "feature gates", mutate: gates("Snapshot", "HotplugVolumes")},
		{name: "empty feature gate", mutate: gates("Snapshot", ""),
			want: []fieldError{{required, configPath + ".developerConfiguration.featureGates[1]"}}},
		{name: "feature gate listed twice", mutate: gates("Snapshot", "HotplugVolumes", "Snapshot"),
			want: []fieldError{{duplicate, configPath + ".developerConfiguration.featureGates[2]"}}},
		{name: "zero CPU request", mutate: func(kv *v1.KubeVirt) {
			kv.Spec.Configuration.CPURequest = qtyPtr("0")
		}, want: []fieldError{{invalid, configPath + ".cpuRequest"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := &v1.KubeVirt{
				ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"},
				Spec: v1.KubeVirtSpec{
					ImagePullPolicy:   corev1.PullIfNotPresent,
					UninstallStrategy: v1.KubeVirtUninstallStrategyBlockUninstallIfWorkloadsExist,
					Configuration:     v1.KubeVirtConfiguration{CPURequest: qtyPtr("100m"), ImagePullPolicy: corev1.PullAlways},
				},
			}
			tt.mutate(kv)
			got := fieldErrors(t, v1.ValidateKubeVirt(kv))
			if diff := cmp.Diff(tt.want, got, sortFieldErrors, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ValidateKubeVirt errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateNilObjects(t *testing.T) {
	for name, errs := range map[string]field.ErrorList{
		"VirtualMachine":                   v1.ValidateVirtualMachine(nil),
		"VirtualMachineInstanceReplicaSet": v1.ValidateVirtualMachineInstanceReplicaSet(nil),
		"VirtualMachineInstanceMigration":  v1.ValidateVirtualMachineInstanceMigration(nil),
		"KubeVirt":                         v1.ValidateKubeVirt(nil),
	} {
		if len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
			t.Errorf("validating a nil %s: got %v, want one internal error", name, errs)
		}
	}
}

// kubevirtManifests are KubeVirt user-guide style manifests, written for
// KubeVirt; defaulted, they must validate.
var kubevirtManifests = map[string]string{
	"vmi-fedora": `
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vmi-fedora
spec:
  domain:
    devices:
      disks:
      - name: containerdisk
        disk:
          bus: virtio
      - name: cloudinitdisk
        disk: {}
      - name: installer
        cdrom: {}
    resources:
      requests:
        memory: 1Gi
  terminationGracePeriodSeconds: 0
  volumes:
  - name: containerdisk
    containerDisk:
      image: quay.io/kubevirt/fedora-with-test-tooling-container-disk:devel
  - name: cloudinitdisk
    cloudInitNoCloud:
      userData: |-
        #cloud-config
        password: fedora
        chpasswd: { expire: False }
  - name: installer
    containerDisk:
      image: quay.io/containerdisks/fedora:40
`,
	"vmi-sriov-hugepages": `
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vmi-sriov
spec:
  domain:
    cpu:
      cores: 2
      dedicatedCpuPlacement: true
    memory:
      hugepages:
        pageSize: 2Mi
    devices:
      disks:
      - name: containerdisk
        disk: {}
      - name: cloudinitdisk
        disk: {}
      interfaces:
      - name: default
        masquerade: {}
        ports:
        - port: 22
      - name: sriov-net
        sriov: {}
        macAddress: de:00:00:00:00:de
        pciAddress: "0000:06:00.0"
    resources:
      requests:
        memory: 1Gi
        cpu: "2"
      limits:
        memory: 1Gi
        cpu: "2"
  networks:
  - name: default
    pod: {}
  - name: sriov-net
    multus:
      networkName: sriov/sriov-network
  volumes:
  - name: containerdisk
    containerDisk:
      image: quay.io/kubevirt/fedora-with-test-tooling-container-disk:devel
  - name: cloudinitdisk
    cloudInitNoCloud:
      userDataBase64: I2Nsb3VkLWNvbmZpZwpwYXNzd29yZDogZmVkb3JhCg==
`,
	"vmi-efi-kernel-boot": `
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vmi-efi
spec:
  domain:
    features:
      smm: {}
    firmware:
      bootloader:
        efi: {}
    memory:
      guest: 512Mi
    devices:
      disks:
      - name: data
        bootOrder: 1
      interfaces:
      - name: default
        bridge: {}
        bootOrder: 2
  networks:
  - name: default
    pod: {}
  volumes:
  - name: data
    hostDisk:
      path: /var/lib/vms/data.img
      type: DiskOrCreate
      capacity: 1Gi
`,
}

func TestValidateKubeVirtManifests(t *testing.T) {
	for name, manifest := range kubevirtManifests {
		t.Run(name, func(t *testing.T) {
			var vmi v1.VirtualMachineInstance
			if err := yaml.UnmarshalStrict([]byte(manifest), &vmi); err != nil {
				t.Fatal(err)
			}
			v1.SetDefaults_VirtualMachineInstance(&vmi)
			if errs := v1.ValidateVirtualMachineInstance(&vmi); len(errs) != 0 {
				t.Errorf("KubeVirt manifest %s does not validate: %v", name, errs)
			}
		})
	}
}

// FuzzValidateVirtualMachineInstance decodes arbitrary JSON into a VMI,
// defaults and validates it: neither may panic, defaulting must be
// idempotent, and every error must name a field under spec.
func FuzzValidateVirtualMachineInstance(f *testing.F) {
	for _, manifest := range kubevirtManifests {
		seed, err := yaml.YAMLToJSON([]byte(manifest))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
	}
	seed, err := json.Marshal(testVMI())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"spec":{"domain":{"devices":{"disks":[{"name":"a","bootOrder":0,"cdrom":{"bus":"virtio"}}]},` +
		`"memory":{"guest":"-1","hugepages":{"pageSize":"1m"}},"resources":{"limits":{"memory":"0"}}},` +
		`"volumes":[{"name":"a"}],"networks":[{"name":"x","pod":{},"multus":{"default":true}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var vmi v1.VirtualMachineInstance
		if err := json.Unmarshal(data, &vmi); err != nil {
			return
		}
		v1.SetDefaults_VirtualMachineInstance(&vmi)
		once := vmi.DeepCopy()
		v1.SetDefaults_VirtualMachineInstance(&vmi)
		if !equality.Semantic.DeepEqual(once, &vmi) {
			t.Fatalf("defaulting twice differs from defaulting once:\n%s", cmp.Diff(once, &vmi, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })))
		}
		for _, e := range v1.ValidateVirtualMachineInstance(&vmi) {
			if !strings.HasPrefix(e.Field, "spec") {
				t.Errorf("error names no field under spec: %v", e)
			}
			if e.Error() == "" {
				t.Errorf("error without a message: %#v", e)
			}
		}
	})
}
