// Command release publishes a vmkit release (hack/release.sh, `make
// release`): it pushes each image of the per-architecture archives to the
// registry as a multi-architecture index tagged with the version, and writes
// the release manifests, kubevirt-operator.yaml and kubevirt-cr.yaml, with
// every component pinned by digest (internal/release). Credentials come from
// docker's and podman's login files, as for any registry client.
//
//	go run ./hack/release -registry registry.example.com/vmkit -version v0.1.0 \
//	    -archives amd64=_output/release/v0.1.0/images/amd64,arm64=... -out _output/release/v0.1.0
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/internal/release"
)

func main() {
	var (
		o         release.Options
		archives  string
		images    string
		out       string
		namespace string
	)
	flag.StringVar(&o.Registry, "registry", "", "where the images go: host[:port][/path] (required)")
	flag.StringVar(&o.Version, "version", "", "the release's version, the images' tag (required)")
	flag.StringVar(&o.SourceTag, "source-tag", "", "the tag the archives' images carry (default: the version)")
	flag.StringVar(&archives, "archives", "", "ARCH=DIR,...: the directories of image archives, one per architecture (required)")
	flag.StringVar(&images, "images", "", "comma-separated images to publish (default: "+strings.Join(append(release.Components, release.Disks...), ",")+")")
	flag.BoolVar(&o.Insecure, "insecure", false, "plain HTTP to the registry (always for 127.0.0.1 and localhost)")
	flag.StringVar(&out, "out", "", "directory of the release manifests (required)")
	flag.StringVar(&namespace, "namespace", installstrategy.DefaultNamespace, "the install namespace the manifests use")
	flag.Parse()
	if err := run(&o, archives, images, out, namespace); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(o *release.Options, archives, images, out, namespace string) error {
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	o.Archives = map[string]string{}
	for _, a := range strings.Split(archives, ",") {
		arch, dir, ok := strings.Cut(strings.TrimSpace(a), "=")
		if !ok || arch == "" || dir == "" {
			return fmt.Errorf("-archives: %q is not ARCH=DIR", a)
		}
		o.Archives[arch] = dir
	}
	if images != "" {
		o.Images = strings.Split(images, ",")
	}
	o.Log = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, err := release.Publish(ctx, *o)
	if err != nil {
		return err
	}
	cfg := p.OperatorConfig()
	cfg.Namespace = namespace
	if err := p.WriteManifests(out, cfg); err != nil {
		return err
	}
	for _, f := range []string{release.OperatorManifest, release.CRManifest, release.ImagesFile} {
		fmt.Println("release: wrote", filepath.Join(out, f))
	}
	return nil
}
