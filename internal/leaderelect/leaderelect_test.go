package leaderelect

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
)

// The durations are simulated (see world): they take no real time, and a
// loaded machine cannot stretch them. leaseDuration is not a whole number
// of seconds, to check the rounding of leaseDurationSeconds.
const (
	leaseName     = "vmkit-controller"
	leaseDuration = 1500 * time.Millisecond
	renewDeadline = 1000 * time.Millisecond
	retryPeriod   = 250 * time.Millisecond
	// jittered is the longest a waiting candidate waits between attempts.
	jittered = time.Duration(float64(retryPeriod) * (1 + jitterFactor))
	// patience bounds, in real time, every wait for a goroutine.
	patience = 5 * time.Second
)

// TestNoClientsetDependency guards the reason this package exists: it must
// not pull client-go's typed clientset, and with it every API group, into
// the binaries that use it.
func TestNoClientsetDependency(t *testing.T) {
	const pkg = "github.com/vmkit/vmkit/internal/leaderelect"
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps %s returned only %d packages; the check is not looking at the package", pkg, len(deps))
	}
	for _, dep := range deps {
		for _, banned := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/tools/leaderelection"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := Config{
		Leases:        fake.NewClientset().CoordinationV1().Leases("ns"),
		Name:          leaseName,
		Identity:      "a",
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   retryPeriod,
	}
	if _, err := New(good); err != nil {
		t.Fatalf("New(good config): %v", err)
	}
	tests := []struct {
		name   string
		modify func(*Config)
		want   string // in the error
	}{
		{"no Leases", func(c *Config) { c.Leases = nil }, "Leases"},
		{"no Name", func(c *Config) { c.Name = "" }, "Name"},
		{"no Identity", func(c *Config) { c.Identity = "" }, "Identity"},
		{"zero LeaseDuration", func(c *Config) { c.LeaseDuration = 0 }, "LeaseDuration"},
		{"negative RenewDeadline", func(c *Config) { c.RenewDeadline = -time.Second }, "RenewDeadline"},
		{"zero RetryPeriod", func(c *Config) { c.RetryPeriod = 0 }, "RetryPeriod"},
		{"LeaseDuration equal to RenewDeadline", func(c *Config) { c.LeaseDuration = c.RenewDeadline }, "LeaseDuration"},
		{"LeaseDuration below RenewDeadline", func(c *Config) { c.LeaseDuration = c.RenewDeadline / 2 }, "LeaseDuration"},
		{"RenewDeadline equal to RetryPeriod*1.2", func(c *Config) { c.RenewDeadline = c.RetryPeriod * 12 / 10 }, "RenewDeadline"},
		{"RenewDeadline below RetryPeriod", func(c *Config) { c.RenewDeadline = 50 * time.Millisecond }, "RenewDeadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.modify(&cfg)
			e, err := New(cfg)
			if err == nil {
				t.Fatalf("New returned %v and no error", e)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error %q does not name %s", err, tt.want)
			}
		})
	}
}

