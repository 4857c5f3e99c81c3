// Package leaderelect elects one leader among several candidates through a
// coordination.k8s.io/v1 Lease. It behaves like client-go's
// tools/leaderelection with a resourcelock.LeaseLock and ReleaseOnCancel
// set, but it reaches the API server only through the small Leases
// interface, so a binary that uses it does not link client-go's typed
// clientset and every API group that comes with it.
//
// The holder renews the Lease every RetryPeriod. The other candidates
// remember when they last saw the Lease change, by their own clock, and
// take it over once it has not changed for LeaseDuration. A holder that
// cannot renew within RenewDeadline stops leading; a holder whose context
// ends releases the Lease so that another candidate takes over at once.
//
// Why not client-go's tools/leaderelection, which every controller uses:
// its resourcelock package imports client-go's typed core and coordination
// clients, and with them client-go/kubernetes/scheme, which registers all
// 57 k8s.io/api groups. Linking it into virt-controller (with a LeaseLock on
// a typed coordination/v1 client, as a switch would) was measured for
// issue #22: code and read-only data 28.3 MB -> 41.0 MB, RSS of the idle
// controller 32 -> 42 MiB (the binary's pages 22 -> 31-32 MiB) and its
// peak at 1,000 VMs (hack/density) 62-64 -> 73 MiB, against the 60 MiB
// vmkit aims for at that size (issue #5) and KubeVirt's 300 MiB. That
// gain is kept. The rules are client-go's (expiry judged by the local time
// a change was observed, the renew deadline, release on cancel), and so
// are the Manager's options (lease name and namespace, identity, the three
// durations). See docs/performance.md.
//
// It is the module's one leader election: virt-controller (through
// vmcontrol.Manager) and virt-operator both run it, and a test in the
// module's root keeps client-go's out.
package leaderelect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// jitterFactor spreads the candidates' acquisition attempts over
// [RetryPeriod, RetryPeriod*(1+jitterFactor)], as client-go's JitterFactor.
const jitterFactor = 1.2

// ErrLostLease is returned by Run when the leader could not renew the Lease
// within RenewDeadline and stopped leading.
var ErrLostLease = errors.New("leaderelect: lost the lease: could not renew it within the renew deadline")

// Leases reads and writes the Lease; client-go's typed LeaseInterface satisfies it.
type Leases interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// Config describes one candidate for one Lease. Every candidate for the
// same Lease should use the same durations.
type Config struct {
	// Leases reads and writes Leases in the Lease's namespace.
	Leases Leases
	// Name is the Lease's name.
	Name string
	// Identity names this candidate; it is written to the Lease's
	// holderIdentity and must differ between candidates.
	Identity string
	// LeaseDuration is how long the other candidates wait, after they last
	// saw the Lease change, before they take it over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying a renewal before
	// it gives up leading. It must be less than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is how often the leader renews the Lease and how often
	// (with jitter) the other candidates try to acquire it. RetryPeriod*1.2
	// must be less than RenewDeadline.
	RetryPeriod time.Duration
	// Clock is what the election reads the time from and waits on: the
	// times written to the Lease, when the Lease last changed (its expiry),
	// the retry period with its jitter, the renew deadline and the
	// release's timeout. nil means the real clock (clock.RealClock{}).
	// Tests set a fake one (k8s.io/utils/clock/testing) and step it.
	Clock clock.WithDelayedExecution
}

// Elector runs the election for one candidate. Make it with New.
type Elector struct {
	cfg Config
	// leaseSeconds is written to the Lease's leaseDurationSeconds.
	leaseSeconds int32

	// lease is the Lease as last read or written; its resourceVersion makes
	// the next Update fail if someone else wrote the Lease in between.
	// lastRead is the record of the Lease as last read, to tell whether it
	// changed. Only the goroutine in Run uses them.
	lease    *coordinationv1.Lease
	lastRead *record

	mu sync.Mutex
	// leading is true from acquiring the Lease until renewing it stops.
	leading bool
	// observed is the record as last read or written, observedTime the
	// local time it last changed.
	observed     record
	observedTime time.Time
}

