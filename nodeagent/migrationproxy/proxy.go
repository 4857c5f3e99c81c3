// Package migrationproxy carries a live migration between the launchers of
// two nodes, as KubeVirt's virt-handler does: the source launcher's libvirt
// and QEMU connect to UNIX sockets in the source launcher's file system,
// which the source node agent serves (StartSource); it forwards each
// connection over TCP with mutual TLS (the installation's certificates) to
// the target node agent (StartTarget), which forwards it to a UNIX socket
// in the target launcher's file system: the target libvirt's socket (port
// 0) or the sockets at which the target QEMU listens for the guest's
// memory (DirectMigrationPort, 49152) and disks (BlockMigrationPort,
// 49153).
//
//	source launcher ── unix ──▶ source agent ══ TCP+TLS ══▶ target agent ── unix ──▶ target launcher
//
// The target agent publishes the TCP ports it listens on in the VMI's
// status.migrationState.targetDirectMigrationNodePorts, a map from each TCP
// port (as a string) to the migration port it carries, with its address in
// targetNodeAddress; the source agent reads both (ParsePorts).
//
// A listener that is not on a loopback address needs TLS: plain TCP is
// refused, as in KubeVirt.
//
// The UNIX sockets are in launchers' file systems, which their users may
// change at any time: the proxy binds and dials them in a directory the
// caller opened once (a SocketDir: OpenDir, or the node agent's own
// resolution beneath a launcher's root), and never resolves a path again.
package migrationproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/internal/safepath"
)

// SocketDir is a directory the proxy binds and dials UNIX sockets in,
// opened once: names in it are single path components, and nothing in
// the directory is followed (a link where a socket should be is refused).
type SocketDir interface {
	// Name is the directory's path, for messages.
	Name() string
	ListenUnix(name string) (*net.UnixListener, error)
	DialUnix(ctx context.Context, name string) (*net.UnixConn, error)
	// OwnSocket gives the socket name its owner and mode.
	OwnSocket(name string, mode os.FileMode, uid, gid int) error
	Remove(name string) error
	Close() error
}

// OpenDir opens the directory at path (its links followed as usual, once)
// as a SocketDir. The node agent opens launchers' directories with its
// own resolution beneath the launcher's root instead.
func OpenDir(path string) (SocketDir, error) {
	return safepath.OpenBeneath(path, ".")
}

// Socket is a UNIX socket: Name in Dir.
type Socket struct {
	Dir  SocketDir
	Name string
}

func (s Socket) String() string { return s.Dir.Name() + "/" + s.Name }

// dialTimeout bounds connecting a proxied connection's outbound side.
const dialTimeout = 10 * time.Second

// Migration ports (KubeVirt's): what a proxied connection carries.
const (
	// LibvirtPort names the destination libvirt's socket.
	LibvirtPort = 0
	// DirectMigrationPort carries the guest's memory (QEMU's migration stream).
	DirectMigrationPort = 49152
	// BlockMigrationPort carries the guest's local disks (QEMU's NBD).
	BlockMigrationPort = 49153
)

// Config configures a Manager.
type Config struct {
	// ListenAddress is the address the target listeners bind (the node's
	// migration address); "0.0.0.0" when empty.
	ListenAddress string
	// ServerTLS secures the target listeners; it should require and
	// verify client certificates. Nil is allowed only with a loopback
	// ListenAddress.
	ServerTLS *tls.Config
	// ClientTLS secures the source side's connections to the target.
	// Nil connects in plain TCP (only to a loopback target).
	ClientTLS *tls.Config
}

// Manager runs the proxies of one node agent, per migration key (the VMI's
// UID). It is safe for concurrent use.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	targets map[string][]*proxy
	sources map[string][]*proxy
}

// New checks cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.ListenAddress == "" {
		cfg.ListenAddress = "0.0.0.0"
	}
	if cfg.ServerTLS == nil {
		ip := net.ParseIP(cfg.ListenAddress)
		if ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("migration proxy: listening on %s needs TLS (only a loopback address may be served in plain TCP)", cfg.ListenAddress)
		}
	}
	return &Manager{cfg: cfg, targets: map[string][]*proxy{}, sources: map[string][]*proxy{}}, nil
}

