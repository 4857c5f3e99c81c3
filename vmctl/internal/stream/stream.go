// Package stream is the client side of KubeVirt's WebSocket streams (the
// serial console, VNC and port-forward subresources): dialing one through
// the API server with a rest.Config's credentials, and the net.Conn of a
// WebSocket whose binary messages carry raw bytes both ways (the
// plain.kubevirt.io subprotocol).
package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/vmctl/internal/apiserver"
)

// bufferSize is the WebSocket read and write buffer size, KubeVirt's.
const bufferSize = 10240

// Dial opens the WebSocket stream at u, a URL of the API server of config
// (http or https), asking for subprotocol, with config's TLS settings,
// proxy, dialer, timeout and credentials. ctx bounds the connection's
// setup only. A refused upgrade returns an *apierrors.StatusError with the
// server's message and code; a server that chooses another subprotocol,
// an error.
func Dial(ctx context.Context, config *rest.Config, u *url.URL, subprotocol string) (net.Conn, error) {
	tlsConfig, err := rest.TLSConfigFor(config)
	if err != nil {
		return nil, fmt.Errorf("vmctl: TLS configuration for %s: %w", config.Host, err)
	}
	proxy := http.ProxyFromEnvironment
	if config.Proxy != nil {
		proxy = config.Proxy
	}
	dialer := &websocket.Dialer{
		Proxy:            proxy,
		TLSClientConfig:  tlsConfig,
		Subprotocols:     []string{subprotocol},
		ReadBufferSize:   bufferSize,
		WriteBufferSize:  bufferSize,
		HandshakeTimeout: 45 * time.Second,
		NetDialContext:   config.Dial,
	}
	if config.Timeout > 0 {
		dialer.HandshakeTimeout = config.Timeout
	}
	d := &wsRoundTripper{dialer: dialer}
	// The wrappers add what authenticates the request (bearer token, basic
	// auth, impersonation headers, exec plugin credentials) and the user
	// agent, exactly as for client-go's own requests.
	rt, err := rest.HTTPWrappersForConfig(config, d)
	if err != nil {
		return nil, fmt.Errorf("vmctl: credentials for %s: %w", config.Host, err)
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
	if p := d.conn.Subprotocol(); p != subprotocol {
		_ = d.conn.Close()
		return nil, fmt.Errorf("vmctl: stream %s: the server chose subprotocol %q, want %q", u.Path, p, subprotocol)
	}
	return NewConn(d.conn), nil
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

// NewConn wraps a WebSocket speaking the plain.kubevirt.io
// subprotocol as a net.Conn: Read returns the bytes of binary messages
// (other message types are skipped, as KubeVirt does), each Write sends one
// binary message, and Close sends a normal close before closing the
// connection. A normal close from the peer reads as io.EOF. Reads and
// writes may run concurrently with each other.
func NewConn(ws *websocket.Conn) net.Conn {
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

// ReadMessage reads one whole message of a stream (one datagram): of a
// Conn, the next whole binary message; of another net.Conn, what one Read
// returns.
func ReadMessage(conn net.Conn) ([]byte, error) {
	if sc, ok := conn.(*streamConn); ok {
		return sc.readMessage()
	}
	buf := make([]byte, 65536)
	n, err := conn.Read(buf)
	return buf[:n], err
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
