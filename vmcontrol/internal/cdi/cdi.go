// Package cdi is what the controllers know of CDI's DataVolumes: their API
// and which phases make one usable by a VMI.
package cdi

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DataVolumeResource is CDI's DataVolume API.
var DataVolumeResource = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}

// PhaseFailed is the phase of a DataVolume CDI could not populate.
const PhaseFailed = "Failed"

// Phase is a DataVolume's status.phase ("" before CDI set one).
func Phase(dv *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(dv.Object, "status", "phase")
	return p
}

// Usable reports whether a VMI can use a DataVolume in this phase: populated
// (Succeeded), or waiting for its first consumer, which the launcher pod
// then is (WaitForFirstConsumer, PendingPopulation). As KubeVirt.
func Usable(phase string) bool {
	switch phase {
	case "Succeeded", "WaitForFirstConsumer", "PendingPopulation":
		return true
	}
	return false
}
