// Package version says which vmkit a binary is, in the shape of KubeVirt's
// version.Info, which virtctl and vmctl print: what virt-api answers at
// GET /apis/subresources.kubevirt.io/v1/version and what vmctl reports
// about itself.
package version

import (
	"runtime"
	"runtime/debug"
)

// modulePath is vmkit's Go module, whose version a binary's build
// information records.
const modulePath = "github.com/vmkit/vmkit"

// Info is a build's version, with the JSON names of KubeVirt's
// version.Info.
type Info struct {
	GitVersion   string `json:"gitVersion"`
	GitCommit    string `json:"gitCommit"`
	GitTreeState string `json:"gitTreeState"`
	BuildDate    string `json:"buildDate"`
	GoVersion    string `json:"goVersion"`
	Compiler     string `json:"compiler"`
	Platform     string `json:"platform"`
}

// Get is the version of vmkit in this binary, from its build information:
// the vmkit module's version (a tag, or a pseudo-version of the commit;
// also when vmkit is a dependency of the binary), the VCS revision, time
// and tree state when built from a vmkit checkout, and the Go toolchain
// and platform.
func Get() Info {
	v := Info{
		GitVersion: "v0.0.0-unknown",
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	mod := &bi.Main
	if mod.Path != modulePath {
		for _, dep := range bi.Deps {
			if dep.Path == modulePath {
				mod = dep
				break
			}
		}
	}
	if mod.Version != "" && mod.Version != "(devel)" {
		v.GitVersion = mod.Version
	}
	if mod != &bi.Main {
		return v
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
