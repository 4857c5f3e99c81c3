package deviceplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const (
	// DefaultDir is the kubelet's device plugins directory: plugin sockets
	// and the kubelet's registration socket (kubelet.sock) live there.
	DefaultDir = "/var/lib/kubelet/device-plugins"
	// KubeletSocket is the base name of the kubelet's registration socket
	// in the device plugins directory.
	KubeletSocket = "kubelet.sock"
	// DefaultCount is how many devices each plugin advertises (KubeVirt's
	// number for kvm, tun and vhost-net): the most launcher pods of one
	// node that can use the device.
	DefaultCount = 1000
	// DefaultHealthInterval is how often a plugin checks its device node.
	DefaultHealthInterval = 5 * time.Second
	// DefaultWatchInterval is how often a plugin checks its socket and the
	// kubelet's, and retries a failed registration.
	DefaultWatchInterval = time.Second
	// DefaultRegisterTimeout bounds one Register call to the kubelet.
	DefaultRegisterTimeout = 10 * time.Second
)

// Resource is one extended resource backed by a host device node.
type Resource struct {
	// Name is the extended resource name, e.g. devices.kubevirt.io/tun.
	Name string
	// Device is the device node's absolute path on the host, e.g.
	// /dev/net/tun. Containers get it at the same path.
	Device string
	// WithIfPresent is a device node an allocation also gives, at the
	// same path, when the node has it: devices.kubevirt.io/kvm brings
	// /dev/vhost-net, so that a launcher pod gets in-kernel virtio-net
	// where the node offers it without asking for a resource a node
	// without the vhost_net module never has (QEMU's userspace virtio-net
	// runs there instead). Empty: none.
	WithIfPresent string
}

// SocketName is the base name of the resource's plugin socket in the device
// plugins directory: kubevirt-<name>.sock, where <name> is the part of
// Name after the last slash (KubeVirt's names).
func (r Resource) SocketName() string {
	return "kubevirt-" + r.Name[strings.LastIndex(r.Name, "/")+1:] + ".sock"
}

// DefaultResources returns the resources launcher pods request:
// devices.kubevirt.io/kvm (/dev/kvm, with /dev/vhost-net where the node has
// it), tun (/dev/net/tun) and vhost-net (/dev/vhost-net, which KubeVirt's
// launcher pods ask for; vmkit's get it with kvm).
func DefaultResources() []Resource {
	return []Resource{
		{Name: v1.KVMDevice, Device: "/dev/kvm", WithIfPresent: "/dev/vhost-net"},
		{Name: v1.TunDevice, Device: "/dev/net/tun"},
		{Name: v1.VhostNetDevice, Device: "/dev/vhost-net"},
	}
}

// Config configures Run. The zero value serves DefaultResources in
// DefaultDir.
type Config struct {
	// Dir is the kubelet's device plugins directory as seen from the agent
	// (default DefaultDir). It must exist.
	Dir string
	// DevRoot is where the agent sees the host's root file system when it
	// checks that a device node exists (default "/"; e.g. /proc/1/root in a
	// container without the host's /dev, or a test directory). The kubelet
	// is always given the device's host path.
	DevRoot string
	// Count is how many devices each plugin advertises (default
	// DefaultCount).
	Count int
	// Resources are the resources to serve (default DefaultResources()).
	// Only those whose device node exists are registered; one that appears
	// later is registered then.
	Resources []Resource
	// HealthInterval is how often device nodes are checked (default
	// DefaultHealthInterval).
	HealthInterval time.Duration
	// WatchInterval is how often the plugin sockets and kubelet.sock are
	// checked and failed registrations retried (default
	// DefaultWatchInterval).
	WatchInterval time.Duration
	// RegisterTimeout bounds one Register call (default
	// DefaultRegisterTimeout).
	RegisterTimeout time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return c, fmt.Errorf("device plugins directory %s: %w", c.Dir, err)
	}
	c.Dir = dir
	if c.DevRoot == "" {
		c.DevRoot = "/"
	}
	if c.Count == 0 {
		c.Count = DefaultCount
	}
	if c.Count < 0 {
		return c, fmt.Errorf("device count %d: must be positive", c.Count)
	}
	if c.Resources == nil {
		c.Resources = DefaultResources()
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = DefaultHealthInterval
	}
	if c.WatchInterval <= 0 {
		c.WatchInterval = DefaultWatchInterval
	}
	if c.RegisterTimeout <= 0 {
		c.RegisterTimeout = DefaultRegisterTimeout
	}
	sockets := map[string]string{KubeletSocket: "the kubelet"}
	for _, r := range c.Resources {
		if i := strings.LastIndex(r.Name, "/"); i <= 0 || i == len(r.Name)-1 {
			return c, fmt.Errorf("resource %q: want <domain>/<name>, e.g. devices.kubevirt.io/tun", r.Name)
		}
		if !filepath.IsAbs(r.Device) {
			return c, fmt.Errorf("resource %s: device %q is not an absolute path", r.Name, r.Device)
		}
		if other, ok := sockets[r.SocketName()]; ok {
			return c, fmt.Errorf("resource %s: socket %s is also %s's", r.Name, r.SocketName(), other)
		}
		sockets[r.SocketName()] = r.Name
	}
	return c, nil
}

// Run serves a device plugin for each of cfg.Resources whose device node
// exists and registers it with the kubelet, until ctx ends; then it stops
// the plugins, removes their sockets and returns nil. It returns an error
// only for an invalid Config or a device plugins directory that does not
// exist; a kubelet that is not up yet, or restarts, is waited for.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if err := checkDir(cfg.Dir); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, r := range cfg.Resources {
		p := newPlugin(cfg, r)
		wg.Go(func() { p.run(ctx) })
	}
	wg.Wait()
	return nil
}

// devices returns count devices in the given health state, with IDs
// <name><i> (tun0, tun1, …) as KubeVirt names them.
func devices(r Resource, count int, health string) []*pluginapi.Device {
	prefix := r.Name[strings.LastIndex(r.Name, "/")+1:]
	devs := make([]*pluginapi.Device, count)
	for i := range devs {
		devs[i] = &pluginapi.Device{ID: fmt.Sprintf("%s%d", prefix, i), Health: health}
	}
	return devs
}

// checkDir fails unless dir is a directory: the kubelet creates it, and
// virt-handler's DaemonSet mounts it from the host.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("device plugins directory: %w (does a kubelet run on this node?)", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("device plugins directory %s is not a directory", dir)
	}
	return nil
}
