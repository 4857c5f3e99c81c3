package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// plugin is the device plugin of one resource. Its gRPC methods may run
// concurrently with run; the serving state (srv, done, sock) belongs to
// run's goroutine alone.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	cfg     Config
	res     Resource
	device  string // the device node as the agent sees it (under DevRoot)
	socket  string // our socket
	kubelet string // the kubelet's registration socket

	mu      sync.Mutex
	healthy bool
	changed chan struct{} // closed (and replaced) when healthy changes

	srv  *grpc.Server
	done chan struct{} // closed when srv.Serve returned
	sock os.FileInfo   // the socket file srv listens on
}

func newPlugin(cfg Config, r Resource) *plugin {
	return &plugin{
		cfg:     cfg,
		res:     r,
		device:  filepath.Join(cfg.DevRoot, r.Device),
		socket:  filepath.Join(cfg.Dir, r.SocketName()),
		kubelet: filepath.Join(cfg.Dir, KubeletSocket),
		changed: make(chan struct{}),
	}
}

// run waits for the device node, then serves and registers the plugin
// until ctx ends, serving and registering again whenever the kubelet
// removed the socket or restarted.
func (p *plugin) run(ctx context.Context) {
	log := klog.FromContext(ctx).WithValues("resource", p.res.Name, "device", p.res.Device)
	ctx = klog.NewContext(ctx, log)
	if !p.waitForDevice(ctx) {
		return
	}
	p.setHealthy(ctx, true)
	defer p.stop(ctx)

	watch := time.NewTicker(p.cfg.WatchInterval)
	defer watch.Stop()
	health := time.NewTicker(p.cfg.HealthInterval)
	defer health.Stop()
	var (
		registeredWith os.FileInfo // kubelet.sock when Register succeeded; nil while unregistered
		lastErr        string      // the last error logged, so a retry loop logs each error once
	)
	logErr := func(err error, msg string) {
		if err.Error() != lastErr {
			lastErr = err.Error()
			log.Error(err, msg)
		}
	}
	for {
		if !p.serving() {
			if p.srv != nil {
				log.Info("plugin socket is gone (the kubelet restarted?): serving it again", "socket", p.socket)
				p.stop(ctx)
			}
			registeredWith = nil
			if err := p.serve(ctx); err != nil {
				logErr(err, "cannot serve the device plugin; retrying")
			}
		}
		if p.srv != nil {
			k, err := os.Stat(p.kubelet)
			switch {
			case registeredWith == nil:
			case err != nil:
				log.Info("kubelet.sock is gone (the kubelet stopped?): registering again once it is back", "socket", p.kubelet)
				registeredWith = nil
			case !sameFile(k, registeredWith):
				log.Info("kubelet.sock was re-created (the kubelet restarted): registering again", "socket", p.kubelet)
				registeredWith = nil
			}
			if registeredWith == nil {
				if err == nil {
					err = p.register(ctx)
				}
				if err != nil {
					logErr(err, "cannot register with the kubelet; retrying")
				} else {
					registeredWith, lastErr = k, ""
					log.Info("registered with the kubelet", "socket", p.socket, "devices", p.cfg.Count)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-watch.C:
		case <-health.C:
			ok, err := exists(p.device)
			if err != nil {
				logErr(err, "cannot check the device node")
			}
			p.setHealthy(ctx, ok)
		}
	}
}

// waitForDevice returns true once the device node exists, false when ctx
// ended first.
func (p *plugin) waitForDevice(ctx context.Context) bool {
	ok, err := exists(p.device)
	if ok {
		return true
	}
	log := klog.FromContext(ctx)
	if err != nil {
		log.Error(err, "cannot check the device node; not advertising it until it is there")
	} else {
		log.Info("no device node: not advertising it until it is there", "path", p.device)
	}
	t := time.NewTicker(p.cfg.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			if ok, _ := exists(p.device); ok {
				log.Info("device node appeared", "path", p.device)
				return true
			}
		}
	}
}

// exists reports whether the device node at path exists. Any file counts:
// the kubelet, not the plugin, opens the node.
func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("device node %s: %w", path, err)
	}
}

