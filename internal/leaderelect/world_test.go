package leaderelect

import (
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// world runs the candidates of one test on simulated time. Their Electors
// share a fake clock (k8s.io/utils/clock/testing) that only the test moves,
// and only once every running candidate waits for it: on one of its timers,
// or on a request that hangs until its context ends. Then the clock jumps
// to the earliest timer, fires it, and waits for the candidates again. A
// test sees every renewal, retry and expiry at the instant the Elector
// scheduled it, on a loaded machine as on an idle one, and a lease
// duration takes no real time.
type world struct {
	t   *testing.T
	clk *testingclock.FakeClock
	// changed is signalled when a candidate starts waiting or its Run returns.
	changed chan struct{}

	mu      sync.Mutex
	armed   map[*simTimer]struct{}
	runners []*runner
}

func newWorld(t *testing.T) *world {
	return &world{
		t:       t,
		clk:     testingclock.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)),
		changed: make(chan struct{}, 1),
		armed:   map[*simTimer]struct{}{},
	}
}

func (w *world) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// busy names a running candidate that does not wait for the clock, or
// returns "" if there is none.
func (w *world) busy() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.runners {
		if !r.returned && !r.c.clock.waiting {
			return r.c.id
		}
	}
	return ""
}

// settle waits, in real time and for up to patience, until every running
// candidate waits for the clock.
func (w *world) settle() {
	w.t.Helper()
	timeout := time.NewTimer(patience)
	defer timeout.Stop()
	for {
		busy := w.busy()
		if busy == "" {
			return
		}
		select {
		case <-w.changed:
		case <-timeout.C:
			w.t.Fatalf("candidate %s did not come to wait for the clock within %v (real time)", busy, patience)
		}
	}
}

// next returns when the earliest armed timer fires.
func (w *world) next() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for t := range w.armed {
		if first.IsZero() || t.at.Before(first) {
			first = t.at
		}
	}
	return first, !first.IsZero()
}

// advance moves the clock d forward, stopping at each timer due on the way
// to fire it and let the candidates react.
func (w *world) advance(d time.Duration) {
	w.t.Helper()
	end := w.clk.Now().Add(d)
	for {
		w.settle()
		next, ok := w.next()
		if !ok || next.After(end) {
			w.clk.SetTime(end)
			w.settle()
			return
		}
		w.clk.SetTime(next)
	}
}

// advanceUntil moves the clock forward as advance does until cond holds,
// and fails the test if it does not hold within limit.
func (w *world) advanceUntil(what string, limit time.Duration, cond func() bool) {
	w.t.Helper()
	end := w.clk.Now().Add(limit)
	for {
		w.settle()
		if cond() {
			return
		}
		next, ok := w.next()
		if !ok || next.After(end) {
			w.t.Fatalf("%s: not within %v", what, limit)
		}
		w.clk.SetTime(next)
	}
}

// candidateClock is one candidate's view of the world's clock: the fake
// clock's time, and timers the world tracks so that it can tell when the
// candidate waits for one. Only the candidate's Run goroutine uses it.
type candidateClock struct {
	w *world
	// waiting, guarded by w.mu, is true while the candidate waits for one
	// of its timers or for a hanging request's context to end.
	waiting bool
}

var _ clock.WithDelayedExecution = (*candidateClock)(nil)

func (c *candidateClock) Now() time.Time                         { return c.w.clk.Now() }
func (c *candidateClock) Since(t time.Time) time.Duration        { return c.w.clk.Since(t) }
func (c *candidateClock) NewTimer(d time.Duration) clock.Timer   { return c.newTimer(d, nil) }
func (c *candidateClock) After(d time.Duration) <-chan time.Time { return c.newTimer(d, nil).C() }
func (c *candidateClock) Sleep(d time.Duration)                  { <-c.After(d) }

func (c *candidateClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.newTimer(d, f)
}

// Tick is not supported: the world could not tell when a ticker's reader waits.
func (c *candidateClock) Tick(time.Duration) <-chan time.Time {
	panic("leaderelect's test clock has no Tick")
}

func (c *candidateClock) setWaiting(waiting bool) {
	c.w.mu.Lock()
	c.waiting = waiting
	c.w.mu.Unlock()
	if waiting {
		c.w.notify()
	}
}

func (c *candidateClock) newTimer(d time.Duration, f func()) *simTimer {
	t := &simTimer{c: c, f: f, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// simTimer is a timer (f nil) or an AfterFunc of a candidateClock. The
// fake clock's AfterFunc fires it.
type simTimer struct {
	c    *candidateClock
	f    func()
	ch   chan time.Time
	fake clock.Timer // only the candidate touches it

	// Guarded by c.w.mu: when it fires while armed, and whether the
	// candidate called C while it was armed.
	at     time.Time
	waited bool
}

// C returns the timer's channel. Called while the timer is armed, it means
// the candidate is about to wait for it (a select evaluates its channels
// just before it blocks).
func (t *simTimer) C() <-chan time.Time {
	w := t.c.w
	w.mu.Lock()
	_, armed := w.armed[t]
	if armed {
		t.waited = true
		t.c.waiting = true
	}
	w.mu.Unlock()
	if armed {
		w.notify()
	}
	return t.ch
}

// Stop stops the timer; as a Go 1.23 timer's, its channel then holds no
// stale value. The candidate calls it, so it is not waiting.
func (t *simTimer) Stop() bool {
	w := t.c.w
	w.mu.Lock()
	_, armed := w.armed[t]
	delete(w.armed, t)
	t.waited = false
	t.c.waiting = false
	w.mu.Unlock()
	if t.fake != nil {
		t.fake.Stop()
	}
	select {
	case <-t.ch:
	default:
	}
	return armed
}

func (t *simTimer) Reset(d time.Duration) bool {
	active := t.Stop()
	w := t.c.w
	at := w.clk.Now().Add(d)
	w.mu.Lock()
	t.at = at
	w.armed[t] = struct{}{}
	w.mu.Unlock()
	t.fake = w.clk.AfterFunc(d, t.fire)
	return active
}

// fire runs when the fake clock reaches the timer, under the fake clock's
// lock. A timer the candidate waits for wakes it, and so does an
// AfterFunc: the Elector's cancel the context it waits on.
func (t *simTimer) fire() {
	w := t.c.w
	w.mu.Lock()
	delete(w.armed, t)
	if t.waited || t.f != nil {
		t.c.waiting = false
	}
	t.waited = false
	at := t.at
	w.mu.Unlock()
	if t.f != nil {
		t.f()
		return
	}
	select {
	case t.ch <- at:
	default:
	}
}
