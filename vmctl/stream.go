package vmctl

import (
	"context"
	"net"

	"github.com/gorilla/websocket"

	"github.com/vmkit/vmkit/vmctl/internal/stream"
)

// Stream opens the WebSocket stream subresource sub of
// VirtualMachineInstance namespace/name through the API server: "console"
// (the serial console), "vnc" (the RFB protocol of the graphical console),
// or "portforward/{port}" and "portforward/{port}/{protocol}" (a TCP or UDP
// port of the guest, see PortForwardPath). The stream speaks the
// plain.kubevirt.io subprotocol: binary messages carrying raw bytes both
// ways; the returned net.Conn reads and writes those bytes, and closing it
// ends the stream with a normal WebSocket close. ctx bounds the connection's
// setup only.
//
// A refused upgrade (the VMI is not running, RBAC forbids it, ...) returns
// an *apierrors.StatusError with the server's message and code.
func (s *Subresources) Stream(ctx context.Context, namespace, name, sub string) (net.Conn, error) {
	elems, err := cleanSubresource(sub)
	if err != nil {
		return nil, err
	}
	path := vmiPath(namespace, name, elems...)
	if err := checkNames(path); err != nil {
		return nil, err
	}
	u := s.url(path...)
	return stream.Dial(ctx, s.config, u, PlainStreamProtocol)
}

// NewStreamConn wraps a WebSocket speaking the plain.kubevirt.io
// subprotocol as a net.Conn: Read returns the bytes of binary messages
// (other message types are skipped, as KubeVirt does), each Write sends one
// binary message, and Close sends a normal close before closing the
// connection. A normal close from the peer reads as io.EOF. Reads and
// writes may run concurrently with each other.
func NewStreamConn(ws *websocket.Conn) net.Conn {
	return stream.NewConn(ws)
}
