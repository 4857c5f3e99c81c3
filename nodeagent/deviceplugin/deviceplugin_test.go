package deviceplugin_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/klog/v2/ktesting"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vmkit/vmkit/nodeagent/deviceplugin"
)

// timeout bounds every wait in these tests; the plugins poll every tick.
const (
	timeout = 10 * time.Second
	tick    = 20 * time.Millisecond
)

// fakeKubelet serves the kubelet's Registration service on
// <dir>/kubelet.sock and, like the kubelet, calls the registering plugin
// back on its endpoint before answering.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir  string
	srv  *grpc.Server
	regs chan *pluginapi.RegisterRequest
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	path := filepath.Join(dir, deviceplugin.KubeletSocket)
	_ = os.Remove(path) // a restarted kubelet replaces its socket
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{dir: dir, srv: grpc.NewServer(), regs: make(chan *pluginapi.RegisterRequest, 100)}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(l) }()
	t.Cleanup(k.srv.Stop)
	return k
}

func (k *fakeKubelet) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("unsupported version %q", req.Version)
	}
	conn := dial(filepath.Join(k.dir, req.Endpoint))
	defer conn.Close()
	if _, err := pluginapi.NewDevicePluginClient(conn).GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		return nil, fmt.Errorf("calling the plugin back at %s: %w", req.Endpoint, err)
	}
	k.regs <- req
	return &pluginapi.Empty{}, nil
}

// next returns the next registration, failing the test after timeout.
func (k *fakeKubelet) next(t *testing.T) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.regs:
		return r
	case <-time.After(timeout):
		t.Fatal("no registration within", timeout)
		return nil
	}
}

// none fails the test if a registration arrives within d.
func (k *fakeKubelet) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case r := <-k.regs:
		t.Errorf("unexpected registration of %s", r.ResourceName)
	case <-time.After(d):
	}
}

func dial(path string) *grpc.ClientConn {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err) // only for a malformed target
	}
	return conn
}

// node is a device plugins directory and a device root with tun and
// vhost-net but no kvm (an emulation-only node). Regular files stand in
// for the device nodes.
type node struct {
	dir, devRoot string
}

func newNode(t *testing.T) node {
	t.Helper()
	// Short paths: a unix socket path has at most 107 bytes.
	base, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	n := node{dir: filepath.Join(base, "plugins"), devRoot: filepath.Join(base, "root")}
	if err := os.Mkdir(n.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.addDevice(t, "/dev/net/tun")
	n.addDevice(t, "/dev/vhost-net")
	return n
}

func (n node) addDevice(t *testing.T, dev string) {
	t.Helper()
	path := filepath.Join(n.devRoot, dev)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// run starts deviceplugin.Run; stop cancels it and returns its error.
func (n node) run(t *testing.T, count int) (stop func() error) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- deviceplugin.Run(ctx, deviceplugin.Config{
			Dir: n.dir, DevRoot: n.devRoot, Count: count, HealthInterval: tick, WatchInterval: tick,
		})
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(timeout):
				err = errors.New("Run did not return after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func (n node) socket(name string) string {
	return filepath.Join(n.dir, deviceplugin.Resource{Name: name}.SocketName())
}

// registrations collects n registrations, keyed by resource name.
func registrations(t *testing.T, k *fakeKubelet, n int) map[string]*pluginapi.RegisterRequest {
	t.Helper()
	got := map[string]*pluginapi.RegisterRequest{}
	for range n {
		r := k.next(t)
		if got[r.ResourceName] != nil {
			t.Errorf("%s registered twice", r.ResourceName)
		}
		got[r.ResourceName] = r
	}
	return got
}

func TestRegistersResourcesWhoseDeviceExists(t *testing.T) {
	n := newNode(t)
	k := startKubelet(t, n.dir)
	n.run(t, 0)

	got := registrations(t, k, 2)
	want := map[string]*pluginapi.RegisterRequest{
		"devices.kubevirt.io/tun":       {Version: "v1beta1", Endpoint: "kubevirt-tun.sock", ResourceName: "devices.kubevirt.io/tun", Options: &pluginapi.DevicePluginOptions{}},
		"devices.kubevirt.io/vhost-net": {Version: "v1beta1", Endpoint: "kubevirt-vhost-net.sock", ResourceName: "devices.kubevirt.io/vhost-net", Options: &pluginapi.DevicePluginOptions{}},
	}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Errorf("registrations (-want +got):\n%s", d)
	}
	k.none(t, 10*tick) // no kvm: /dev/kvm does not exist
	if _, err := os.Stat(n.socket("devices.kubevirt.io/kvm")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("kvm socket: want none, stat says %v", err)
	}

	// /dev/kvm appears (the module was loaded): kvm is registered then.
	n.addDevice(t, "/dev/kvm")
	if r := k.next(t); r.ResourceName != "devices.kubevirt.io/kvm" || r.Endpoint != "kubevirt-kvm.sock" {
		t.Errorf("registered %s at %s, want devices.kubevirt.io/kvm at kubevirt-kvm.sock", r.ResourceName, r.Endpoint)
	}
}

// recv returns the next ListAndWatch response's device health by ID.
func recv(t *testing.T, s pluginapi.DevicePlugin_ListAndWatchClient) map[string]string {
	t.Helper()
	resp, err := s.Recv()
	if err != nil {
		t.Fatalf("ListAndWatch: %v", err)
	}
	health := map[string]string{}
	for _, d := range resp.Devices {
		health[d.ID] = d.Health
	}
	return health
}

func allHealth(prefix string, n int, health string) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("%s%d", prefix, i)] = health
	}
	return m
}