// record is the part of a Lease's spec the election uses.
type record struct {
	holder          string
	durationSeconds int32
	acquire, renew  time.Time
	transitions     int32
}

// New checks the config and returns an Elector for it.
func New(cfg Config) (*Elector, error) {
	switch {
	case cfg.Leases == nil:
		return nil, errors.New("leaderelect: Leases is required")
	case cfg.Name == "":
		return nil, errors.New("leaderelect: Name is required")
	case cfg.Identity == "":
		return nil, errors.New("leaderelect: Identity is required")
	case cfg.LeaseDuration <= 0:
		return nil, fmt.Errorf("leaderelect: LeaseDuration must be greater than zero, got %v", cfg.LeaseDuration)
	case cfg.RenewDeadline <= 0:
		return nil, fmt.Errorf("leaderelect: RenewDeadline must be greater than zero, got %v", cfg.RenewDeadline)
	case cfg.RetryPeriod <= 0:
		return nil, fmt.Errorf("leaderelect: RetryPeriod must be greater than zero, got %v", cfg.RetryPeriod)
	case cfg.LeaseDuration <= cfg.RenewDeadline:
		return nil, fmt.Errorf("leaderelect: LeaseDuration (%v) must be greater than RenewDeadline (%v)", cfg.LeaseDuration, cfg.RenewDeadline)
	case float64(cfg.RenewDeadline) <= jitterFactor*float64(cfg.RetryPeriod):
		return nil, fmt.Errorf("leaderelect: RenewDeadline (%v) must be greater than RetryPeriod*%v (%v)",
			cfg.RenewDeadline, jitterFactor, time.Duration(jitterFactor*float64(cfg.RetryPeriod)))
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	// The API server rejects a leaseDurationSeconds below 1, so a duration
	// that is not a whole number of seconds is rounded up.
	seconds := int32((cfg.LeaseDuration + time.Second - 1) / time.Second)
	return &Elector{cfg: cfg, leaseSeconds: seconds}, nil
}

// Run blocks until ctx ends or leadership is lost. It waits to acquire the
// Lease, trying every RetryPeriod with jitter; once it holds the Lease it
// calls lead in a new goroutine and renews the Lease every RetryPeriod.
// When a renewal has not succeeded within RenewDeadline, or ctx ends, Run
// cancels the context given to lead, waits for lead to return, releases
// the Lease if it still holds it and returns. lead should therefore return
// promptly once its context is cancelled; if it returns earlier, Run keeps
// the Lease until ctx ends.
//
// Run returns nil when ctx ended, whether or not it was leading, and
// ErrLostLease when the renewal failed. It calls lead at most once. An
// Elector runs one Run at a time.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) error {
	log := klog.FromContext(ctx).WithValues("lease", e.cfg.Name, "identity", e.cfg.Identity)
	ctx = klog.NewContext(ctx, log)

	if !e.acquire(ctx) {
		return nil
	}
	if ctx.Err() != nil { // ended while the last attempt was succeeding
		e.release(ctx)
		return nil
	}
	e.setLeading(true)
	leaderCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leaderCtx)
	}()
	err := e.renew(leaderCtx)
	e.setLeading(false)
	cancel()
	<-done
	e.release(ctx)
	return err
}

// IsLeader reports whether this candidate holds the Lease now, as last
// observed: Run is leading, and the Lease named this candidate as holder
// when last read or written.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading && e.observed.holder == e.cfg.Identity
}

// acquire tries to acquire the Lease every RetryPeriod, with jitter, until
// it succeeds (true) or ctx ends (false).
func (e *Elector) acquire(ctx context.Context) bool {
	log := klog.FromContext(ctx)
	log.V(2).Info("waiting to acquire the lease")
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if ctx.Err() != nil {
			return false
		}
		if e.tryAcquireOrRenew(ctx) {
			log.Info("acquired the lease")
			return true
		}
		next := wait.Jitter(e.cfg.RetryPeriod, jitterFactor)
		if timer == nil {
			timer = e.cfg.Clock.NewTimer(next)
		} else {
			timer.Reset(next)
		}
		select {
		case <-ctx.Done():
			return false
		case <-timer.C():
		}
	}
}

