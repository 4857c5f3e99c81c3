package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Deadlines of the calls a Client makes (the caller's context may end
// them sooner): a launcher that accepts a connection and never answers
// must not hold the caller (the node agent's workers) for longer.
const (
	// CallTimeout bounds every call but Sync: they answer from memory or
	// with one libvirt call.
	CallTimeout = 5 * time.Second
	// SyncTimeout bounds Sync, which prepares the disks (qemu-img, ISO
	// images), defines and starts the domain.
	SyncTimeout = 60 * time.Second
)

// Bounds on what a Client reads from a launcher. The launcher runs in the
// tenant's pod: whoever controls it must not make the node agent buffer
// an endless answer. An answer that does not fit fails at once with an
// error matching ErrAnswerTooLarge.
const (
	// MaxAnswerBytes bounds an answer: a status, an error body, the
	// domain's statistics, a probe's result.
	MaxAnswerBytes = 1 << 20
	// MaxGuestAgentAnswerBytes bounds a guest agent command's return value
	// (a guest's file systems or users may take more than MaxAnswerBytes).
	MaxGuestAgentAnswerBytes = 4 << 20
	// maxHeaderBytes bounds an answer's HTTP header.
	maxHeaderBytes = 64 << 10
)

// ErrAnswerTooLarge is the error (errors.Is) of a call whose answer is
// larger than the client accepts.
var ErrAnswerTooLarge = errors.New("the launcher's answer is too large")

// decodeAnswer decodes the JSON value r starts with into v, reading at most
// limit bytes of r.
func decodeAnswer(r io.Reader, limit int64, v any) error {
	lr := &io.LimitedReader{R: r, N: limit}
	err := json.NewDecoder(lr).Decode(v)
	if err != nil && lr.N == 0 {
		return fmt.Errorf("%w: more than %d bytes", ErrAnswerTooLarge, limit)
	}
	return err
}

// errorAnswer is the *Error of an answer other than 200 OK, whose body
// holds the launcher's errorBody; it says so when that body is too large.
func errorAnswer(resp *http.Response) *Error {
	var e ErrorBody
	if err := decodeAnswer(resp.Body, MaxAnswerBytes, &e); errors.Is(err, ErrAnswerTooLarge) {
		return &Error{Code: resp.StatusCode, Message: fmt.Sprintf("%s: %v", resp.Status, err)}
	}
	if e.Error == "" {
		e.Error = resp.Status
	}
	return &Error{Code: resp.StatusCode, Message: e.Error, Reason: e.Reason, Status: e.Status}
}

// Client talks to the launcher of one VMI over its command socket.
type Client struct {
	// socket names the socket in errors: its path, or ResolveOptions.Name.
	socket string
	// locations, when set, returns where to look for the launcher each
	// time the client connects (NewResolvingClient); else it dials socket.
	locations func() []Location
	// uid and checkPod: see ResolveOptions.
	uid      string
	checkPod bool
	// procDir is /proc (tests put a fake one there).
	procDir string
	http    *http.Client
}

// New returns a client of the launcher listening on socket (see
// SocketPath), a path the caller trusts. It does not connect until the
// first call.
func New(socket string) *Client {
	return newClient(&Client{socket: socket})
}

// NewResolving returns a client of a launcher whose socket is not
// known in advance or may move, such as one in a launcher pod's volume that
// appears only after the pod started, and is written by the tenant. Each
// time the client connects it asks opts.Locations where to look, and uses
// the first socket that accepts a connection and passes the checks
// ResolveOptions describes. With no location, or none accepting, calls
// fail with an error for which IsGone is true.
func NewResolving(opts ResolveOptions) *Client {
	return newClient(&Client{socket: opts.Name, locations: opts.Locations, uid: opts.UID, checkPod: opts.CheckPeerPod})
}

func newClient(c *Client) *Client {
	c.procDir = "/proc"
	tr := &http.Transport{
		DialContext:            func(ctx context.Context, _, _ string) (net.Conn, error) { return c.dial(ctx) },
		MaxIdleConns:           1,
		DisableKeepAlives:      false,
		MaxResponseHeaderBytes: maxHeaderBytes,
	}
	c.http = &http.Client{Transport: tr}
	return c
}

// dial connects to the launcher: the static socket, or the first location
// that accepts and passes the checks. When none does, it returns an error
// that says why the launcher could not be reached rather than that it is
// gone (a timeout, a permission, a launcher of another VMI), if any, else
// the first location's.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	if c.locations == nil {
		return dialUnix(ctx, c.socket)
	}
	locs := c.locations()
	if len(locs) == 0 {
		return nil, &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: c.socket, Net: "unix"}, Err: syscall.ENOENT}
	}
	var first, other error
	for _, loc := range locs {
		conn, err := c.dialLocation(ctx, loc)
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if other == nil && !IsGone(err) {
			other = err
		}
	}
	if other != nil {
		return nil, other
	}
	return nil, first
}

