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
)

// The timings leave a loaded machine (the e2e suite runs beside these
// tests in make test) time for a fake client's write: with a 400 ms renew
// deadline a slow scheduler made a leader lose its lease mid-test.
const (
	leaseName     = "vmkit-controller"
	leaseDuration = 1500 * time.Millisecond
	renewDeadline = 1000 * time.Millisecond
	retryPeriod   = 250 * time.Millisecond
	// patience bounds every wait for something that should happen.
	patience = 5 * time.Second
)

// TestNoClientsetDependency guards the reason this package exists: it must
// not pull client-go's typed clientset, and with it every API group, into
// the binaries that use it.
func TestNoClientsetDependency(t *testing.T) {
	const pkg = "github.com/vmkit/vmkit/vmcontrol/internal/leaderelect"
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
	srv := newServer()
	a := srv.candidate(t, "a")
	ra := run(ctx, t, a.elector)

	waitClosed(t, ra.leading, "a to lead")
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
	if !a.elector.IsLeader() {
		t.Error("IsLeader() = false while leading")
	}

	// Renewals move renewTime and keep acquireTime and leaseTransitions.
	acquired, renewed := lease.Spec.AcquireTime.Time, lease.Spec.RenewTime.Time
	waitFor(t, "a to renew the lease 3 times", func() bool {
		return srv.updates(a.client) >= 3
	})
	lease = srv.lease(t)
	if got := holder(lease); got != "a" {
		t.Errorf("after renewals holderIdentity = %q, want a", got)
	}
	if !lease.Spec.AcquireTime.Time.Equal(acquired) {
		t.Errorf("after renewals acquireTime = %v, want %v", lease.Spec.AcquireTime.Time, acquired)
	}
	if !lease.Spec.RenewTime.Time.After(renewed) {
		t.Errorf("after renewals renewTime = %v, want after %v", lease.Spec.RenewTime.Time, renewed)
	}
	if got := *lease.Spec.LeaseTransitions; got != 0 {
		t.Errorf("after renewals leaseTransitions = %d, want 0", got)
	}

	// Ending the context stops lead, then releases the Lease.
	ra.cancel()
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

func TestTakeoverAfterRelease(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	srv := newServer()
	a, b := srv.candidate(t, "a"), srv.candidate(t, "b")
	ra := run(ctx, t, a.elector)
	waitClosed(t, ra.leading, "a to lead")
	rb := run(ctx, t, b.elector)

	// b keeps trying but does not lead while a renews, for longer than a
	// lease duration.
	time.Sleep(2 * leaseDuration)
	select {
	case <-rb.leading:
		t.Fatal("b leads while a renews the lease")
	default:
	}
	if b.elector.IsLeader() {
		t.Error("b: IsLeader() = true while a renews the lease")
	}
	if srv.gets(b.client) < 3 {
		t.Errorf("b read the lease %d times in %v, want it to keep trying", srv.gets(b.client), 2*leaseDuration)
	}

	cancelled := time.Now()
	ra.cancel()
	if err := ra.wait(t); err != nil {
		t.Errorf("a: Run returned %v after its context ended, want nil", err)
	}
	released := time.Now()
	waitClosed(t, rb.leading, "b to lead")
	if took := time.Since(released); took >= leaseDuration {
		t.Errorf("b took over %v after a released the lease, want less than the lease duration %v", took, leaseDuration)
	}
	lease := srv.lease(t)
	if got := holder(lease); got != "b" {
		t.Errorf("holderIdentity = %q, want b", got)
	}
	if got := *lease.Spec.LeaseTransitions; got != 1 {
		t.Errorf("leaseTransitions = %d, want 1", got)
	}
	if !lease.Spec.AcquireTime.Time.After(cancelled) {
		t.Errorf("acquireTime = %v, want after a released the lease at %v", lease.Spec.AcquireTime.Time, cancelled)
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
			srv := newServer()
			a, b := srv.candidate(t, "a"), srv.candidate(t, "b")
			ra := run(ctx, t, a.elector)
			waitClosed(t, ra.leading, "a to lead")
			rb := run(ctx, t, b.elector)
			// Let b observe a's renewals for a while.
			time.Sleep(leaseDuration)

			a.client.fault.Store(int32(tt.fault))
			broken := time.Now()

			// a gives up within the renew deadline, without anyone's help.
			waitClosed(t, ra.stopped, "a to stop leading")
			aStopped := time.Now()
			if took := aStopped.Sub(broken); took > renewDeadline+retryPeriod {
				t.Errorf("a stopped leading %v after its requests broke, want at most the renew deadline %v (+%v)", took, renewDeadline, retryPeriod)
			}
			if err := ra.wait(t); !errors.Is(err, ErrLostLease) {
				t.Errorf("a: Run returned %v, want ErrLostLease", err)
			}
			if a.elector.IsLeader() {
				t.Error("a: IsLeader() = true after losing the lease")
			}

			// b takes over once a's last renewal is a lease duration old,
			// and not before a stopped leading.
			waitClosed(t, rb.leading, "b to lead")
			bStarted := time.Now()
			if bStarted.Before(aStopped) {
				t.Errorf("b started leading at %v, before a stopped at %v", bStarted, aStopped)
			}
			if took := bStarted.Sub(srv.lastUpdate(a.client)); took < leaseDuration {
				t.Errorf("b took over %v after a's last renewal, want at least the lease duration %v", took, leaseDuration)
			}
			lease := srv.lease(t)
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
	srv := newServer()
	a, b := srv.candidate(t, "a"), srv.candidate(t, "b")
	ra := run(ctx, t, a.elector)
	waitClosed(t, ra.leading, "a to lead")
	rb := run(ctx, t, b.elector)
	waitFor(t, "b to read the lease", func() bool { return srv.gets(b.client) > 0 })

	rb.cancel()
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
	srv := newServer()
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
		runs = append(runs, runWith(ctx, t, srv.candidate(t, id).elector, lead))
	}
	waitFor(t, "a leader", func() bool { return leading.Load() == 1 })
	time.Sleep(2 * leaseDuration)
	if n := most.Load(); n != 1 {
		t.Errorf("%d candidates led at once, want 1", n)
	}
	var leaders int
	for _, r := range runs {
		select {
		case <-r.leading:
			leaders++
		default:
		}
	}
	if leaders != 1 {
		t.Errorf("%d candidates led, want 1", leaders)
	}
}

func TestCreateConflict(t *testing.T) {
	// Another candidate creates the Lease between our Get and Create: the
	// attempt fails, and the next one sees the Lease held.
	_, ctx := ktesting.NewTestContext(t)
	srv := newServer()
	a := srv.candidate(t, "a")
	a.client.beforeCreate = func() {
		other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName}}
		record{holder: "other", durationSeconds: 1, acquire: time.Now(), renew: time.Now()}.applyTo(&other.Spec)
		if _, err := srv.create(ctx, other); err != nil {
			t.Errorf("creating the other candidate's lease: %v", err)
		}
	}
	ra := run(ctx, t, a.elector)
	waitFor(t, "a to try creating the lease", func() bool { return a.client.creates.Load() > 0 })
	time.Sleep(2 * retryPeriod)
	select {
	case <-ra.leading:
		t.Fatal("a leads though another candidate created the lease first")
	default:
	}
	if got := holder(srv.lease(t)); got != "other" {
		t.Errorf("holderIdentity = %q, want other", got)
	}
	// The other candidate never renews, so a takes over.
	waitClosed(t, ra.leading, "a to take over the abandoned lease")
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
// resourceVersion is stale. It counts requests per client.
type server struct {
	mu      sync.Mutex
	leases  Leases
	version int
	counts  map[*client]*counts
}

