package migrationproxy_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/vmkit/vmkit/nodeagent/migrationproxy"
)

// Two node agents' proxies on one machine: the target forwards to a
// "libvirt" socket, the source serves the socket the source launcher's
// libvirt connects to. (Between nodes both sides get the installation's
// TLS configuration and the target listens on the node's address.)
func Example() {
	dir, _ := os.MkdirTemp("/tmp", "mpx")
	defer os.RemoveAll(dir)
	libvirt, _ := net.Listen("unix", filepath.Join(dir, "libvirt-sock"))
	defer libvirt.Close()
	go func() {
		c, _ := libvirt.Accept()
		_, _ = c.Write([]byte("hello from the target libvirt"))
		c.Close()
	}()

	target, _ := migrationproxy.New(migrationproxy.Config{ListenAddress: "127.0.0.1"})
	defer target.Close()
	// The directories are opened once: the proxies never resolve a path
	// again (a launcher could swap it for a link).
	targetDir, _ := migrationproxy.OpenDir(dir)
	ports, _ := target.StartTarget("vmi-uid", map[int]migrationproxy.Socket{migrationproxy.LibvirtPort: {Dir: targetDir, Name: "libvirt-sock"}})

	source, _ := migrationproxy.New(migrationproxy.Config{ListenAddress: "127.0.0.1"})
	defer source.Close()
	sourceDir, _ := migrationproxy.OpenDir(dir)
	name := func(port int) string { return fmt.Sprintf("vmi-uid-%d-source.sock", port) }
	if err := source.StartSource("vmi-uid", migrationproxy.Source{TargetAddress: "127.0.0.1", Ports: ports, Dir: sourceDir, SocketName: name}); err != nil {
		fmt.Println(err)
		return
	}
	c, _ := net.Dial("unix", filepath.Join(dir, name(migrationproxy.LibvirtPort)))
	b, _ := io.ReadAll(c)
	fmt.Println(string(b))
	// Output: hello from the target libvirt
}