// maxSocketPath is the longest path connect(2) takes: sun_path holds 108
// bytes with the terminating NUL.
const maxSocketPath = 107

// dialUnix connects to the UNIX socket at path. A longer path than
// sun_path holds, such as a socket in a kubelet pod's volume
// (/var/lib/kubelet/pods/<pod uid>/volumes/kubernetes.io~empty-dir/sockets/<vmi uid>/launcher.sock),
// is reached through /proc/self/fd/<its directory>.
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	if len(path) <= maxSocketPath {
		return d.DialContext(ctx, "unix", path)
	}
	addr := &net.UnixAddr{Name: path, Net: "unix"}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: err}
	}
	defer dir.Close()
	conn, err := d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path)))
	var oe *net.OpError
	if errors.As(err, &oe) {
		oe.Addr = addr // name the real path in errors
	}
	return conn, err
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Error is a launcher's refusal of a command.
type Error struct {
	// Code is the HTTP status: 400, 409 or 500.
	Code    int
	Message string
	// Reason is a machine-readable cause, when the launcher gives one:
	// "AgentUnavailable" (no guest agent answered).
	Reason string
	// Status is the launcher's status when it refused.
	Status Status
}

func (e *Error) Error() string { return fmt.Sprintf("launcher: %s (%d)", e.Message, e.Code) }

// Is makes errors.Is(err, hypervisor.ErrAgentUnavailable) true for the
// launcher's answer that no guest agent answered, and errors.Is(err,
// ErrNotReady) for its answer that the pod is not ready for the domain yet.
func (e *Error) Is(target error) bool {
	return (target == hypervisor.ErrAgentUnavailable && e.Reason == ReasonAgentUnavailable) ||
		(target == ErrNotReady && e.Reason == ReasonNotReady)
}

