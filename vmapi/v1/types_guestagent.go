package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the QEMU guest agent reports, as virt-handler's REST API serves it
// (GET .../virtualmachineinstances/{name}/guestosinfo, userlist and
// filesystemlist), with KubeVirt's JSON names.

// VirtualMachineInstanceGuestAgentInfo is what the guest agent reports about
// the guest: its version and commands, host name, OS, time zone, logged-in
// users and file systems.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineInstanceGuestAgentInfo struct {
	metav1.TypeMeta `json:",inline"`
	// GAVersion is the guest agent's version.
	// +optional
	GAVersion string `json:"guestAgentVersion,omitempty"`
	// SupportedCommands are the commands the guest agent knows.
	// +optional
	// +listType=atomic
	SupportedCommands []GuestAgentCommandInfo `json:"supportedCommands,omitempty"`
	// Hostname is the guest's host name.
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// OS describes the guest's operating system.
	// +optional
	OS VirtualMachineInstanceGuestOSInfo `json:"os,omitempty"`
	// Timezone is the guest's time zone and its offset from UTC in
	// seconds, "<zone>, <offset>".
	// +optional
	Timezone string `json:"timezone,omitempty"`
	// UserList are the users logged in to the guest.
	// +optional
	UserList []VirtualMachineInstanceGuestOSUser `json:"userList,omitempty"`
	// FSInfo are the guest's mounted file systems.
	// +optional
	FSInfo VirtualMachineInstanceFileSystemInfo `json:"fsInfo,omitempty"`
	// FSFreezeStatus is "frozen" while a freeze of the guest's file systems
	// was requested.
	// +optional
	FSFreezeStatus string `json:"fsFreezeStatus,omitempty"`
}

// GuestAgentCommandInfo is one command the guest agent knows.
type GuestAgentCommandInfo struct {
	// Name of the command, such as guest-get-osinfo.
	Name string `json:"name"`
	// Enabled is false for commands the agent was told not to run.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// VirtualMachineInstanceGuestOSUserList is the list of users logged in to
// the guest.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineInstanceGuestOSUserList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the users.
	Items []VirtualMachineInstanceGuestOSUser `json:"items"`
}

// VirtualMachineInstanceGuestOSUser is a user logged in to the guest.
type VirtualMachineInstanceGuestOSUser struct {
	// UserName is the user's name.
	UserName string `json:"userName"`
	// Domain is the user's domain (Windows guests).
	// +optional
	Domain string `json:"domain,omitempty"`
	// LoginTime is when the user logged in, in fractional seconds since the
	// epoch; the earliest login when the user has several sessions.
	// +optional
	LoginTime float64 `json:"loginTime,omitempty"`
}

// VirtualMachineInstanceFileSystemInfo are the guest's file systems.
type VirtualMachineInstanceFileSystemInfo struct {
	// Filesystems are the mounted file systems.
	Filesystems []VirtualMachineInstanceFileSystem `json:"disks"`
}

// VirtualMachineInstanceFileSystemList is the list of the guest's mounted
// file systems.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineInstanceFileSystemList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the file systems.
	Items []VirtualMachineInstanceFileSystem `json:"items"`
}

// VirtualMachineInstanceFileSystemDisk is a disk a guest file system is on.
type VirtualMachineInstanceFileSystemDisk struct {
	// Serial is the disk's serial number.
	// +optional
	Serial string `json:"serial,omitempty"`
	// BusType is the disk's bus as the guest sees it: virtio, scsi, sata, ...
	BusType string `json:"busType"`
}

// VirtualMachineInstanceFileSystem is a mounted guest file system.
type VirtualMachineInstanceFileSystem struct {
	// DiskName is the device the guest mounted, such as vda1.
	DiskName string `json:"diskName"`
	// MountPoint is where it is mounted.
	MountPoint string `json:"mountPoint"`
	// FileSystemType is the file system, such as ext4.
	FileSystemType string `json:"fileSystemType"`
	// UsedBytes and TotalBytes are its usage and size.
	UsedBytes  int `json:"usedBytes"`
	TotalBytes int `json:"totalBytes"`
	// Disk are the disks it is on.
	// +optional
	Disk []VirtualMachineInstanceFileSystemDisk `json:"disk,omitempty"`
}
