package launcher

import (
	"errors"
	"io"
	"sync"
)

// consoleHub owns the domain's one console session: it reads everything the
// guest prints into a bounded history and hands copies to the attached
// clients; clients' writes go to the guest.
type consoleHub struct {
	max int

	mu      sync.Mutex
	conn    io.ReadWriteCloser
	history []byte
	subs    map[chan []byte]struct{}
	closed  bool
}

func newConsoleHub(max int) *consoleHub {
	return &consoleHub{max: max, subs: map[chan []byte]struct{}{}}
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
	h.conn = c
	h.mu.Unlock()
	go h.read(c)
}

func (h *consoleHub) read(c io.Reader) {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			h.publish(buf[:n])
		}
		if err != nil {
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
	for ch := range h.subs {
		select {
		case ch <- append([]byte(nil), p...):
		default: // a client that cannot keep up is dropped
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// subscribe returns the history (when asked for) and a channel of what the
// guest prints from now on; the channel closes when the console ends or the
// client falls behind. cancel unsubscribes.
func (h *consoleHub) subscribe(withHistory bool) (past []byte, ch <-chan []byte, cancel func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := make(chan []byte, 256)
	if withHistory {
		past = append([]byte(nil), h.history...)
	}
	if h.closed {
		close(c)
		return past, c, func() {}
	}
	h.subs[c] = struct{}{}
	return past, c, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[c]; ok {
			delete(h.subs, c)
			close(c)
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
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}
