package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vmkit/vmkit/nodeagent/internal/safepath"
)

// A Location is where the node agent looks for a launcher: the socket
// directory Rel below Root. The agent trusts Root (its share directory,
// the kubelet's pods directory) but nothing below it that a launcher's
// user, the tenant, can write (a launcher pod's sockets volume): no
// symbolic link is followed below Root (see nodeagent/internal/safepath),
// the socket must be a socket and the final status a regular file.
type Location struct {
	// Root is the trusted directory; it may be or contain links.
	Root string
	// Rel is the socket directory below Root, such as
	// sockets/<VMI UID> or <pod UID>/volumes/kubernetes.io~empty-dir/sockets/<VMI UID>.
	Rel string
	// Pod is the UID of the launcher pod whose volume holds the socket
	// directory, when it is one: see ResolveOptions.CheckPeerPod.
	Pod string
}

// Path is the socket directory's path, for messages.
func (l Location) Path() string { return filepath.Join(l.Root, l.Rel) }

func (l Location) open() (*safepath.Dir, error) { return safepath.OpenBeneath(l.Root, l.Rel) }

// Stat describes the socket directory: an error when it is missing or
// reached only through a symbolic link.
func (l Location) Stat() (os.FileInfo, error) {
	d, err := l.open()
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Stat()
}

// HasSocket reports whether the socket directory holds a command socket
// (a socket file, not a link to one).
func (l Location) HasSocket() bool {
	d, err := l.open()
	if err != nil {
		return false
	}
	defer d.Close()
	fi, err := d.Lstat(SocketFile)
	return err == nil && fi.Mode().Type() == os.ModeSocket
}

// ReadFinal reads the final status a launcher of the VMI with the given
// UID left in the socket directory; an error wrapping os.ErrNotExist when
// it left none. A final status that is no regular file, is larger than
// MaxAnswerBytes or is another VMI's (a *UIDMismatchError) is an error.
func (l Location) ReadFinal(uid string) (Status, error) {
	var s Status
	d, err := l.open()
	if err != nil {
		return s, err
	}
	defer d.Close()
	b, err := d.ReadFile(FinalFile, MaxAnswerBytes)
	if err != nil {
		return s, err
	}
	path := filepath.Join(l.Path(), FinalFile)
	if err := json.Unmarshal(b, &s); err != nil {
		return Status{}, fmt.Errorf("final status %s: %w", path, err)
	}
	if s.UID != uid {
		return Status{}, &UIDMismatchError{Socket: path, Want: uid, Got: s.UID}
	}
	return s, nil
}

// ResolveOptions configure a client of a launcher that the node agent
// looks for each time it connects (NewResolvingClient).
type ResolveOptions struct {
	// Name describes the launcher's socket in errors.
	Name string
	// Locations returns where the launcher may be, in order of preference;
	// the client connects to the first whose socket accepts and passes
	// the checks below.
	Locations func() []Location
	// UID is the VMI's. Each new connection is checked to reach a launcher
	// of that VMI (its /v1/ping answer) before any command is sent on it,
	// and every status a launcher answers must carry it; a launcher of
	// another VMI fails the call with a *UIDMismatchError.
	UID string
	// CheckPeerPod makes the client check, on each connection to a socket
	// in a launcher pod's volume (Location.Pod set), that the process
	// serving it (SO_PEERCRED) runs in that pod: a line of its
	// /proc/<pid>/cgroup names the pod's UID, as the kubelet names a
	// pod's cgroup. A process the client cannot see (another PID
	// namespace: the caller needs hostPID) fails the check. Launchers
	// run as plain processes (tests, nodeagent/localnode) would fail it.
	CheckPeerPod bool
}

// A UIDMismatchError is a launcher, or its final status, of another VMI
// than the one the client or caller expects.
type UIDMismatchError struct {
	// Socket is the socket or file that answered.
	Socket string
	// Want is the expected VMI UID, Got the one answered.
	Want, Got string
}

func (e *UIDMismatchError) Error() string {
	return fmt.Sprintf("%s belongs to the launcher of VMI %q, not of VMI %q", e.Socket, e.Got, e.Want)
}

// A PeerPodError is a socket in a launcher pod's volume served by a process
// that does not run in that pod.
type PeerPodError struct {
	Socket, Pod string
	// PID is the serving process (0: not visible to the caller).
	PID int
	// Reason says what the check found.
	Reason string
}

func (e *PeerPodError) Error() string {
	return fmt.Sprintf("launcher socket %s: served by process %d, not by one of pod %s: %s", e.Socket, e.PID, e.Pod, e.Reason)
}