func TestListAndWatchAndAllocate(t *testing.T) {
	n := newNode(t)
	k := startKubelet(t, n.dir)
	n.run(t, 0) // the default count
	registrations(t, k, 2)

	conn := dial(n.socket("devices.kubevirt.io/tun"))
	defer conn.Close()
	c := pluginapi.NewDevicePluginClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	opts, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&pluginapi.DevicePluginOptions{}, opts, protocmp.Transform()); d != "" {
		t.Errorf("options (-want +got):\n%s", d)
	}

	s, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(allHealth("tun", deviceplugin.DefaultCount, pluginapi.Healthy), recv(t, s)); d != "" {
		t.Errorf("devices (-want +got):\n%s", d)
	}

	alloc, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"tun0"}}, {DevicesIds: []string{"tun7", "tun8"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	spec := &pluginapi.ContainerAllocateResponse{Devices: []*pluginapi.DeviceSpec{{ContainerPath: "/dev/net/tun", HostPath: "/dev/net/tun", Permissions: "rw"}}}
	want := &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{spec, spec}}
	if d := cmp.Diff(want, alloc, protocmp.Transform()); d != "" {
		t.Errorf("Allocate (-want +got):\n%s", d)
	}

	// The device node goes away: every device turns Unhealthy; it comes
	// back: Healthy again.
	if err := os.Remove(filepath.Join(n.devRoot, "/dev/net/tun")); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(allHealth("tun", deviceplugin.DefaultCount, pluginapi.Unhealthy), recv(t, s)); d != "" {
		t.Errorf("devices after removing the device node (-want +got):\n%s", d)
	}
	n.addDevice(t, "/dev/net/tun")
	if d := cmp.Diff(allHealth("tun", deviceplugin.DefaultCount, pluginapi.Healthy), recv(t, s)); d != "" {
		t.Errorf("devices after re-creating the device node (-want +got):\n%s", d)
	}
}

func TestKubeletRestart(t *testing.T) {
	n := newNode(t)
	k := startKubelet(t, n.dir)
	n.run(t, 3)
	registrations(t, k, 2)

	// A restarting kubelet deletes every socket in the directory.
	sock := n.socket("devices.kubevirt.io/vhost-net")
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if r := k.next(t); r.ResourceName != "devices.kubevirt.io/vhost-net" {
		t.Errorf("registered %s again, want devices.kubevirt.io/vhost-net", r.ResourceName)
	}
	k.none(t, 10*tick) // tun's socket is still there: no need to register it again

	// The new socket serves (the fake kubelet called it back, but check
	// ListAndWatch as well).
	conn := dial(sock)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := pluginapi.NewDevicePluginClient(conn).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(allHealth("vhost-net", 3, pluginapi.Healthy), recv(t, s)); d != "" {
		t.Errorf("devices (-want +got):\n%s", d)
	}

	// A new kubelet.sock: both register with the new kubelet, even though
	// their sockets are still there.
	// Stopping removes kubelet.sock; the pause lets the plugins see it gone
	// (a new socket may get the old one's inode and time stamp).
	k.srv.Stop()
	time.Sleep(10 * tick)
	k = startKubelet(t, n.dir)
	registrations(t, k, 2)
}