func TestSingleCandidateAcquiresRenewsAndReleases(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := newWorld(t)
	srv := newServer(w.clk)
	a := w.candidate(srv, "a")
	start := w.clk.Now()
	ra := w.run(ctx, a)

	w.settle()
	if !a.elector.IsLeader() {
		t.Fatal("IsLeader() = false after acquiring a free lease")
	}
	waitClosed(t, ra.leading, "a's lead to be called")
	lease := srv.lease(t)
	if got := holder(lease); got != "a" {
		t.Errorf("holderIdentity = %q, want a", got)
	}
	if got := *lease.Spec.LeaseDurationSeconds; got != 2 {
		t.Errorf("leaseDurationSeconds = %d, want 2 (1.5s rounded up)", got)
	}
	if got := *lease.Spec.LeaseTransitions; got != 0 {
		t.Errorf("leaseTransitions = %d, want 0", got)
	}
	if got := lease.Spec.AcquireTime.Time; !got.Equal(start) {
		t.Errorf("acquireTime = %v, want the time it was acquired, %v", got, start)
	}

	// A renewal every retry period moves renewTime and keeps acquireTime
	// and leaseTransitions.
	w.advance(3 * retryPeriod)
	if got := srv.updates(a.client); got != 3 {
		t.Errorf("a renewed the lease %d times in 3 retry periods, want 3", got)
	}
	lease = srv.lease(t)
	if got := holder(lease); got != "a" {
		t.Errorf("after renewals holderIdentity = %q, want a", got)
	}
	if got := lease.Spec.AcquireTime.Time; !got.Equal(start) {
		t.Errorf("after renewals acquireTime = %v, want %v", got, start)
	}
	if got, want := lease.Spec.RenewTime.Time, start.Add(3*retryPeriod); !got.Equal(want) {
		t.Errorf("after renewals renewTime = %v, want the last renewal's time %v", got, want)
	}
	if got := *lease.Spec.LeaseTransitions; got != 0 {
		t.Errorf("after renewals leaseTransitions = %d, want 0", got)
	}

	// Ending the context stops lead, then releases the Lease.
	ra.end()
	if err := ra.wait(t); err != nil {
		t.Errorf("Run returned %v after its context ended, want nil", err)
	}
	select {
	case <-ra.stopped:
	default:
		t.Error("Run returned before lead did")
	}
	lease = srv.lease(t)
	if got := holder(lease); got != "" {
		t.Errorf("after release holderIdentity = %q, want empty", got)
	}
	if got := *lease.Spec.LeaseDurationSeconds; got != 1 {
		t.Errorf("after release leaseDurationSeconds = %d, want 1 (a released lease's)", got)
	}
	if got := *lease.Spec.LeaseTransitions; got != 0 {
		t.Errorf("after release leaseTransitions = %d, want 0", got)
	}
	if a.elector.IsLeader() {
		t.Error("IsLeader() = true after release")
	}
	if n := ra.calls.Load(); n != 1 {
		t.Errorf("lead called %d times, want 1", n)
	}
}

