package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vmkit/vmkit/internal/registry"
)

// startRegistry runs the cluster's OCI registry (internal/registry) on
// registry.DefaultAddr with its blobs in opts.RegistryDir, and pushes
// opts.Images to it.
func (e *Env) startRegistry(ctx context.Context, opts *NodeOptions) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	bin, err := registry.Binary(root)
	if err != nil {
		return err
	}
	dir := opts.RegistryDir
	if dir == "" {
		dir = filepath.Join(root, "_output", "registry")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	addr := registry.DefaultAddr
	if err := registry.Ready(ctx, addr); err == nil {
		return fmt.Errorf("something already answers as a registry on %s: stop it (a cluster of `make demo`? `make demo-down`)", addr)
	}
	cfg := filepath.Join(e.Dir, "registry.yaml")
	if err := registry.WriteConfig(cfg, addr, dir); err != nil {
		return err
	}
	p, err := e.startProcess("registry", bin, "serve", cfg)
	if err != nil {
		return err
	}
	if err := poll(ctx, p, "the registry on "+addr, func(ctx context.Context) (bool, string) {
		err := registry.Ready(ctx, addr)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return err
	}
	e.Registry = addr
	start := time.Now()
	pushed, err := registry.PushArchives(ctx, addr, opts.Images...)
	if err != nil {
		return err
	}
	e.registryPush = fmt.Sprintf("%d images pushed to the registry on %s in %v", len(pushed), addr, time.Since(start).Round(time.Millisecond))
	return nil
}
