package v1

import (
	"encoding/base64"
	"fmt"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func volumeNames(volumes []Volume) map[string]bool {
	names := make(map[string]bool, len(volumes))
	for _, v := range volumes {
		names[v.Name] = true
	}
	return names
}

// validateDisks checks disk names, that each names a volume, that each sets
// at most one device, and the bus and PCI address of each device.
func validateDisks(disksPath *field.Path, disks []Disk, volumes map[string]bool, volumesPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i := range disks {
		d := &disks[i]
		p := disksPath.Index(i)
		errs = append(errs, validateName(p.Child("name"), d.Name, seen)...)
		if d.Name != "" && !volumes[d.Name] {
			errs = append(errs, withDetail(field.NotFound(p.Child("name"), d.Name), fmt.Sprintf("no volume of this name in %s", volumesPath)))
		}
		errs = append(errs, validateOneOf(p, "disk device", []setField{
			{"disk", d.Disk != nil}, {"lun", d.LUN != nil}, {"cdrom", d.CDRom != nil},
		}, false)...)
		if d.Disk != nil {
			errs = append(errs, validateDiskPCIAddress(p.Child("disk"), d.Disk)...)
		}
		if d.CDRom != nil && d.CDRom.Bus == DiskBusVirtio {
			errs = append(errs, field.NotSupported(p.Child("cdrom", "bus"), d.CDRom.Bus, []DiskBus{DiskBusSATA, DiskBusSCSI, DiskBusUSB}))
		}
	}
	return errs
}

// validateDiskPCIAddress checks a disk's PCI address, which only virtio disks may have.
func validateDiskPCIAddress(diskPath *field.Path, d *DiskTarget) field.ErrorList {
	if d.PciAddress == "" {
		return nil
	}
	p := diskPath.Child("pciAddress")
	if d.Bus != "" && d.Bus != DiskBusVirtio {
		return field.ErrorList{field.Invalid(p, d.PciAddress, fmt.Sprintf("only virtio disks have a PCI address, and %s is %q", diskPath.Child("bus"), d.Bus))}
	}
	return validatePCIAddress(p, d.PciAddress)
}

// validatePCIAddress checks a PCI address has the form dddd:bb:ss.f
// (hexadecimal domain, bus and slot, slot at most 1f, function 0-7).
func validatePCIAddress(p *field.Path, addr string) field.ErrorList {
	if addr == "" {
		return nil
	}
	const detail = "must be a PCI address dddd:bb:ss.f such as 0000:81:01.0 (hexadecimal domain, bus and slot; slot at most 1f; function 0-7)"
	if len(addr) != len("0000:00:00.0") || addr[4] != ':' || addr[7] != ':' || addr[10] != '.' {
		return field.ErrorList{field.Invalid(p, addr, detail)}
	}
	_, errDomain := strconv.ParseUint(addr[0:4], 16, 16)
	_, errBus := strconv.ParseUint(addr[5:7], 16, 8)
	slot, errSlot := strconv.ParseUint(addr[8:10], 16, 8)
	fn, errFn := strconv.ParseUint(addr[11:12], 8, 8)
	if errDomain != nil || errBus != nil || errSlot != nil || errFn != nil || slot > 0x1f || fn > 7 {
		return field.ErrorList{field.Invalid(p, addr, detail)}
	}
	return nil
}

// validateVolumes checks volume names, that each volume has exactly one
// source, and the sources the schema cannot fully check.
func validateVolumes(volumesPath *field.Path, volumes []Volume) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i := range volumes {
		v := &volumes[i]
		p := volumesPath.Index(i)
		errs = append(errs, validateName(p.Child("name"), v.Name, seen)...)
		errs = append(errs, validateOneOf(p, "volume source", volumeSources(&v.VolumeSource), true)...)
		errs = append(errs, validateVolumeSource(p, &v.VolumeSource)...)
	}
	return errs
}

// volumeSources lists a volume's sources in the order of the API.
func volumeSources(s *VolumeSource) []setField {
	return []setField{
		{"hostDisk", s.HostDisk != nil},
		{"persistentVolumeClaim", s.PersistentVolumeClaim != nil},
		{"cloudInitNoCloud", s.CloudInitNoCloud != nil},
		{"cloudInitConfigDrive", s.CloudInitConfigDrive != nil},
		{"sysprep", s.Sysprep != nil},
		{"containerDisk", s.ContainerDisk != nil},
		{"ephemeral", s.Ephemeral != nil},
		{"emptyDisk", s.EmptyDisk != nil},
		{"dataVolume", s.DataVolume != nil},
		{"configMap", s.ConfigMap != nil},
		{"secret", s.Secret != nil},
		{"downwardAPI", s.DownwardAPI != nil},
		{"serviceAccount", s.ServiceAccount != nil},
	}
}