// IsGone reports whether err says that no launcher listens on the socket:
// the socket does not exist or nobody accepts on it (the launcher exited
// or was killed). Other errors, such as timeouts, say nothing about it.
func IsGone(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

func (c *Client) do(ctx context.Context, method, path string, body any) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout(path))
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return Status{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://launcher"+path, rd)
	if err != nil {
		return Status{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Status{}, fmt.Errorf("%s %s on %s: %w", method, path, c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := errorAnswer(resp)
		if e.Status.UID != "" {
			if err := c.checkUID(e.Status.UID); err != nil {
				return Status{}, fmt.Errorf("%s %s: %w", method, path, err)
			}
		}
		return e.Status, e
	}
	var st Status
	if err := decodeAnswer(resp.Body, MaxAnswerBytes, &st); err != nil {
		return Status{}, fmt.Errorf("%s %s on %s: %w", method, path, c.socket, err)
	}
	if err := c.checkUID(st.UID); err != nil {
		return Status{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return st, nil
}

// Routes whose calls take longer than CallTimeout.
const (
	syncPath       = "/v1/sync"
	softRebootPath = "/v1/softreboot"
	freezePath     = "/v1/freeze"
	unfreezePath   = "/v1/unfreeze"
)

// callTimeout bounds a call of the route path: CallTimeout, plus what the
// launcher gives the guest agent on the routes that wait for it.
func callTimeout(path string) time.Duration {
	switch path {
	case syncPath, migrationTargetPath:
		return SyncTimeout
	case softRebootPath, unfreezePath:
		// The launcher waits DefaultGuestAgentTimeout for each agent command.
		return CallTimeout + 2*DefaultGuestAgentTimeout
	case freezePath:
		return CallTimeout + FreezeTimeout
	}
	return CallTimeout
}

// checkUID checks the VMI UID of a launcher's answer against the client's
// (when it has one).
func (c *Client) checkUID(got string) error {
	if c.uid != "" && got != c.uid {
		return &UIDMismatchError{Socket: c.socket, Want: c.uid, Got: got}
	}
	return nil
}

// Ping checks that the launcher answers and returns its VMI's UID (the
// client's, for a client with ResolveOptions.UID).
func (c *Client) Ping(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://launcher/v1/ping", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("ping %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	var b struct {
		UID string `json:"uid"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("ping %s: %w", c.socket, errorAnswer(resp))
	}
	if err := decodeAnswer(resp.Body, MaxAnswerBytes, &b); err != nil {
		return "", fmt.Errorf("ping %s: %w", c.socket, err)
	}
	if err := c.checkUID(b.UID); err != nil {
		return "", fmt.Errorf("ping: %w", err)
	}
	return b.UID, nil
}

// State returns the launcher's status.
func (c *Client) State(ctx context.Context) (Status, error) {
	return c.do(ctx, http.MethodGet, "/v1/state", nil)
}

// Sync sends the VMI: the launcher defines and starts its domain when it
// does not run yet.
func (c *Client) Sync(ctx context.Context, vmi *v1.VirtualMachineInstance) (Status, error) {
	return c.do(ctx, http.MethodPut, syncPath, vmi)
}

// ConfigureNetwork sends how the node agent wired the VMI's interfaces:
// the launcher uses the MACs and serves DHCP (see
// launcher.Launcher.ConfigureNetwork). Send it before Sync.
func (c *Client) ConfigureNetwork(ctx context.Context, ifaces []NetworkInterface) (Status, error) {
	return c.do(ctx, http.MethodPut, "/v1/network", ifaces)
}

// Shutdown asks for a graceful stop (the launcher destroys the domain after
// its grace period); it returns at once.
func (c *Client) Shutdown(ctx context.Context) (Status, error) {
	return c.do(ctx, http.MethodPut, "/v1/shutdown", nil)
}

// Kill destroys the domain at once.
func (c *Client) Kill(ctx context.Context) (Status, error) {
	return c.do(ctx, http.MethodPut, "/v1/kill", nil)
}

// Pause stops the guest's vCPUs.
func (c *Client) Pause(ctx context.Context) (Status, error) {
	return c.do(ctx, http.MethodPut, "/v1/pause", nil)
}

// Unpause resumes the guest's vCPUs.
func (c *Client) Unpause(ctx context.Context) (Status, error) {
	return c.do(ctx, http.MethodPut, "/v1/unpause", nil)
}

// Reset resets the guest at once (see launcher.Launcher.Reset); a domain that is
// not started, or ended, is a 409.
func (c *Client) Reset(ctx context.Context) (Status, error) {
	return c.do(ctx, http.MethodPut, "/v1/reset", nil)
}

// SoftReboot asks the guest to restart, the way method says, and returns
// without waiting for it (see launcher.Launcher.SoftReboot). Through a guest agent
// that does not answer, the error matches hypervisor.ErrAgentUnavailable
// (errors.Is); a domain that is not running, or ACPI disabled in the VMI,
// is a 409.
func (c *Client) SoftReboot(ctx context.Context, method hypervisor.RebootMethod) (Status, error) {
	return c.do(ctx, http.MethodPut, softRebootPath, SoftRebootRequest{Method: method})
}

// Freeze freezes the guest's file systems through the guest agent; with
// unfreezeTimeout > 0 the launcher thaws them after that long unless
// Unfreeze came first (see launcher.Launcher.Freeze). Without an agent, the error
// matches hypervisor.ErrAgentUnavailable (errors.Is).
func (c *Client) Freeze(ctx context.Context, unfreezeTimeout time.Duration) (Status, error) {
	return c.do(ctx, http.MethodPut, freezePath, v1.FreezeUnfreezeTimeout{UnfreezeTimeout: &metav1.Duration{Duration: unfreezeTimeout}})
}

// Unfreeze thaws the guest's file systems and cancels a pending automatic
// thaw. Without an agent, the error matches hypervisor.ErrAgentUnavailable
// (errors.Is).
func (c *Client) Unfreeze(ctx context.Context) (Status, error) {
	return c.do(ctx, http.MethodPut, unfreezePath, nil)
}

// GuestAgentCommand runs a QEMU guest agent command that the launcher
// allows (see IsGuestAgentCommand) and returns the agent's return value as
// JSON. When no agent answers, the error matches
// hypervisor.ErrAgentUnavailable (errors.Is).
func (c *Client) GuestAgentCommand(ctx context.Context, command string) (json.RawMessage, error) {
	path := "/v1/guest-agent/" + url.PathEscape(command)
	// The launcher gives the guest agent DefaultGuestAgentTimeout.
	ctx, cancel := context.WithTimeout(ctx, CallTimeout+DefaultGuestAgentTimeout)
	defer cancel()
	var out json.RawMessage
	if err := c.getJSON(ctx, path, MaxGuestAgentAnswerBytes, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Probe runs the VMI's readiness or liveness probe through the guest agent
// (see launcher.Launcher.Probe), giving the guest timeout, and returns the result: a
// failed check is a ProbeResult with Success false, not an error.
func (c *Client) Probe(ctx context.Context, kind ProbeKind, timeout time.Duration) (ProbeResult, error) {
	seconds := int64((timeout + time.Second - 1) / time.Second)
	path := "/v1/probe/" + url.PathEscape(string(kind)) + "?timeoutSeconds=" + strconv.FormatInt(seconds, 10)
	ctx, cancel := context.WithTimeout(ctx, CallTimeout+time.Duration(seconds)*time.Second)
	defer cancel()
	var res ProbeResult
	if err := c.getJSON(ctx, path, MaxAnswerBytes, &res); err != nil {
		return ProbeResult{}, err
	}
	return res, nil
}

// getJSON GETs path and decodes at most limit bytes of the answer into
// into; an answer other than 200 OK is an *Error.
func (c *Client) getJSON(ctx context.Context, path string, limit int64, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://launcher"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s on %s: %w", path, c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorAnswer(resp)
	}
	if err := decodeAnswer(resp.Body, limit, into); err != nil {
		return fmt.Errorf("GET %s on %s: %w", path, c.socket, err)
	}
	return nil
}

// Console opens the serial console: what the guest prints (after the
// recent history when history is true) and, written, what it reads.
func (c *Client) Console(ctx context.Context, history bool) (io.ReadWriteCloser, error) {
	q := url.Values{}
	if history {
		q.Set("history", "true")
	}
	return c.stream(ctx, "/v1/console?"+q.Encode())
}

// VNC opens a raw connection to the guest's VNC server.
func (c *Client) VNC(ctx context.Context) (io.ReadWriteCloser, error) {
	return c.stream(ctx, "/v1/vnc")
}

func (c *Client) stream(ctx context.Context, path string) (io.ReadWriteCloser, error) {
	dialCtx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	conn, err := c.dial(dialCtx)
	if err != nil {
		return nil, fmt.Errorf("GET %s on %s: %w", path, c.socket, err)
	}
	// The handshake has a deadline; the stream, once up, has none.
	dl := time.Now().Add(CallTimeout)
	if ctxDL, ok := ctx.Deadline(); ok && ctxDL.Before(dl) {
		dl = ctxDL
	}
	_ = conn.SetDeadline(dl)
	req, _ := http.NewRequest(http.MethodGet, "http://launcher"+path, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", StreamProtocol)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("GET %s on %s: %w", path, c.socket, err)
	}
	// The answer's header is bounded (http.ReadResponse reads a line of
	// any length); the stream after it is not.
	handshake := &io.LimitedReader{R: conn, N: maxHeaderBytes}
	br := bufio.NewReader(handshake)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		if handshake.N <= 0 {
			err = fmt.Errorf("%w: a header of more than %d bytes", ErrAnswerTooLarge, maxHeaderBytes)
		}
		return nil, fmt.Errorf("GET %s on %s: %w", path, c.socket, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		handshake.N = MaxAnswerBytes // errorAnswer's own bound applies
		return nil, errorAnswer(resp)
	}
	_ = conn.SetDeadline(noDeadline)
	handshake.N = math.MaxInt64
	return &streamConn{Conn: conn, r: br}, nil
}

// streamConn reads what the response reader buffered before the raw conn.
type streamConn struct {
	net.Conn
	r *bufio.Reader
}

func (s *streamConn) Read(p []byte) (int, error) { return s.r.Read(p) }

var noDeadline = time.Time{}

// PID returns the process ID of the launcher serving the socket, as the
// kernel reports the peer of a UNIX socket connection (SO_PEERCRED), in the
// caller's PID namespace: 0 when the launcher runs in a PID namespace the
// caller cannot see. The node agent finds the launcher pod's network
// namespace through it (/proc/<pid>/ns/net).
func (c *Client) PID(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	conn, err := c.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("launcher socket %s: not a UNIX connection", c.socket)
	}
	pid, err := peerPID(uc)
	if err != nil {
		return 0, fmt.Errorf("launcher socket %s: %w", c.socket, err)
	}
	return pid, nil
}

// Stats returns the statistics of the launcher's domain (see
// launcher.Launcher.Stats); a domain that has not started or has ended is a 409.
// The call is bounded by CallTimeout, or ctx's deadline if sooner.
func (c *Client) Stats(ctx context.Context) (hypervisor.DomainStats, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://launcher/v1/stats", nil)
	if err != nil {
		return hypervisor.DomainStats{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return hypervisor.DomainStats{}, fmt.Errorf("GET /v1/stats on %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return hypervisor.DomainStats{}, errorAnswer(resp)
	}
	var st hypervisor.DomainStats
	if err := decodeAnswer(resp.Body, MaxAnswerBytes, &st); err != nil {
		return hypervisor.DomainStats{}, fmt.Errorf("GET /v1/stats on %s: %w", c.socket, err)
	}
	return st, nil
}