// StartTarget listens on one TCP port per entry of sockets (migration port
// → the UNIX socket it is forwarded to) and returns the ports, as
// targetDirectMigrationNodePorts holds them. Starting a key again with the
// same sockets returns the running listeners' ports; with other sockets it
// replaces them. The Manager owns the sockets' directories from then on: it
// closes them when it stops the listeners, or at once when it does not use
// them.
func (m *Manager) StartTarget(key string, sockets map[int]Socket) (map[string]int, error) {
	if key == "" || len(sockets) == 0 {
		closeDirs(sockets)
		return nil, errors.New("migration proxy: a target needs a key and sockets")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.targets[key]; ok {
		if sameTargets(cur, sockets) {
			closeDirs(sockets)
			return portsOf(cur), nil
		}
		stopAll(cur)
		delete(m.targets, key)
	}
	var started []*proxy
	for _, port := range sortedPorts(sockets) {
		sock := sockets[port]
		p := &proxy{key: key, port: port, dialNet: "unix", dialAddr: sock.String(), unix: sock, conns: map[net.Conn]bool{}}
		ln, err := net.Listen("tcp", net.JoinHostPort(m.cfg.ListenAddress, "0"))
		if err != nil {
			stopAll(started)
			closeDirs(sockets)
			return nil, fmt.Errorf("migration proxy for %s: listening for port %d: %w", key, port, err)
		}
		if m.cfg.ServerTLS != nil {
			ln = tls.NewListener(ln, m.cfg.ServerTLS)
		}
		p.ln = ln
		p.tcpPort = ln.Addr().(*net.TCPAddr).Port
		started = append(started, p)
		go p.serve()
	}
	m.targets[key] = started
	return portsOf(started), nil
}

// TargetPorts returns the ports of key's target listeners; nil without.
func (m *Manager) TargetPorts(key string) map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.targets[key]; ok {
		return portsOf(cur)
	}
	return nil
}

// StopTarget closes key's target listeners and their connections.
func (m *Manager) StopTarget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	stopAll(m.targets[key])
	delete(m.targets, key)
}

// Source is the source side of one migration.
type Source struct {
	// TargetAddress is the target agent's address (targetNodeAddress).
	TargetAddress string
	// Ports maps each TCP port on the target (a string) to the migration
	// port it carries, as targetDirectMigrationNodePorts holds them.
	Ports map[string]int
	// Dir is the directory the UNIX sockets are served in, and SocketName
	// the name of a migration port's socket there. The Manager owns Dir
	// from then on (see StartTarget).
	Dir        SocketDir
	SocketName func(port int) string
	// UID and GID own the sockets (mode 0660): the launcher's user, whose
	// libvirt and QEMU connect to them, and nobody else in its container.
	UID, GID int
}

// StartSource serves, for each entry of src.Ports, the UNIX socket
// src.SocketName(migration port) in src.Dir, forwarding its connections to
// src.TargetAddress:<TCP port>. Starting a key again with the same target
// keeps the running listeners; with another it replaces them.
func (m *Manager) StartSource(key string, src Source) (err error) {
	own := true // src.Dir is closed on failure or when unused
	defer func() {
		if own {
			_ = src.Dir.Close()
		}
	}()
	parsed, err := ParsePorts(src.Ports)
	if err != nil {
		return err
	}
	targetAddress := src.TargetAddress
	if net.ParseIP(targetAddress) == nil {
		return fmt.Errorf("migration proxy for %s: target address %q is not an IP address", key, targetAddress)
	}
	if m.cfg.ClientTLS == nil && !net.ParseIP(targetAddress).IsLoopback() {
		return fmt.Errorf("migration proxy for %s: connecting to %s needs TLS", key, targetAddress)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[string]string{}
	for tcp, port := range parsed {
		want[Socket{src.Dir, src.SocketName(port)}.String()] = net.JoinHostPort(targetAddress, strconv.Itoa(tcp))
	}
	if cur, ok := m.sources[key]; ok {
		same := len(cur) == len(want)
		for _, p := range cur {
			same = same && want[p.unix.String()] == p.dialAddr
		}
		if same {
			return nil
		}
		stopAll(cur)
		delete(m.sources, key)
	}
	var started []*proxy
	tcps := make([]int, 0, len(parsed))
	for tcp := range parsed {
		tcps = append(tcps, tcp)
	}
	sort.Ints(tcps)
	for _, tcp := range tcps {
		port := parsed[tcp]
		sock := Socket{src.Dir, src.SocketName(port)}
		p := &proxy{key: key, port: port, unix: sock, source: true, dialNet: "tcp", dialAddr: net.JoinHostPort(targetAddress, strconv.Itoa(tcp)), tls: m.cfg.ClientTLS, conns: map[net.Conn]bool{}}
		_ = sock.Dir.Remove(sock.Name) // a stale socket of an earlier attempt
		ln, err := sock.Dir.ListenUnix(sock.Name)
		if err != nil {
			stopAll(started)
			return fmt.Errorf("migration proxy for %s: %w", key, err)
		}
		// The launcher's libvirt and QEMU may run as another (non-root)
		// user: theirs, not everyone's.
		if err := sock.Dir.OwnSocket(sock.Name, 0o660, src.UID, src.GID); err != nil {
			ln.Close()
			_ = sock.Dir.Remove(sock.Name)
			stopAll(started)
			return fmt.Errorf("migration proxy for %s: %w", key, err)
		}
		p.ln = ln
		started = append(started, p)
		go p.serve()
	}
	m.sources[key] = started
	own = false
	return nil
}

// StopSource closes key's source sockets (removing them) and their
// connections.
func (m *Manager) StopSource(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	stopAll(m.sources[key])
	delete(m.sources, key)
}

// Close stops every proxy.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, ps := range m.targets {
		stopAll(ps)
		delete(m.targets, k)
	}
	for k, ps := range m.sources {
		stopAll(ps)
		delete(m.sources, k)
	}
}

