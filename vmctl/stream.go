package vmctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/vmctl/internal/apiserver"
)

// streamBufferSize is the WebSocket read and write buffer size, KubeVirt's.
const streamBufferSize = 10240

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
	tlsConfig, err := rest.TLSConfigFor(s.config)
	if err != nil {
		return nil, fmt.Errorf("vmctl: TLS configuration for %s: %w", s.config.Host, err)
	}
	proxy := http.ProxyFromEnvironment
	if s.config.Proxy != nil {
		proxy = s.config.Proxy
	}
	dialer := &websocket.Dialer{
		Proxy:            proxy,
		TLSClientConfig:  tlsConfig,
		Subprotocols:     []string{PlainStreamProtocol},
		ReadBufferSize:   streamBufferSize,
		WriteBufferSize:  streamBufferSize,
		HandshakeTimeout: 45 * time.Second,
		NetDialContext:   s.config.Dial,
	}
	if s.config.Timeout > 0 {
		dialer.HandshakeTimeout = s.config.Timeout
	}
	d := &wsRoundTripper{dialer: dialer}
	// The wrappers add what authenticates the request (bearer token, basic
	// auth, impersonation headers, exec plugin credentials) and the user
	// agent, exactly as for client-go's own requests.
	rt, err := rest.HTTPWrappersForConfig(s.config, d)
	if err != nil {
		return nil, fmt.Errorf("vmctl: credentials for %s: %w", s.config.Host, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("vmctl: stream %s: %w", u.Path, err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if d.conn == nil {
		return nil, fmt.Errorf("vmctl: stream %s: no connection was made", u.Path)
	}
	if p := d.conn.Subprotocol(); p != PlainStreamProtocol {
		_ = d.conn.Close()
		return nil, fmt.Errorf("vmctl: stream %s: the server chose subprotocol %q, want %q", u.Path, p, PlainStreamProtocol)
	}
	return NewStreamConn(d.conn), nil
}

// wsRoundTripper dials the WebSocket of a request whose headers client-go's
// wrappers completed; the connection is kept in conn.
type wsRoundTripper struct {
	dialer *websocket.Dialer
	conn   *websocket.Conn
}

func (d *wsRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	u := *req.URL
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	}
	conn, resp, err := d.dialer.DialContext(req.Context(), u.String(), req.Header)
	if err != nil {
		if resp != nil && errors.Is(err, websocket.ErrBadHandshake) {
			// gorilla keeps the first kilobyte of the refusal's body.
			body, _ := io.ReadAll(io.LimitReader(resp.Body, apiserver.MaxErrorBody))
			_ = resp.Body.Close()
			return nil, apiserver.StatusError(resp.StatusCode, resp.Status, body)
		}
		return nil, fmt.Errorf("vmctl: stream %s: %w", req.URL.Path, err)
	}
	if d.conn != nil {
		// A wrapper retried (a refreshed token): keep the newest.
		_ = d.conn.Close()
	}
	d.conn = conn
	return resp, nil
}

// NewStreamConn wraps a WebSocket speaking the plain.kubevirt.io
// subprotocol as a net.Conn: Read returns the bytes of binary messages
// (other message types are skipped, as KubeVirt does), each Write sends one
// binary message, and Close sends a normal close before closing the
// connection. A normal close from the peer reads as io.EOF. Reads and
// writes may run concurrently with each other.
func NewStreamConn(ws *websocket.Conn) net.Conn {
	return &streamConn{ws: ws}
}

type streamConn struct {
	ws *websocket.Conn

	rmu    sync.Mutex
	reader io.Reader

	wmu       sync.Mutex
	closeOnce sync.Once
	closeErr  error
}

func (c *streamConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.reader == nil {
			typ, r, err := c.ws.NextReader()
			if err != nil {
				return 0, streamError(err)
			}
			if typ != websocket.BinaryMessage {
				continue
			}
			c.reader = r
		}
		n, err := c.reader.Read(p)
		if err == io.EOF {
			c.reader = nil
			if n > 0 {
				return n, nil
			}
			if len(p) == 0 {
				return 0, nil
			}
			continue
		}
		if err != nil {
			c.reader = nil
			return n, streamError(err)
		}
		return n, nil
	}
}

// readMessage reads the next whole binary message, dropping what is left
// of a message Read had begun.
func (c *streamConn) readMessage() ([]byte, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.reader = nil
	for {
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			return nil, streamError(err)
		}
		if typ == websocket.BinaryMessage {
			return data, nil
		}
	}
}

func (c *streamConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, streamError(err)
	}
	return len(p), nil
}

func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
		_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
		c.closeErr = c.ws.Close()
	})
	return c.closeErr
}

func (c *streamConn) LocalAddr() net.Addr  { return c.ws.LocalAddr() }
func (c *streamConn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }

func (c *streamConn) SetDeadline(t time.Time) error {
	if err := c.ws.SetReadDeadline(t); err != nil {
		return err
	}
	return c.ws.SetWriteDeadline(t)
}

func (c *streamConn) SetReadDeadline(t time.Time) error  { return c.ws.SetReadDeadline(t) }
func (c *streamConn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }

// streamError maps the peer's normal close to io.EOF.
func streamError(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) && (ce.Code == websocket.CloseNormalClosure || ce.Code == websocket.CloseGoingAway) {
		return io.EOF
	}
	return err
}