// dialLocation connects to the launcher at loc, following no link there,
// and checks who answers (see ResolveOptions).
func (c *Client) dialLocation(ctx context.Context, loc Location) (net.Conn, error) {
	sock := filepath.Join(loc.Path(), SocketFile)
	dir, err := loc.open()
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: sock, Net: "unix"}, Err: err}
	}
	conn, err := dir.DialUnix(ctx, SocketFile)
	dir.Close()
	if err != nil {
		return nil, err
	}
	if c.checkPod && loc.Pod != "" {
		if err := c.checkPeerPod(conn, sock, loc.Pod); err != nil {
			conn.Close()
			return nil, err
		}
	}
	if c.uid != "" {
		if err := c.checkPing(ctx, conn, sock); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// maxCgroupBytes bounds what is read of /proc/<pid>/cgroup.
const maxCgroupBytes = 64 << 10

// checkPeerPod checks that the process serving conn runs in the pod with
// the given UID.
func (c *Client) checkPeerPod(conn *net.UnixConn, sock, pod string) error {
	pid, err := peerPID(conn)
	if err != nil {
		return fmt.Errorf("launcher socket %s: %w", sock, err)
	}
	if pid <= 0 {
		return &PeerPodError{Socket: sock, Pod: pod, Reason: "the process is in a PID namespace the node agent cannot see (virt-handler needs hostPID)"}
	}
	f, err := os.Open(filepath.Join(c.procDir, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return &PeerPodError{Socket: sock, Pod: pod, PID: pid, Reason: err.Error()}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCgroupBytes))
	if err != nil {
		return &PeerPodError{Socket: sock, Pod: pod, PID: pid, Reason: err.Error()}
	}
	if !inPodCgroup(string(b), pod) {
		return &PeerPodError{Socket: sock, Pod: pod, PID: pid, Reason: fmt.Sprintf("its cgroups are %q", strings.TrimSpace(string(b)))}
	}
	return nil
}

// inPodCgroup reports whether cgroup, a /proc/<pid>/cgroup, places the
// process in the cgroup of the pod with the given UID: a component of a
// hierarchy's path is the kubelet's name of the pod's cgroup, pod<UID>
// (cgroupfs driver) or kubepods[-<QoS>]-pod<UID, _ for ->.slice (systemd
// driver), e.g.
//
//	0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d4a0f4e_1111_4222_8333_944455556666.slice/cri-containerd-<id>.scope
//	4:memory:/kubepods/besteffort/pod0d4a0f4e-1111-4222-8333-944455556666/<container id>
func inPodCgroup(cgroup, pod string) bool {
	if pod == "" {
		return false
	}
	names := []string{"pod" + pod, "pod" + strings.ReplaceAll(pod, "-", "_")}
	for _, line := range strings.Split(cgroup, "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		fields := strings.SplitN(line, ":", 3)
		if len(fields) != 3 {
			continue
		}
		for _, comp := range strings.Split(fields[2], "/") {
			comp = strings.TrimSuffix(comp, ".slice")
			for _, n := range names {
				if comp == n || strings.HasSuffix(comp, "-"+n) {
					return true
				}
			}
		}
	}
	return false
}

// peerPID returns the PID of the process serving conn (SO_PEERCRED), in
// the caller's PID namespace: 0 when it is in one the caller cannot see.
func peerPID(conn *net.UnixConn) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	return int(cred.Pid), nil
}

// checkPing asks the launcher on a new connection, before anything else is
// sent on it, which VMI it serves. The connection stays usable for the
// HTTP client.
func (c *Client) checkPing(ctx context.Context, conn net.Conn, sock string) error {
	// The transport dials with a context that has no deadline and is
	// cancelled when the call that wanted the connection gives up; the
	// launcher answers a ping from memory, within CallTimeout.
	_ = conn.SetDeadline(time.Now().Add(CallTimeout))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	uid, err := ping(conn)
	switch {
	case !stop() || ctx.Err() != nil:
		return fmt.Errorf("ping %s: %w", sock, ctx.Err())
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("ping %s: no answer within %v: %w", sock, CallTimeout, context.DeadlineExceeded)
	case err != nil:
		return fmt.Errorf("ping %s: %w", sock, err)
	}
	_ = conn.SetDeadline(noDeadline)
	if uid != c.uid {
		return &UIDMismatchError{Socket: sock, Want: c.uid, Got: uid}
	}
	return nil
}

// ping sends GET /v1/ping on conn and reads the whole answer.
func ping(conn net.Conn) (string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://launcher/v1/ping", nil)
	if err != nil {
		return "", err
	}
	if err := req.Write(conn); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.LimitReader(conn, maxHeaderBytes+MaxAnswerBytes)), req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", errorAnswer(resp)
	}
	var b struct {
		UID string `json:"uid"`
	}
	if err := decodeAnswer(resp.Body, MaxAnswerBytes, &b); err != nil {
		return "", err
	}
	// Read the rest (a newline), so no byte of this answer is left on the
	// connection for the next request's.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "", err
	}
	return b.UID, nil
}
