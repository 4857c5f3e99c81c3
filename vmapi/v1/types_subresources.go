package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The bodies of virt-api's subresource requests
// (subresources.kubevirt.io/v1), with KubeVirt's JSON names. Each is
// optional: an empty body means the zero value.

// Data of a Start state change request.
const (
	// StartRequestDataPausedKey in a Start request's data asks for the
	// instance to start paused.
	StartRequestDataPausedKey = "paused"
	// StartRequestDataPausedTrue is the value of StartRequestDataPausedKey
	// that asks for a paused start.
	StartRequestDataPausedTrue = "true"
)

// StartOptions is the body of PUT .../virtualmachines/{name}/start.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type StartOptions struct {
	metav1.TypeMeta `json:",inline"`
	// Paused starts the instance with its vCPUs stopped.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// DryRun ["All"] validates the request without persisting it.
	// +optional
	// +listType=atomic
	DryRun []string `json:"dryRun,omitempty"`
}

// StopOptions is the body of PUT .../virtualmachines/{name}/stop.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type StopOptions struct {
	metav1.TypeMeta `json:",inline"`
	// GracePeriod replaces the instance's termination grace period for
	// this stop (0 stops it at once).
	// +optional
	GracePeriod *int64 `json:"gracePeriod,omitempty"`
	// DryRun ["All"] validates the request without persisting it.
	// +optional
	// +listType=atomic
	DryRun []string `json:"dryRun,omitempty"`
}

// RestartOptions is the body of PUT .../virtualmachines/{name}/restart.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type RestartOptions struct {
	metav1.TypeMeta `json:",inline"`
	// GracePeriodSeconds 0 forces the restart: the launcher pod is deleted
	// with a grace period of one second. Only 0 is accepted, as in KubeVirt.
	// +optional
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
	// DryRun ["All"] validates the request without persisting it.
	// +optional
	// +listType=atomic
	DryRun []string `json:"dryRun,omitempty"`
}

// MigrateOptions is the body of PUT .../virtualmachines/{name}/migrate.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type MigrateOptions struct {
	metav1.TypeMeta `json:",inline"`
	// DryRun ["All"] validates the request without persisting it.
	// +optional
	// +listType=atomic
	DryRun []string `json:"dryRun,omitempty"`
	// AddedNodeSelector further restricts the nodes the instance may
	// migrate to.
	// +optional
	AddedNodeSelector map[string]string `json:"addedNodeSelector,omitempty"`
}

// PauseOptions is the body of PUT .../virtualmachineinstances/{name}/pause.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type PauseOptions struct {
	metav1.TypeMeta `json:",inline"`
	// DryRun ["All"] validates the request without pausing.
	// +optional
	// +listType=atomic
	DryRun []string `json:"dryRun,omitempty"`
}

// UnpauseOptions is the body of PUT .../virtualmachineinstances/{name}/unpause.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type UnpauseOptions struct {
	metav1.TypeMeta `json:",inline"`
	// DryRun ["All"] validates the request without resuming.
	// +optional
	// +listType=atomic
	DryRun []string `json:"dryRun,omitempty"`
}

// FreezeUnfreezeTimeout is the body of PUT .../virtualmachineinstances/{name}/freeze.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type FreezeUnfreezeTimeout struct {
	metav1.TypeMeta `json:",inline"`
	// UnfreezeTimeout thaws the guest's file systems after this long if no
	// unfreeze came first.
	UnfreezeTimeout *metav1.Duration `json:"unfreezeTimeout"`
}