func (p *plugin) setHealthy(ctx context.Context, healthy bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healthy == healthy {
		return
	}
	p.healthy = healthy
	close(p.changed)
	p.changed = make(chan struct{})
	health := pluginapi.Unhealthy
	if healthy {
		health = pluginapi.Healthy
	}
	klog.FromContext(ctx).Info("device health", "path", p.device, "health", health)
}

// health returns the current health and a channel closed when it changes.
func (p *plugin) health() (string, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healthy {
		return pluginapi.Healthy, p.changed
	}
	return pluginapi.Unhealthy, p.changed
}

// serve starts the gRPC server on a fresh socket, replacing a stale one.
func (p *plugin) serve(ctx context.Context) error {
	if err := os.Remove(p.socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the stale plugin socket %s: %w", p.socket, err)
	}
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		return fmt.Errorf("plugin socket %s: %w", p.socket, err)
	}
	// stop removes the socket only if it is still ours: a socket at the
	// same path may be a new server's.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	sock, err := os.Stat(p.socket)
	if err != nil {
		l.Close()
		return fmt.Errorf("plugin socket %s: %w", p.socket, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil {
			klog.FromContext(ctx).Error(err, "device plugin server ended", "socket", p.socket)
		}
	}()
	p.srv, p.done, p.sock = srv, done, sock
	return nil
}

// sameFile reports whether a and b describe the same file, not merely one
// at the same inode: a file created after another was removed often gets
// its inode.
func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime())
}

// serving reports whether the server runs and its socket is still there.
func (p *plugin) serving() bool {
	if p.srv == nil {
		return false
	}
	fi, err := os.Stat(p.socket)
	return err == nil && sameFile(fi, p.sock)
}

// stop stops the server and removes its socket if it is still there.
func (p *plugin) stop(ctx context.Context) {
	if p.srv == nil {
		return
	}
	p.srv.Stop() // ends ListAndWatch streams too
	<-p.done
	if fi, err := os.Stat(p.socket); err == nil && sameFile(fi, p.sock) {
		if err := os.Remove(p.socket); err != nil {
			klog.FromContext(ctx).Error(err, "cannot remove the plugin socket", "socket", p.socket)
		}
	}
	p.srv, p.done, p.sock = nil, nil, nil
}

// register announces the plugin to the kubelet, which then connects to
// our socket and calls ListAndWatch.
func (p *plugin) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+p.kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("kubelet registration socket %s: %w", p.kubelet, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RegisterTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(p.socket),
		ResourceName: p.res.Name,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	if err != nil {
		return fmt.Errorf("registering %s with the kubelet at %s: %w", p.res.Name, p.kubelet, err)
	}
	return nil
}

// GetDevicePluginOptions: no PreStartContainer, no preferred allocation.
func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices, then again whenever their health
// changes, until the kubelet hangs up or the server stops.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		health, changed := p.health()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devices(p.res, p.cfg.Count, health)}); err != nil {
			return fmt.Errorf("sending %s devices: %w", p.res.Name, err)
		}
		select {
		case <-changed:
		case <-s.Context().Done():
			return nil
		}
	}
}

// Allocate gives each container the device node, read-write, at its host
// path. The devices are identical: which IDs were picked does not matter.
func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	devs := []*pluginapi.DeviceSpec{{ContainerPath: p.res.Device, HostPath: p.res.Device, Permissions: "rw"}}
	if d := p.res.WithIfPresent; d != "" {
		if ok, err := exists(filepath.Join(p.cfg.DevRoot, d)); ok && err == nil {
			devs = append(devs, &pluginapi.DeviceSpec{ContainerPath: d, HostPath: d, Permissions: "rw"})
		}
	}
	for range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{Devices: devs})
	}
	return resp, nil
}

// GetPreferredAllocation is not advertised (GetDevicePluginOptions); it
// answers with no preference.
func (p *plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{})
	}
	return resp, nil
}

// PreStartContainer is not advertised; it does nothing.
func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
