package virtapi

import (
	"net/http"
	"runtime"
	"runtime/debug"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// subresources are the resources the API lists in discovery, as KubeVirt's
// virt-api does: kubectl and clients learn from them which verbs exist.
var subresources = []metav1.APIResource{
	{Name: "virtualmachines/start", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/stop", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/restart", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/migrate", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/expand-spec", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachines/addvolume", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/removevolume", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/console", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/vnc", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/portforward", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/pause", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/unpause", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/softreboot", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}},
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

// VersionInfo is what GET .../version answers, with the JSON names of
// KubeVirt's version.Info (virtctl version prints it).
type VersionInfo struct {
	GitVersion   string `json:"gitVersion"`
	GitCommit    string `json:"gitCommit"`
	GitTreeState string `json:"gitTreeState"`
	BuildDate    string `json:"buildDate"`
	GoVersion    string `json:"goVersion"`
	Compiler     string `json:"compiler"`
	Platform     string `json:"platform"`
}

// BuildVersion describes the running binary, from the build information
// the Go toolchain records (module version and VCS revision when built from
// a repository).
func BuildVersion() VersionInfo {
	v := VersionInfo{
		GitVersion:   "devel",
		GitTreeState: "unknown",
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		v.GitVersion = mv
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.GitCommit = s.Value
		case "vcs.time":
			v.BuildDate = s.Value
		case "vcs.modified":
			v.GitTreeState = "clean"
			if s.Value == "true" {
				v.GitTreeState = "dirty"
			}
		}
	}
	return v
}

func serveVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, BuildVersion())
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