// ParsePorts reads targetDirectMigrationNodePorts: each key a TCP port
// (1-65535), each value the migration port it carries (LibvirtPort,
// DirectMigrationPort or BlockMigrationPort), each migration port once,
// the libvirt port required. It returns TCP port → migration port.
func ParsePorts(ports map[string]int) (map[int]int, error) {
	out := make(map[int]int, len(ports))
	seen := map[int]string{}
	for k, v := range ports {
		tcp, err := strconv.Atoi(k)
		if err != nil || tcp < 1 || tcp > 65535 || strconv.Itoa(tcp) != k {
			return nil, fmt.Errorf("status.migrationState.targetDirectMigrationNodePorts: key %q is not a TCP port", k)
		}
		switch v {
		case LibvirtPort, DirectMigrationPort, BlockMigrationPort:
		default:
			return nil, fmt.Errorf("status.migrationState.targetDirectMigrationNodePorts[%q]: %d is not a migration port (0, %d or %d)", k, v, DirectMigrationPort, BlockMigrationPort)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("status.migrationState.targetDirectMigrationNodePorts: ports %q and %q both carry %d", other, k, v)
		}
		seen[v] = k
		out[tcp] = v
	}
	if _, ok := seen[LibvirtPort]; !ok {
		return nil, errors.New("status.migrationState.targetDirectMigrationNodePorts: no port carries libvirt (0)")
	}
	return out, nil
}

// proxy is one listener and the connections it forwards.
type proxy struct {
	key      string
	port     int    // migration port it carries
	unix     Socket // the UNIX socket it serves (source) or dials (target)
	source   bool
	tcpPort  int // target: the TCP port it listens on
	dialNet  string
	dialAddr string // for messages and comparisons
	tls      *tls.Config
	ln       net.Listener

	mu      sync.Mutex
	stopped bool
	conns   map[net.Conn]bool
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		go p.forward(c)
	}
}

// track remembers c so that stop closes it; false once stopped.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *proxy) forward(in net.Conn) {
	defer p.untrack(in)
	defer in.Close()
	log := klog.Background().WithValues("key", p.key, "port", p.port)
	if tc, ok := in.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			log.Info("migration proxy: refused a connection", "from", in.RemoteAddr(), "err", err)
			return
		}
	}
	var out net.Conn
	var err error
	switch {
	case p.dialNet == "tcp" && p.tls != nil:
		out, err = tls.Dial("tcp", p.dialAddr, p.tls)
	case p.dialNet == "unix":
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		out, err = p.unix.Dir.DialUnix(ctx, p.unix.Name)
		cancel()
	default:
		out, err = net.Dial(p.dialNet, p.dialAddr)
	}
	if err != nil {
		log.Error(err, "migration proxy: connecting the outbound side", "to", p.dialAddr)
		return
	}
	if !p.track(out) {
		out.Close()
		return
	}
	defer p.untrack(out)
	defer out.Close()
	Splice(in, out)
}

// Splice copies a to b and b to a until both directions ended: when one
// side stops sending, the other side's write half is closed (where the
// connection supports it), so an end of stream passes through.
func Splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			_ = cw.CloseWrite()
		} else {
			// An error (or no half-close): end both directions.
			dst.Close()
			src.Close()
		}
	}
	go cp(b, a)
	go cp(a, b)
	wg.Wait()
}

func (p *proxy) stop() {
	p.mu.Lock()
	p.stopped = true
	conns := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	p.ln.Close()
	for c := range conns {
		c.Close()
	}
	if p.source {
		_ = p.unix.Dir.Remove(p.unix.Name)
	}
}

// stopAll stops ps, then closes their directories (several may share one).
func stopAll(ps []*proxy) {
	dirs := map[SocketDir]bool{}
	for _, p := range ps {
		p.stop()
		dirs[p.unix.Dir] = true
	}
	for d := range dirs {
		_ = d.Close()
	}
}

func portsOf(ps []*proxy) map[string]int {
	out := make(map[string]int, len(ps))
	for _, p := range ps {
		out[strconv.Itoa(p.tcpPort)] = p.port
	}
	return out
}

func sameTargets(cur []*proxy, sockets map[int]Socket) bool {
	if len(cur) != len(sockets) {
		return false
	}
	for _, p := range cur {
		if s, ok := sockets[p.port]; !ok || s.String() != p.dialAddr {
			return false
		}
	}
	return true
}

// closeDirs closes the directories of sockets the Manager does not keep.
func closeDirs(sockets map[int]Socket) {
	for _, s := range sockets {
		if s.Dir != nil {
			_ = s.Dir.Close()
		}
	}
}

func sortedPorts(m map[int]Socket) []int {
	out := make([]int, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}