type counts struct {
	gets, updates int
	lastUpdate    time.Time
}

func newServer() *server {
	return &server{leases: fake.NewClientset().CoordinationV1().Leases("ns"), counts: map[*client]*counts{}}
}

// candidate returns an Elector named id that talks to s through its own client.
func (s *server) candidate(t *testing.T, id string) struct {
	elector *Elector
	client  *client
} {
	t.Helper()
	c := &client{server: s}
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
	})
	if err != nil {
		t.Fatal(err)
	}
	return struct {
		elector *Elector
		client  *client
	}{e, c}
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
	fault        atomic.Int32
	creates      atomic.Int32
	beforeCreate func() // called before the first Create, if set
}

func (c *client) check(ctx context.Context) error {
	switch fault(c.fault.Load()) {
	case failing:
		return apierrors.NewServiceUnavailable("injected fault")
	case hanging:
		<-ctx.Done()
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
	s.counts[c].lastUpdate = time.Now()
	return s.leases.Update(ctx, lease, opts)
}

// runner is one call of Run in its own goroutine.
type runner struct {
	cancel  context.CancelFunc
	result  chan error
	leading chan struct{} // closed when lead is called
	stopped chan struct{} // closed when lead returns
	calls   atomic.Int32
}

// run calls e.Run with a lead that waits for its context to end.
func run(ctx context.Context, t *testing.T, e *Elector) *runner {
	return runWith(ctx, t, e, func(ctx context.Context) { <-ctx.Done() })
}

func runWith(ctx context.Context, t *testing.T, e *Elector, lead func(context.Context)) *runner {
	ctx, cancel := context.WithCancel(ctx)
	r := &runner{cancel: cancel, result: make(chan error, 1), leading: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		r.result <- e.Run(ctx, func(ctx context.Context) {
			if r.calls.Add(1) > 1 {
				t.Error("lead called more than once")
				return
			}
			close(r.leading)
			defer close(r.stopped)
			lead(ctx)
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.result:
		case <-time.After(patience):
			t.Error("Run did not return after its context ended")
		}
	})
	return r
}

// wait returns what Run returned.
func (r *runner) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.result:
		r.result <- err // for the cleanup
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return "<nil>"
	}
	return *l.Spec.HolderIdentity
}