// TestRealClockByDefault runs a candidate without a Clock: it acquires
// the free lease at once, on the real clock, and releases it when its
// context ends.
func TestRealClockByDefault(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	srv := newServer(clock.RealClock{})
	c := &client{server: srv}
	srv.counts[c] = &counts{}
	e, err := New(Config{Leases: c, Name: leaseName, Identity: "a", LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	leading := make(chan struct{})
	result := make(chan error, 1)
	go func() { result <- e.Run(ctx, func(ctx context.Context) { close(leading); <-ctx.Done() }) }()
	waitClosed(t, leading, "a to lead")
	lease := srv.lease(t)
	if got := holder(lease); got != "a" {
		t.Errorf("holderIdentity = %q, want a", got)
	}
	if got := lease.Spec.AcquireTime.Time; got.Before(before) || got.After(time.Now()) {
		t.Errorf("acquireTime = %v, want the real time it was acquired, after %v", got, before)
	}
	cancel()
	select {
	case err := <-result:
		if err != nil {
			t.Errorf("Run returned %v after its context ended, want nil", err)
		}
	case <-time.After(patience):
		t.Fatal("Run did not return after its context ended")
	}
	if got := holder(srv.lease(t)); got != "" {
		t.Errorf("after release holderIdentity = %q, want empty", got)
	}
}

func TestTakeoverAfterRelease(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := newWorld(t)
	srv := newServer(w.clk)
	a, b := w.candidate(srv, "a"), w.candidate(srv, "b")
	ra := w.run(ctx, a)
	w.settle()
	waitClosed(t, ra.leading, "a to lead")
	rb := w.run(ctx, b)

	// b keeps trying but does not lead while a renews, for longer than a
	// lease duration.
	w.advance(2 * leaseDuration)
	select {
	case <-rb.leading:
		t.Fatal("b leads while a renews the lease")
	default:
	}
	if b.elector.IsLeader() {
		t.Error("b: IsLeader() = true while a renews the lease")
	}
	if got, want := srv.gets(b.client), int(2*leaseDuration/jittered); got < want {
		t.Errorf("b read the lease %d times in %v, want at least %d (one every retry period with jitter)", got, 2*leaseDuration, want)
	}

	released := w.clk.Now()
	ra.end()
	if err := ra.wait(t); err != nil {
		t.Errorf("a: Run returned %v after its context ended, want nil", err)
	}
	w.advanceUntil("b to lead", leaseDuration, b.elector.IsLeader)
	if took := w.clk.Since(released); took > jittered {
		t.Errorf("b took over %v after a released the lease, want at its next attempt, within %v", took, jittered)
	}
	waitClosed(t, rb.leading, "b's lead to be called")
	lease := srv.lease(t)
	if got := holder(lease); got != "b" {
		t.Errorf("holderIdentity = %q, want b", got)
	}
	if got := *lease.Spec.LeaseTransitions; got != 1 {
		t.Errorf("leaseTransitions = %d, want 1", got)
	}
	if !lease.Spec.AcquireTime.Time.After(released) {
		t.Errorf("acquireTime = %v, want after a released the lease at %v", lease.Spec.AcquireTime.Time, released)
	}
	if !b.elector.IsLeader() || a.elector.IsLeader() {
		t.Errorf("IsLeader() = %v for a and %v for b, want false and true", a.elector.IsLeader(), b.elector.IsLeader())
	}
}

func TestTakeoverAfterLeaderStopsRenewing(t *testing.T) {
	tests := []struct {
		name  string
		fault fault
	}{
		{"requests fail", failing},
		{"requests hang", hanging},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			w := newWorld(t)
			srv := newServer(w.clk)
			a, b := w.candidate(srv, "a"), w.candidate(srv, "b")
			ra := w.run(ctx, a)
			w.settle()
			waitClosed(t, ra.leading, "a to lead")
			rb := w.run(ctx, b)
			// Let b observe a's renewals for a while.
			w.advance(leaseDuration)

			a.client.fault.Store(int32(tt.fault))
			broken := w.clk.Now()

			// a gives up at the renew deadline after its last renewal,
			// without anyone's help.
			w.advanceUntil("a to stop leading", 2*renewDeadline, func() bool { return !a.elector.IsLeader() })
			aStopped := w.clk.Now()
			if took := aStopped.Sub(broken); took > renewDeadline {
				t.Errorf("a stopped leading %v after its requests broke, want at most the renew deadline %v", took, renewDeadline)
			}
			if took := aStopped.Sub(srv.lastUpdate(a.client)); took != renewDeadline {
				t.Errorf("a stopped leading %v after its last renewal, want the renew deadline %v", took, renewDeadline)
			}
			waitClosed(t, ra.stopped, "a's lead to return")
			// Releasing the lease fails too; a hanging request is cut at
			// the renew deadline.
			w.advanceUntil("a's Run to return", renewDeadline, ra.hasReturned)
			if err := ra.wait(t); !errors.Is(err, ErrLostLease) {
				t.Errorf("a: Run returned %v, want ErrLostLease", err)
			}
			if a.elector.IsLeader() {
				t.Error("a: IsLeader() = true after losing the lease")
			}

			// b takes over once a's last renewal is a lease duration old,
			// and not before a stopped leading.
			w.advanceUntil("b to lead", leaseDuration+2*jittered, b.elector.IsLeader)
			waitClosed(t, rb.leading, "b's lead to be called")
			lease := srv.lease(t)
			bStarted := lease.Spec.AcquireTime.Time
			if !bStarted.After(aStopped) {
				t.Errorf("b started leading at %v, not after a stopped at %v", bStarted, aStopped)
			}
			// b saw a's last renewal at its next attempt, and takes over at
			// its first attempt a lease duration after that.
			took := bStarted.Sub(srv.lastUpdate(a.client))
			if took < leaseDuration || took > leaseDuration+2*jittered {
				t.Errorf("b took over %v after a's last renewal, want between the lease duration %v and %v", took, leaseDuration, leaseDuration+2*jittered)
			}
			if got := holder(lease); got != "b" {
				t.Errorf("holderIdentity = %q, want b", got)
			}
			if got := *lease.Spec.LeaseTransitions; got != 1 {
				t.Errorf("leaseTransitions = %d, want 1", got)
			}
			if n := ra.calls.Load(); n != 1 {
				t.Errorf("a: lead called %d times, want 1", n)
			}
		})
	}
}

func TestCancelWhileWaiting(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := newWorld(t)
	srv := newServer(w.clk)
	a, b := w.candidate(srv, "a"), w.candidate(srv, "b")
	ra := w.run(ctx, a)
	w.settle()
	waitClosed(t, ra.leading, "a to lead")
	rb := w.run(ctx, b)
	w.settle()
	if srv.gets(b.client) == 0 {
		t.Fatal("b waits without having read the lease")
	}

	rb.end()
	if err := rb.wait(t); err != nil {
		t.Errorf("b: Run returned %v after its context ended, want nil", err)
	}
	if n := rb.calls.Load(); n != 0 {
		t.Errorf("b: lead called %d times, want 0", n)
	}
	if got := holder(srv.lease(t)); got != "a" {
		t.Errorf("holderIdentity = %q, want a", got)
	}
	select {
	case <-ra.stopped:
		t.Error("a stopped leading when b gave up")
	default:
	}
}

