package deviceplugin_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vmkit/vmkit/nodeagent/deviceplugin"
)

// The resources launcher pods request, and the socket each plugin serves
// in the kubelet's device plugins directory.
func ExampleDefaultResources() {
	for _, r := range deviceplugin.DefaultResources() {
		fmt.Println(r.Name, r.Device, r.SocketName())
	}
	// Output:
	// devices.kubevirt.io/kvm /dev/kvm kubevirt-kvm.sock
	// devices.kubevirt.io/tun /dev/net/tun kubevirt-tun.sock
	// devices.kubevirt.io/vhost-net /dev/vhost-net kubevirt-vhost-net.sock
}

// virt-handler runs the plugins next to the agent until it is told to
// stop: deviceplugin.Run(ctx, deviceplugin.Config{}) serves the default
// resources in /var/lib/kubelet/device-plugins. Here the directory and the
// host's /dev are temporary, only /dev/net/tun exists, and no kubelet is
// running (the plugins keep trying to register), so we call the tun plugin
// as the kubelet would.
func ExampleRun() {
	base, _ := os.MkdirTemp("", "deviceplugin")
	defer os.RemoveAll(base)
	dir, devRoot := filepath.Join(base, "device-plugins"), filepath.Join(base, "host")
	_ = os.MkdirAll(dir, 0o755)
	_ = os.MkdirAll(filepath.Join(devRoot, "dev/net"), 0o755)
	_ = os.WriteFile(filepath.Join(devRoot, "dev/net/tun"), nil, 0o644)

	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- deviceplugin.Run(ctx, deviceplugin.Config{Dir: dir, DevRoot: devRoot, Count: 4})
	}()

	conn, _ := grpc.NewClient("unix://"+filepath.Join(dir, "kubevirt-tun.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	// WaitForReady: the socket appears once Run has started.
	devices, err := pluginapi.NewDevicePluginClient(conn).ListAndWatch(ctx2, &pluginapi.Empty{}, grpc.WaitForReady(true))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := devices.Recv()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range resp.Devices {
		fmt.Println(d.ID, d.Health)
	}
	alloc, err := pluginapi.NewDevicePluginClient(conn).Allocate(ctx2, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"tun2"}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range alloc.ContainerResponses[0].Devices {
		fmt.Println(d.HostPath, "->", d.ContainerPath, d.Permissions)
	}

	cancel()
	fmt.Println("Run:", <-done)
	_, err = os.Stat(filepath.Join(dir, "kubevirt-tun.sock"))
	fmt.Println("socket removed:", os.IsNotExist(err))
	// Output:
	// tun0 Healthy
	// tun1 Healthy
	// tun2 Healthy
	// tun3 Healthy
	// /dev/net/tun -> /dev/net/tun rw
	// Run: <nil>
	// socket removed: true
}