// renew renews the Lease every RetryPeriod until ctx ends (nil) or
// RenewDeadline passes without a successful renewal (ErrLostLease). A
// failed attempt is retried every RetryPeriod; an attempt still running at
// the deadline is cancelled.
func (e *Elector) renew(ctx context.Context) error {
	log := klog.FromContext(ctx)
	renewed := e.cfg.Clock.Now() // acquiring the Lease counts as renewing it
	timer := e.cfg.Clock.NewTimer(e.cfg.RetryPeriod)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
		}
		ok := e.renewBy(ctx, renewed.Add(e.cfg.RenewDeadline))
		if ctx.Err() != nil {
			return nil
		}
		if !ok {
			log.Info("lost the lease: could not renew it", "renewDeadline", e.cfg.RenewDeadline)
			return ErrLostLease
		}
		renewed = e.cfg.Clock.Now()
		log.V(4).Info("renewed the lease")
		timer.Reset(e.cfg.RetryPeriod)
	}
}

// renewBy tries to renew the Lease at once and then every RetryPeriod
// (measured from the start of each attempt) until an attempt succeeds
// (true), or deadline passes or ctx ends (false). An attempt still running
// at the deadline is cancelled.
func (e *Elector) renewBy(ctx context.Context, deadline time.Time) bool {
	ctx, cancel := e.withTimeout(ctx, deadline.Sub(e.cfg.Clock.Now()))
	defer cancel()
	retry := e.cfg.Clock.NewTimer(e.cfg.RetryPeriod)
	defer retry.Stop()
	for {
		if e.tryAcquireOrRenew(ctx) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-retry.C():
		}
		// Both may be ready at once; the deadline wins.
		if ctx.Err() != nil {
			return false
		}
		retry.Reset(e.cfg.RetryPeriod)
	}
}

// withTimeout is context.WithTimeout measured on the Elector's clock: the
// context is cancelled, with cause context.DeadlineExceeded, once d has
// passed.
func (e *Elector) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if d <= 0 {
		cancel(context.DeadlineExceeded)
		return ctx, func() { cancel(context.Canceled) }
	}
	timer := e.cfg.Clock.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		timer.Stop()
		cancel(context.Canceled)
	}
}

// tryAcquireOrRenew makes one attempt to acquire the Lease, or renew it if
// this candidate holds it, and reports whether it succeeded.
func (e *Elector) tryAcquireOrRenew(ctx context.Context) bool {
	log := klog.FromContext(ctx)
	now := e.cfg.Clock.Now()
	want := record{holder: e.cfg.Identity, durationSeconds: e.leaseSeconds, acquire: now, renew: now}

	// The holder first updates the Lease as it last wrote it, without
	// reading it; the resourceVersion makes this fail if anyone else wrote
	// it since.
	if e.lease != nil {
		if obs, valid := e.observedRecord(now); obs.holder == e.cfg.Identity && valid {
			want.acquire, want.transitions = obs.acquire, obs.transitions
			err := e.update(ctx, want)
			if err == nil {
				e.setObserved(want)
				return true
			}
			log.V(2).Info("could not renew the lease as last written, reading it again", "err", err)
		}
	}

	lease, err := e.cfg.Leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: e.cfg.Name}}
		want.applyTo(&lease.Spec)
		created, err := e.cfg.Leases.Create(ctx, lease, metav1.CreateOptions{})
		if err != nil {
			log.V(2).Info("could not create the lease", "err", err)
			return false
		}
		e.lease = created
		e.setObserved(want)
		return true
	}
	if err != nil {
		log.V(2).Info("could not read the lease", "err", err)
		return false
	}
	e.lease = lease
	e.observe(lease)

	obs, valid := e.observedRecord(now)
	if obs.holder != "" && obs.holder != e.cfg.Identity && valid {
		log.V(4).Info("the lease is held by another candidate", "holder", obs.holder)
		return false
	}
	if obs.holder == e.cfg.Identity {
		want.acquire, want.transitions = obs.acquire, obs.transitions
	} else {
		want.transitions = obs.transitions + 1
	}
	if err := e.update(ctx, want); err != nil {
		log.V(2).Info("could not update the lease", "err", err)
		return false
	}
	e.setObserved(want)
	return true
}

