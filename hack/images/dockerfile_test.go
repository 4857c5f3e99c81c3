package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// dockerStage is what these tests read of a Dockerfile stage.
type dockerStage struct {
	config   v1.Config
	heredocs map[string]string // destination → content
	runs     []string          // RUN commands, continuation lines joined
}

// parseDockerfile reads the stages of one of build/images' Dockerfiles:
// FROM ... AS name, COPY heredocs, RUN, ENV, USER and ENTRYPOINT (JSON
// form). It knows just enough Dockerfile for those files.
func parseDockerfile(t *testing.T, file string) map[string]*dockerStage {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	from := regexp.MustCompile(`^FROM \S+ AS (\S+)$`)
	heredoc := regexp.MustCompile(`^COPY (?:--\S+ )*<<EOF (\S+)$`)
	stages := make(map[string]*dockerStage)
	var cur *dockerStage
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := from.FindStringSubmatch(line); m != nil {
			cur = &dockerStage{heredocs: make(map[string]string)}
			stages[m[1]] = cur
			continue
		}
		if cur == nil || line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := heredoc.FindStringSubmatch(line); m != nil {
			var content strings.Builder
			for i++; i < len(lines) && lines[i] != "EOF"; i++ {
				content.WriteString(lines[i] + "\n")
			}
			cur.heredocs[m[1]] = content.String()
			continue
		}
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		instr, args, _ := strings.Cut(line, " ")
		switch instr {
		case "RUN":
			cur.runs = append(cur.runs, strings.Join(strings.Fields(args), " "))
		case "ENV":
			cur.config.Env = append(cur.config.Env, args)
		case "USER":
			cur.config.User = args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(args), &cur.config.Entrypoint); err != nil {
				t.Fatalf("%s: ENTRYPOINT %s: %v", file, args, err)
			}
		}
	}
	return stages
}

// TestDockerfiles keeps build/images' Dockerfiles equivalent to the images
// the tool builds: the same runtime configuration, accounts, libvirt
// configuration and Debian packages.
func TestDockerfiles(t *testing.T) {
	b := &builder{opts: options{tag: "devel"}}
	dir := filepath.Join("..", "..", "build", "images")
	base := newTree()
	addAccounts(base, baseUsers, baseGroups)
	launcher := newTree()
	addLauncherConfig(launcher)

	for file, images := range map[string][]string{
		"pause.Dockerfile": {"pause"},
		"vmkit.Dockerfile": {"virt-operator", "virt-controller", "virt-api", "virt-handler", "virt-exportserver", "virt-launcher", "tiny-guest", "cloud-guest"},
	} {
		stages := parseDockerfile(t, filepath.Join(dir, file))
		bs, ok := stages["base"]
		if !ok {
			t.Fatalf("%s has no base stage", file)
		}
		for _, f := range []string{"etc/passwd", "etc/group"} {
			if diff := cmp.Diff(string(base.entries[f].data), bs.heredocs["/rootfs/"+f]); diff != "" {
				t.Errorf("%s: /%s (-tool +Dockerfile):\n%s", file, f, diff)
			}
		}
		for _, name := range images {
			st, ok := stages[name]
			if !ok {
				t.Errorf("%s has no stage %s", file, name)
				continue
			}
			if diff := cmp.Diff(spec(t, b, name).config, st.config); diff != "" {
				t.Errorf("%s: %s's configuration (-tool +Dockerfile):\n%s", file, name, diff)
			}
		}
		if ls, ok := stages["virt-launcher"]; ok {
			for _, f := range []string{"etc/libvirt/qemu.conf", "etc/libvirt/libvirtd.conf", "etc/libvirt/virtlogd.conf"} {
				if diff := cmp.Diff(string(launcher.entries[f].data), ls.heredocs["/"+f]); diff != "" {
					t.Errorf("%s: /%s (-tool +Dockerfile):\n%s", file, f, diff)
				}
			}
			install := "apt-get install -y --no-install-recommends " + strings.Join(launcherPackages, " ") + " &&"
			found := false
			for _, r := range ls.runs {
				found = found || strings.Contains(r, install)
			}
			if !found {
				t.Errorf("%s: no RUN of %q in the virt-launcher stage", file, install)
			}
		}
	}
}
