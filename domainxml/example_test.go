package domainxml_test

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/domainxml"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// A container-disk VMI on the pod network, converted for a node without
// KVM and marshalled for virDomainDefineXML.
func Example() {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cirros", UID: "0f6b3c6e-2a7d-4a5e-9a51-7f1e3d0c9b11"},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
				Devices: v1.Devices{
					AutoattachGraphicsDevice: v1.BoolPtr(false),
					Disks:                    []v1.Disk{{Name: "root"}},
					Interfaces: []v1.Interface{{
						Name:                   "default",
						InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}},
					}},
				},
			},
			Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
			Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{
				ContainerDisk: &v1.ContainerDiskSource{Image: "quay.io/kubevirt/cirros-container-disk-demo"},
			}}},
		},
	}
	dom, err := domainxml.Convert(vmi, domainxml.Options{
		Emulation:    true,
		SerialSocket: "/run/vmkit/cirros/serial0",
	})
	if err != nil {
		panic(err)
	}
	xml, err := domainxml.Marshal(dom)
	if err != nil {
		panic(err)
	}
	fmt.Println(xml)
	// Output:
	// <domain type="qemu">
	//   <name>default_cirros</name>
	//   <uuid>c9fe35de-99df-5d46-bc70-b48c591ffd8c</uuid>
	//   <metadata><vmi xmlns="https://github.com/vmkit/vmkit/domainxml/v1"><namespace>default</namespace><name>cirros</name><uid>0f6b3c6e-2a7d-4a5e-9a51-7f1e3d0c9b11</uid><gracePeriodSeconds>30</gracePeriodSeconds></vmi></metadata>
	//   <memory unit="KiB">131072</memory>
	//   <vcpu placement="static">1</vcpu>
	//   <sysinfo type="smbios">
	//     <system>
	//       <entry name="manufacturer">KubeVirt</entry>
	//       <entry name="product">None</entry>
	//       <entry name="uuid">c9fe35de-99df-5d46-bc70-b48c591ffd8c</entry>
	//       <entry name="family">KubeVirt</entry>
	//     </system>
	//   </sysinfo>
	//   <os>
	//     <type arch="x86_64" machine="q35">hvm</type>
	//     <smbios mode="sysinfo"></smbios>
	//   </os>
	//   <features>
	//     <acpi></acpi>
	//     <tcg>
	//       <tb-cache unit="MiB">128</tb-cache>
	//     </tcg>
	//   </features>
	//   <cpu mode="maximum">
	//     <topology sockets="1" cores="1" threads="1"></topology>
	//   </cpu>
	//   <clock offset="utc"></clock>
	//   <devices>
	//     <disk type="file" device="disk" model="virtio-non-transitional">
	//       <driver name="qemu" type="qcow2" error_policy="stop" discard="unmap"></driver>
	//       <source file="/var/run/kubevirt-ephemeral-disks/disk-data/root/disk.qcow2"></source>
	//       <target dev="vda" bus="virtio"></target>
	//       <alias name="ua-root"></alias>
	//     </disk>
	//     <controller type="usb" index="0" model="none"></controller>
	//     <controller type="scsi" index="0" model="virtio-non-transitional"></controller>
	//     <controller type="pci" index="1" model="pcie-root-port"></controller>
	//     <controller type="pci" index="2" model="pcie-root-port"></controller>
	//     <controller type="pci" index="3" model="pcie-root-port"></controller>
	//     <controller type="pci" index="4" model="pcie-root-port"></controller>
	//     <controller type="pci" index="5" model="pcie-root-port"></controller>
	//     <controller type="pci" index="6" model="pcie-root-port"></controller>
	//     <controller type="pci" index="7" model="pcie-root-port"></controller>
	//     <controller type="pci" index="8" model="pcie-root-port"></controller>
	//     <controller type="pci" index="9" model="pcie-root-port"></controller>
	//     <controller type="pci" index="10" model="pcie-root-port"></controller>
	//     <interface type="ethernet">
	//       <target dev="tap0" managed="no"></target>
	//       <model type="virtio-non-transitional"></model>
	//       <rom enabled="no"></rom>
	//       <alias name="ua-default"></alias>
	//     </interface>
	//     <serial type="unix">
	//       <source mode="bind" path="/run/vmkit/cirros/serial0"></source>
	//       <target port="0"></target>
	//       <log file="/run/vmkit/cirros/serial0-log" append="on"></log>
	//     </serial>
	//     <console type="pty">
	//       <target type="serial" port="0"></target>
	//     </console>
	//     <channel type="unix">
	//       <target type="virtio" name="org.qemu.guest_agent.0"></target>
	//     </channel>
	//     <memballoon model="virtio-non-transitional">
	//       <stats period="10"></stats>
	//     </memballoon>
	//   </devices>
	// </domain>
}

// Specs Convert cannot express fail with a FieldError naming the field.
func ExampleFieldError() {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", UID: "5d0a7e39-8b0f-4c8e-bf0e-2a33c8f6d1a2"},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("1Gi"),
				}},
				Devices: v1.Devices{Disks: []v1.Disk{
					{Name: "root"},
					{Name: "data", DiskDevice: v1.DiskDevice{LUN: &v1.LunTarget{Bus: v1.DiskBusVirtio}}},
				}},
			},
			Volumes: []v1.Volume{
				{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "db"}}},
				{Name: "data", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "data"}}},
			},
		},
	}
	_, err := domainxml.Convert(vmi, domainxml.Options{})
	var fe *domainxml.FieldError
	if errors.As(err, &fe) {
		fmt.Println(fe.Field)
		fmt.Println(err)
	}
	// Output:
	// spec.domain.devices.disks[1].lun
	// spec.domain.devices.disks[1].lun: not supported on bus "virtio"
}

// The node agent finds a domain's VMI in the metadata Convert writes.
func ExampleParseMetadata() {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "9b1f0c2e-7d41-4f3a-8e55-0c6d2b9a7e33"},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Memory: &v1.Memory{Guest: resource.NewQuantity(512<<20, resource.BinarySI)},
		}},
	}
	dom, err := domainxml.Convert(vmi, domainxml.Options{})
	if err != nil {
		panic(err)
	}
	m, err := domainxml.ParseMetadata(dom)
	if err != nil {
		panic(err)
	}
	fmt.Println(dom.Name, m.Namespace, m.Name, m.UID, m.GracePeriodSeconds)
	// Output:
	// apps_web apps web 9b1f0c2e-7d41-4f3a-8e55-0c6d2b9a7e33 30
}