// release gives up the Lease if this candidate holds it, as client-go's
// ReleaseOnCancel does: it clears holderIdentity and sets
// leaseDurationSeconds to 1 so that another candidate takes over at once.
// It uses its own context, as ctx may have ended.
func (e *Elector) release(ctx context.Context) {
	log := klog.FromContext(ctx)
	if e.observedHolder() != e.cfg.Identity {
		return
	}
	ctx, cancel := e.withTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
	defer cancel()
	lease, err := e.cfg.Leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	if err != nil {
		log.Error(err, "could not release the lease: reading it failed")
		return
	}
	e.lease = lease
	e.observe(lease)
	got := recordOf(&lease.Spec)
	if got.holder != e.cfg.Identity {
		log.V(2).Info("not releasing the lease: another candidate holds it", "holder", got.holder)
		return
	}
	now := e.cfg.Clock.Now()
	released := record{durationSeconds: 1, acquire: now, renew: now, transitions: got.transitions}
	if err := e.update(ctx, released); err != nil {
		log.Error(err, "could not release the lease")
		return
	}
	e.setObserved(released)
	log.Info("released the lease")
}

// update writes r to the Lease as last read or written.
func (e *Elector) update(ctx context.Context, r record) error {
	lease := e.lease.DeepCopy()
	r.applyTo(&lease.Spec)
	updated, err := e.cfg.Leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	e.lease = updated
	return nil
}

// observe notes the record of a Lease just read, restarting the expiry
// clock if it differs from the one read before.
func (e *Elector) observe(lease *coordinationv1.Lease) {
	r := recordOf(&lease.Spec)
	if e.lastRead != nil && e.lastRead.equal(r) {
		return
	}
	e.lastRead = &r
	e.setObserved(r)
}

// setObserved notes r as the Lease's current record, changed now.
func (e *Elector) setObserved(r record) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.observed = r
	e.observedTime = e.cfg.Clock.Now()
}

// observedRecord returns the observed record and whether it is still
// valid at now, that is, it changed less than LeaseDuration before now.
func (e *Elector) observedRecord(now time.Time) (record, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.observed, now.Before(e.observedTime.Add(e.cfg.LeaseDuration))
}

func (e *Elector) setLeading(leading bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leading = leading
}

// observedHolder returns the holder in the observed record.
func (e *Elector) observedHolder() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.observed.holder
}

// recordOf reads the election record from a Lease's spec; missing fields
// read as zero.
func recordOf(spec *coordinationv1.LeaseSpec) record {
	var r record
	if spec.HolderIdentity != nil {
		r.holder = *spec.HolderIdentity
	}
	if spec.LeaseDurationSeconds != nil {
		r.durationSeconds = *spec.LeaseDurationSeconds
	}
	if spec.AcquireTime != nil {
		r.acquire = spec.AcquireTime.Time
	}
	if spec.RenewTime != nil {
		r.renew = spec.RenewTime.Time
	}
	if spec.LeaseTransitions != nil {
		r.transitions = *spec.LeaseTransitions
	}
	return r
}

// applyTo writes r to a Lease's spec, leaving the fields the election does
// not use alone.
func (r record) applyTo(spec *coordinationv1.LeaseSpec) {
	spec.HolderIdentity = ptr.To(r.holder)
	spec.LeaseDurationSeconds = ptr.To(r.durationSeconds)
	spec.AcquireTime = &metav1.MicroTime{Time: r.acquire}
	spec.RenewTime = &metav1.MicroTime{Time: r.renew}
	spec.LeaseTransitions = ptr.To(r.transitions)
}

// equal reports whether r and o are the same record.
func (r record) equal(o record) bool {
	return r.holder == o.holder && r.durationSeconds == o.durationSeconds &&
		r.acquire.Equal(o.acquire) && r.renew.Equal(o.renew) && r.transitions == o.transitions
}
