// Package console owns the one session of a domain's serial console in
// the launcher: it keeps a bounded history of what the guest printed,
// hands copies to every attached client (dropping one that falls too far
// behind) and passes clients' writes to the guest.
package console

import (
	"errors"
	"io"
	"sync"
)

// Hub owns the domain's one console session: it reads everything the
// guest prints into a bounded history and hands copies to the attached
// clients; clients' writes go to the guest.
type Hub struct {
	max int

	mu      sync.Mutex
	conn    io.ReadWriteCloser
	ended   bool // reading conn ended (the guest's QEMU went away)
	history []byte
	subs    map[*Sub]struct{}
	closed  bool
}

// Sub is one client's view of the console: what the guest printed
// that the client has not taken yet. A booting Linux prints hundreds of
// short lines in a burst (each its own read from the console), faster than
// a client behind the node agent and a WebSocket takes them, so output is
// gathered here rather than queued chunk by chunk; only a client that
// falls more than maxPending bytes behind is dropped.
type Sub struct {
	mu      sync.Mutex
	pending []byte
	done    bool
	// ready has a token while pending holds data or done is set.
	ready chan struct{}
}

// maxPending is how far a console client may fall behind: at least the
// history, and 1 MiB.
func (h *Hub) maxPending() int {
	return max(h.max, 1<<20)
}

// New returns a Hub that keeps the last max bytes of console output as
// history.
func New(max int) *Hub {
	return &Hub{max: max, subs: map[*Sub]struct{}{}}
}

// Attach starts reading the guest's console.
func (h *Hub) Attach(c io.ReadWriteCloser) {
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

func (h *Hub) read(c io.ReadWriteCloser) {
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

func (h *Hub) publish(p []byte) {
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
func (s *Sub) add(p []byte, limit int) bool {
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
func (s *Sub) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	s.wake()
}

// wake leaves a token in ready; s.mu is held.
func (s *Sub) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Next waits for output and returns everything printed since the last
// call, false once the console ended or the client was dropped (after the
// last output).
func (s *Sub) Next() ([]byte, bool) {
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

// Subscribe returns the history (when asked for) and the client's view of
// what the guest prints from now on, which ends when the console does or
// the client falls behind. cancel unsubscribes.
func (h *Hub) Subscribe(withHistory bool) (past []byte, sub *Sub, cancel func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &Sub{ready: make(chan struct{}, 1)}
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

// ErrNotAttached: no console session exists (Write).
var ErrNotAttached = errors.New("the serial console is not attached")

// Write types into the guest's console.
func (h *Hub) Write(p []byte) (int, error) {
	h.mu.Lock()
	c := h.conn
	h.mu.Unlock()
	if c == nil {
		return 0, ErrNotAttached
	}
	return c.Write(p)
}

// Attached reports whether a console session exists.
func (h *Hub) Attached() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil && !h.closed
}

// Live reports whether a console session exists and still reads from the
// guest.
func (h *Hub) Live() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil && !h.ended && !h.closed
}

// Close ends the session and every client.
func (h *Hub) Close() {
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