// validateVolumeSource checks each source that is set.
func validateVolumeSource(p *field.Path, s *VolumeSource) field.ErrorList {
	var errs field.ErrorList
	if s.HostDisk != nil {
		errs = append(errs, validateHostDisk(p.Child("hostDisk"), s.HostDisk)...)
	}
	if s.EmptyDisk != nil {
		errs = append(errs, validateCapacity(p.Child("emptyDisk", "capacity"), s.EmptyDisk.Capacity, "an empty disk needs a capacity, such as 10Gi")...)
	}
	if s.ContainerDisk != nil && strings.TrimSpace(s.ContainerDisk.Image) == "" {
		errs = append(errs, field.Required(p.Child("containerDisk", "image"), "name the container image holding the disk"))
	}
	if s.PersistentVolumeClaim != nil && s.PersistentVolumeClaim.ClaimName == "" {
		errs = append(errs, field.Required(p.Child("persistentVolumeClaim", "claimName"), "name the PersistentVolumeClaim"))
	}
	if s.DataVolume != nil && s.DataVolume.Name == "" {
		errs = append(errs, field.Required(p.Child("dataVolume", "name"), "name the DataVolume"))
	}
	if c := s.CloudInitNoCloud; c != nil {
		errs = append(errs, validateCloudInit(p.Child("cloudInitNoCloud"), cloudInitData{
			c.UserData, c.UserDataBase64, c.UserDataSecretRef, c.NetworkData, c.NetworkDataBase64, c.NetworkDataSecretRef,
		})...)
	}
	if c := s.CloudInitConfigDrive; c != nil {
		errs = append(errs, validateCloudInit(p.Child("cloudInitConfigDrive"), cloudInitData{
			c.UserData, c.UserDataBase64, c.UserDataSecretRef, c.NetworkData, c.NetworkDataBase64, c.NetworkDataSecretRef,
		})...)
	}
	return errs
}

// validateHostDisk checks a host disk has an absolute path and a known type,
// and that DiskOrCreate comes with a capacity.
func validateHostDisk(p *field.Path, hd *HostDisk) field.ErrorList {
	var errs field.ErrorList
	switch {
	case hd.Path == "":
		errs = append(errs, field.Required(p.Child("path"), "set the disk image's path on the node"))
	case !path.IsAbs(hd.Path):
		errs = append(errs, field.Invalid(p.Child("path"), hd.Path, "the disk image's path on the node must be absolute (start with /)"))
	}
	switch hd.Type {
	case HostDiskExists:
	case HostDiskExistsOrCreateEmpty:
		errs = append(errs, validateCapacity(p.Child("capacity"), hd.Capacity, "type DiskOrCreate needs the capacity of the image to create, such as 10Gi")...)
	case "":
		errs = append(errs, field.Required(p.Child("type"), "set Disk (the image must exist) or DiskOrCreate"))
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), hd.Type, []HostDiskType{HostDiskExists, HostDiskExistsOrCreateEmpty}))
	}
	return errs
}

// validateCapacity checks a disk capacity is set and positive.
func validateCapacity(p *field.Path, q resource.Quantity, requiredDetail string) field.ErrorList {
	switch q.Sign() {
	case 0:
		return field.ErrorList{field.Required(p, requiredDetail)}
	case -1:
		return field.ErrorList{field.Invalid(p, q.String(), "must be greater than 0")}
	}
	return nil
}

// cloudInitData is what NoCloud and ConfigDrive sources have in common.
type cloudInitData struct {
	userData, userDataBase64       string
	userDataSecretRef              *corev1.LocalObjectReference
	networkData, networkDataBase64 string
	networkDataSecretRef           *corev1.LocalObjectReference
}

// validateCloudInit checks a cloud-init source has at most one user-data and
// one network-data source, valid base64 and named Secrets, and carries some
// data.
func validateCloudInit(p *field.Path, c cloudInitData) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateOneOf(p, "user-data source", []setField{
		{"userData", c.userData != ""}, {"userDataBase64", c.userDataBase64 != ""}, {"secretRef", c.userDataSecretRef != nil},
	}, false)...)
	errs = append(errs, validateOneOf(p, "network-data source", []setField{
		{"networkData", c.networkData != ""}, {"networkDataBase64", c.networkDataBase64 != ""}, {"networkDataSecretRef", c.networkDataSecretRef != nil},
	}, false)...)
	errs = append(errs, validateBase64(p.Child("userDataBase64"), c.userDataBase64)...)
	errs = append(errs, validateBase64(p.Child("networkDataBase64"), c.networkDataBase64)...)
	if c.userDataSecretRef != nil && c.userDataSecretRef.Name == "" {
		errs = append(errs, field.Required(p.Child("secretRef", "name"), "name the Secret holding the user data"))
	}
	if c.networkDataSecretRef != nil && c.networkDataSecretRef.Name == "" {
		errs = append(errs, field.Required(p.Child("networkDataSecretRef", "name"), "name the Secret holding the network data"))
	}
	hasUserData := c.userData != "" || c.userDataBase64 != "" || c.userDataSecretRef != nil
	hasNetworkData := c.networkData != "" || c.networkDataBase64 != "" || c.networkDataSecretRef != nil
	if !hasUserData && !hasNetworkData {
		errs = append(errs, field.Required(p.Child("userData"), "cloud-init needs data: set userData, userDataBase64 or secretRef (or network data)"))
	}
	return errs
}

// validateBase64 checks an optional value is standard base64. The value is
// left out of the error: user data often holds secrets.
func validateBase64(p *field.Path, value string) field.ErrorList {
	if value == "" {
		return nil
	}
	if _, err := base64.StdEncoding.DecodeString(value); err != nil {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must be standard base64 (RFC 4648, with padding): "+err.Error())}
	}
	return nil
}