func TestAtMostOneLeader(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := newWorld(t)
	srv := newServer(w.clk)
	var leading, most atomic.Int32
	lead := func(ctx context.Context) {
		n := leading.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-ctx.Done()
		leading.Add(-1)
	}
	var runs []*runner
	for _, id := range []string{"a", "b", "c"} {
		runs = append(runs, w.runWith(ctx, w.candidate(srv, id), lead))
	}
	leaders := func() (n int, leader *runner) {
		for _, r := range runs {
			if r.c.elector.IsLeader() {
				n, leader = n+1, r
			}
		}
		return n, leader
	}
	w.advanceUntil("a leader", leaseDuration, func() bool { n, _ := leaders(); return n > 0 })
	w.advance(2 * leaseDuration)
	n, leader := leaders()
	if n != 1 {
		t.Fatalf("%d candidates lead, want 1", n)
	}
	waitClosed(t, leader.leading, leader.c.id+"'s lead to be called")
	if n := most.Load(); n != 1 {
		t.Errorf("%d candidates led at once, want 1", n)
	}
	for _, r := range runs {
		select {
		case <-r.leading:
			if r != leader {
				t.Errorf("%s led as well as %s", r.c.id, leader.c.id)
			}
		default:
		}
	}
}

func TestCreateConflict(t *testing.T) {
	// Another candidate creates the Lease between our Get and Create: the
	// attempt fails, and the next one sees the Lease held.
	_, ctx := ktesting.NewTestContext(t)
	w := newWorld(t)
	srv := newServer(w.clk)
	a := w.candidate(srv, "a")
	a.client.beforeCreate = func() {
		other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName}}
		now := w.clk.Now()
		record{holder: "other", durationSeconds: 1, acquire: now, renew: now}.applyTo(&other.Spec)
		if _, err := srv.create(ctx, other); err != nil {
			t.Errorf("creating the other candidate's lease: %v", err)
		}
	}
	ra := w.run(ctx, a)
	w.settle()
	if a.client.creates.Load() == 0 {
		t.Fatal("a waits without having tried to create the lease")
	}
	// a saw the other candidate's lease at its second attempt, at least a
	// retry period in: it is not a lease duration old before then.
	w.advance(leaseDuration)
	select {
	case <-ra.leading:
		t.Fatal("a leads though another candidate created the lease first")
	default:
	}
	if a.elector.IsLeader() {
		t.Error("IsLeader() = true though another candidate created the lease first")
	}
	if got := holder(srv.lease(t)); got != "other" {
		t.Errorf("holderIdentity = %q, want other", got)
	}
	// The other candidate never renews, so a takes over.
	w.advanceUntil("a to take over the abandoned lease", leaseDuration, a.elector.IsLeader)
	waitClosed(t, ra.leading, "a's lead to be called")
	if got := *srv.lease(t).Spec.LeaseTransitions; got != 1 {
		t.Errorf("leaseTransitions = %d, want 1", got)
	}
}

// fault is how a client's requests misbehave.
type fault int32

const (
	healthy fault = iota
	failing       // requests fail at once
	hanging       // requests block until their context ends
)

// server stands in for the API server. It adds what the fake clientset
// lacks: resourceVersions, and Updates that fail with a conflict when the
// resourceVersion is stale. It counts requests per client, and notes the
// (simulated) time of each client's last update.
type server struct {
	clock   clock.PassiveClock
	mu      sync.Mutex
	leases  Leases
	version int
	counts  map[*client]*counts
}

type counts struct {
	gets, updates int
	lastUpdate    time.Time
}

func newServer(clk clock.PassiveClock) *server {
	return &server{clock: clk, leases: fake.NewClientset().CoordinationV1().Leases("ns"), counts: map[*client]*counts{}}
}

// candidate is one Elector with its own client of a server and its own
// view of the world's clock.
type candidate struct {
	id      string
	elector *Elector
	client  *client
	clock   *candidateClock
}

