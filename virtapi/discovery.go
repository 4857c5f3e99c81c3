package virtapi

import (
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/version"
)

// subresources are the resources the API lists in discovery, as KubeVirt's
// virt-api does: kubectl and clients learn from them which verbs exist.
var subresources = []metav1.APIResource{
	{Name: "virtualmachines/start", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/stop", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/restart", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/migrate", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/expand-spec", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachines/portforward", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachines/addvolume", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/removevolume", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/memorydump", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/removememorydump", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/console", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/vnc", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/portforward", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/pause", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/unpause", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/softreboot", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/reset", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/freeze", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/unfreeze", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/guestosinfo", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/userlist", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/filesystemlist", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/addvolume", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/removevolume", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
}

var groupVersion = metav1.GroupVersionForDiscovery{GroupVersion: Group + "/" + Version, Version: Version}

func apiGroup() metav1.APIGroup {
	return metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             Group,
		Versions:         []metav1.GroupVersionForDiscovery{groupVersion},
		PreferredVersion: groupVersion,
	}
}

func serveAPIGroupList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{apiGroup()},
	})
}

func serveAPIGroup(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, apiGroup())
}

func serveAPIResourceList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: groupVersion.GroupVersion,
		APIResources: subresources,
	})
}

func serveVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, version.Get())
}

// The subresources have no schema of their own (their bodies are
// kubevirt.io/v1 types), so the OpenAPI documents are empty; serving them
// keeps kube-apiserver's OpenAPI aggregation from retrying and logging a
// failure for the APIService every few seconds.
func serveOpenAPIV2(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"swagger": "2.0",
		"info":    map[string]string{"title": "KubeVirt subresources (vmkit)", "version": Version},
		"paths":   map[string]any{},
	})
}

func serveOpenAPIV3(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"paths": map[string]any{}})
}