func TestWaitsForKubelet(t *testing.T) {
	n := newNode(t)
	n.run(t, 1)
	time.Sleep(10 * tick) // a few failed registrations: no kubelet.sock, then nobody listening on it
	if _, err := os.Stat(n.socket("devices.kubevirt.io/tun")); err != nil {
		t.Errorf("the plugin serves before the kubelet is up: %v", err)
	}
	k := startKubelet(t, n.dir)
	registrations(t, k, 2)
}

func TestStopRemovesSockets(t *testing.T) {
	n := newNode(t)
	k := startKubelet(t, n.dir)
	stop := n.run(t, 1)
	registrations(t, k, 2)

	conn := dial(n.socket("devices.kubevirt.io/tun"))
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := pluginapi.NewDevicePluginClient(conn).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, s)

	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := s.Recv(); err == nil {
		t.Error("ListAndWatch stream still open after Run returned")
	}
	entries, err := os.ReadDir(n.dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if d := cmp.Diff([]string{"kubelet.sock"}, left); d != "" {
		t.Errorf("device plugins directory after Run (-want +got):\n%s", d)
	}
}

func TestReplacesStaleSocket(t *testing.T) {
	n := newNode(t)
	// A socket left by a previous agent that was killed.
	stale := n.socket("devices.kubevirt.io/tun")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	k := startKubelet(t, n.dir)
	n.run(t, 1)
	registrations(t, k, 2)
}

func TestConfigErrors(t *testing.T) {
	n := newNode(t)
	for _, tc := range []struct {
		name string
		cfg  deviceplugin.Config
		want string
	}{
		{"missing dir", deviceplugin.Config{Dir: filepath.Join(n.dir, "nope")}, filepath.Join(n.dir, "nope")},
		{"dir is a file", deviceplugin.Config{Dir: filepath.Join(n.devRoot, "dev/net/tun")}, "is not a directory"},
		{"negative count", deviceplugin.Config{Dir: n.dir, Count: -1}, "device count -1"},
		{"bad name", deviceplugin.Config{Dir: n.dir, Resources: []deviceplugin.Resource{{Name: "tun", Device: "/dev/net/tun"}}}, `resource "tun"`},
		{"relative device", deviceplugin.Config{Dir: n.dir, Resources: []deviceplugin.Resource{{Name: "example.com/tun", Device: "dev/net/tun"}}}, "not an absolute path"},
		{"same socket", deviceplugin.Config{Dir: n.dir, Resources: []deviceplugin.Resource{
			{Name: "example.com/tun", Device: "/dev/net/tun"}, {Name: "example.org/tun", Device: "/dev/net/tun"},
		}}, "socket kubevirt-tun.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			err := deviceplugin.Run(ctx, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestKVMBringsVhostNet: an allocation of devices.kubevirt.io/kvm gives
// /dev/vhost-net too where the node has it, and only /dev/kvm where it has
// not (QEMU's userspace virtio-net runs there).
func TestKVMBringsVhostNet(t *testing.T) {
	n := newNode(t)
	n.addDevice(t, "/dev/kvm")
	k := startKubelet(t, n.dir)
	n.run(t, 0)
	registrations(t, k, 3)
	conn := dial(n.socket("devices.kubevirt.io/kvm"))
	defer conn.Close()
	c := pluginapi.NewDevicePluginClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	allocate := func() []*pluginapi.DeviceSpec {
		t.Helper()
		alloc, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"kvm0"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return alloc.ContainerResponses[0].Devices
	}
	kvm := &pluginapi.DeviceSpec{ContainerPath: "/dev/kvm", HostPath: "/dev/kvm", Permissions: "rw"}
	vhost := &pluginapi.DeviceSpec{ContainerPath: "/dev/vhost-net", HostPath: "/dev/vhost-net", Permissions: "rw"}
	if d := cmp.Diff([]*pluginapi.DeviceSpec{kvm, vhost}, allocate(), protocmp.Transform()); d != "" {
		t.Errorf("kvm on a node with vhost-net (-want +got):\n%s", d)
	}
	if err := os.Remove(filepath.Join(n.devRoot, "/dev/vhost-net")); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]*pluginapi.DeviceSpec{kvm}, allocate(), protocmp.Transform()); d != "" {
		t.Errorf("kvm on a node without vhost-net (-want +got):\n%s", d)
	}
}