// candidate returns a candidate named id that talks to s.
func (w *world) candidate(s *server, id string) *candidate {
	w.t.Helper()
	clk := &candidateClock{w: w}
	c := &client{server: s, clock: clk}
	s.mu.Lock()
	s.counts[c] = &counts{}
	s.mu.Unlock()
	e, err := New(Config{
		Leases:        c,
		Name:          leaseName,
		Identity:      id,
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   retryPeriod,
		Clock:         clk,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return &candidate{id: id, elector: e, client: c, clock: clk}
}

func (s *server) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := s.leases.Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the lease: %v", err)
	}
	return l
}

func (s *server) create(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l = l.DeepCopy()
	s.version++
	l.ResourceVersion = strconv.Itoa(s.version)
	return s.leases.Create(ctx, l, metav1.CreateOptions{})
}

func (s *server) gets(c *client) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[c].gets
}

func (s *server) updates(c *client) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[c].updates
}

func (s *server) lastUpdate(c *client) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[c].lastUpdate
}

// client is one candidate's connection to a server, with injected faults.
type client struct {
	server       *server
	clock        *candidateClock // its candidate's: a hanging request waits for it
	fault        atomic.Int32
	creates      atomic.Int32
	beforeCreate func() // called before the first Create, if set
}

func (c *client) check(ctx context.Context) error {
	switch fault(c.fault.Load()) {
	case failing:
		return apierrors.NewServiceUnavailable("injected fault")
	case hanging:
		if ctx.Err() == nil {
			// Only a deadline on the clock, or the test, ends ctx.
			c.clock.setWaiting(true)
			<-ctx.Done()
			c.clock.setWaiting(false)
		}
		return ctx.Err()
	}
	return ctx.Err()
}

func (c *client) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	s := c.server
	s.mu.Lock()
	s.counts[c].gets++
	s.mu.Unlock()
	return s.leases.Get(ctx, name, opts)
}

func (c *client) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	if c.creates.Add(1) == 1 && c.beforeCreate != nil {
		c.beforeCreate()
	}
	return c.server.create(ctx, lease)
}

func (c *client) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	s := c.server
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.leases.Get(ctx, lease.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if cur.ResourceVersion != lease.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, lease.Name,
			errors.New("the object has been modified"))
	}
	lease = lease.DeepCopy()
	s.version++
	lease.ResourceVersion = strconv.Itoa(s.version)
	s.counts[c].updates++
	s.counts[c].lastUpdate = s.clock.Now()
	return s.leases.Update(ctx, lease, opts)
}

// runner is one call of Run in its own goroutine.
type runner struct {
	w       *world
	c       *candidate
	cancel  context.CancelFunc
	result  chan error
	leading chan struct{} // closed when lead is called
	stopped chan struct{} // closed when lead returns
	calls   atomic.Int32
	// returned, guarded by w.mu, is true once Run returned.
	returned bool
}

// run calls Run with a lead that waits for its context to end.
func (w *world) run(ctx context.Context, c *candidate) *runner {
	return w.runWith(ctx, c, func(ctx context.Context) { <-ctx.Done() })
}

func (w *world) runWith(ctx context.Context, c *candidate, lead func(context.Context)) *runner {
	t := w.t
	ctx, cancel := context.WithCancel(ctx)
	r := &runner{w: w, c: c, cancel: cancel, result: make(chan error, 1), leading: make(chan struct{}), stopped: make(chan struct{})}
	w.mu.Lock()
	w.runners = append(w.runners, r)
	w.mu.Unlock()
	go func() {
		err := c.elector.Run(ctx, func(ctx context.Context) {
			if r.calls.Add(1) > 1 {
				t.Error("lead called more than once")
				return
			}
			close(r.leading)
			defer close(r.stopped)
			lead(ctx)
		})
		w.mu.Lock()
		r.returned = true
		w.mu.Unlock()
		w.notify()
		r.result <- err
	}()
	t.Cleanup(func() {
		r.end()
		w.advanceUntil("Run to return after its context ended", renewDeadline, r.hasReturned)
	})
	return r
}

// end ends Run's context. The candidate stops waiting for the clock.
func (r *runner) end() {
	r.c.clock.setWaiting(false)
	r.cancel()
}

func (r *runner) hasReturned() bool {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return r.returned
}

// wait returns what Run returned.
func (r *runner) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.result:
		r.result <- err // for the next caller
		return err
	case <-time.After(patience):
		t.Fatal("Run did not return")
		return nil
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return "<nil>"
	}
	return *l.Spec.HolderIdentity
}
