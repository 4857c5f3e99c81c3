package launcher

import (
	"context"
	"errors"
	"io"
	"sync"

	"k8s.io/klog/v2"
)

// consoleHub owns the domain's one console session: it reads everything the
// guest prints into a bounded history and hands copies to the attached
// clients; clients' writes go to the guest.
type consoleHub struct {
	max int

	mu      sync.Mutex
	conn    io.ReadWriteCloser
	ended   bool // reading conn ended (the guest's QEMU went away)
	history []byte
	subs    map[*consoleSub]struct{}
	closed  bool
}

// consoleSub is one client's view of the console: what the guest printed
// that the client has not taken yet. A booting Linux prints hundreds of
// short lines in a burst (each its own read from the console), faster than
// a client behind the node agent and a WebSocket takes them, so output is
// gathered here rather than queued chunk by chunk; only a client that
// falls more than maxPending bytes behind is dropped.
type consoleSub struct {
	mu      sync.Mutex
	pending []byte
	done    bool
	// ready has a token while pending holds data or done is set.
	ready chan struct{}
}

// maxPending is how far a console client may fall behind: at least the
// history, and 1 MiB.
func (h *consoleHub) maxPending() int {
	return max(h.max, 1<<20)
}

func newConsoleHub(max int) *consoleHub {
	return &consoleHub{max: max, subs: map[*consoleSub]struct{}{}}
}

// attach starts reading the guest's console.
func (h *consoleHub) attach(c io.ReadWriteCloser) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		_ = c.Close()
		return
	}
	if h.conn != nil {
		_ = h.conn.Close()
	}
	h.conn, h.ended = c, false
	h.mu.Unlock()
	go h.read(c)
}

func (h *consoleHub) read(c io.ReadWriteCloser) {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			h.publish(buf[:n])
		}
		if err != nil {
			h.mu.Lock()
			if h.conn == c {
				h.ended = true
			}
			h.mu.Unlock()
			return
		}
	}
}

func (h *consoleHub) publish(p []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history = append(h.history, p...)
	if over := len(h.history) - h.max; over > 0 {
		h.history = append(h.history[:0], h.history[over:]...)
	}
	for s := range h.subs {
		if !s.add(p, h.maxPending()) { // a client that cannot keep up is dropped
			delete(h.subs, s)
			s.end()
		}
	}
}

// add appends p to what the client has yet to take, false when that would
// exceed limit.
func (s *consoleSub) add(p []byte, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending)+len(p) > limit {
		return false
	}
	s.pending = append(s.pending, p...)
	s.wake()
	return true
}

// end tells the client there is no more.
func (s *consoleSub) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	s.wake()
}

// wake leaves a token in ready; s.mu is held.
func (s *consoleSub) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// next waits for output and returns everything printed since the last
// call, false once the console ended or the client was dropped (after the
// last output).
func (s *consoleSub) next() ([]byte, bool) {
	for {
		s.mu.Lock()
		if len(s.pending) > 0 {
			p := s.pending
			s.pending = nil
			s.mu.Unlock()
			return p, true
		}
		if s.done {
			s.mu.Unlock()
			return nil, false
		}
		s.mu.Unlock()
		<-s.ready
	}
}

// subscribe returns the history (when asked for) and the client's view of
// what the guest prints from now on, which ends when the console does or
// the client falls behind. cancel unsubscribes.
func (h *consoleHub) subscribe(withHistory bool) (past []byte, sub *consoleSub, cancel func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &consoleSub{ready: make(chan struct{}, 1)}
	if withHistory {
		past = append([]byte(nil), h.history...)
	}
	if h.closed {
		s.end()
		return past, s, func() {}
	}
	h.subs[s] = struct{}{}
	return past, s, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[s]; ok {
			delete(h.subs, s)
			s.end()
		}
	}
}

var errNoConsole = errors.New("the serial console is not attached")

// Write types into the guest's console.
func (h *consoleHub) Write(p []byte) (int, error) {
	h.mu.Lock()
	c := h.conn
	h.mu.Unlock()
	if c == nil {
		return 0, errNoConsole
	}
	return c.Write(p)
}

// attached reports whether a console session exists.
func (h *consoleHub) attached() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil && !h.closed
}

// live reports whether a console session exists and still reads from the
// guest.
func (h *consoleHub) live() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil && !h.ended && !h.closed
}

// close ends the session and every client.
func (h *consoleHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	if h.conn != nil {
		_ = h.conn.Close()
	}
	for s := range h.subs {
		delete(h.subs, s)
		s.end()
	}
}

// attachSerial connects the console hub to domain name's serial console,
// unless the VMI has none (autoattachSerialConsole: false); a failure is
// logged.
func (l *Launcher) attachSerial(ctx context.Context, name string) {
	if a := l.vmi.Spec.Domain.Devices.AutoattachSerialConsole; a != nil && !*a {
		return
	}
	c, err := l.h.Console(ctx, name)
	if err != nil {
		klog.FromContext(ctx).Error(err, "attaching the serial console", "vmi", l.key(), "domain", name)
		return
	}
	l.console.attach(c)
}
