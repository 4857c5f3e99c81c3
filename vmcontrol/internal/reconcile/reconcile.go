// Package reconcile is the boring loop every vmkit controller runs: a typed,
// rate-limited workqueue of namespace/name keys, N workers, and a sync
// function per key. Errors requeue the key with back-off; success forgets
// it; a sync may also ask to look again after a delay.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Queue is the workqueue type every controller uses.
type Queue = workqueue.TypedRateLimitingInterface[string]

// NewQueue returns a rate-limited queue named for metrics.
func NewQueue(name string) Queue {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
	)
}

// Loop runs Sync for the keys of Queue on Workers goroutines.
type Loop struct {
	// Name appears in logs.
	Name string
	// Queue holds the keys to sync.
	Queue Queue
	// Workers is the number of concurrent syncs (1 if zero).
	Workers int
	// Sync reconciles one key. Returning an error requeues the key with
	// back-off; returning an error made by After requeues it after a delay
	// without counting as a failure.
	Sync func(ctx context.Context, key string) error
	// Observe, if set, is called after each sync with its duration and error.
	Observe func(key string, d time.Duration, err error)
}

// Start waits for the informers' caches, then runs the loop until ctx is
// done: what a controller's Start(ctx) error needs.
func (l *Loop) Start(ctx context.Context, synced ...cache.InformerSynced) error {
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("%s controller: caches did not sync", l.Name)
	}
	klog.FromContext(ctx).Info("starting controller", "controller", l.Name, "workers", max(l.Workers, 1))
	l.Run(ctx)
	return nil
}

// Enqueue adds the key of an informer object (or tombstone) to the queue.
func (l *Loop) Enqueue(obj any) {
	if key, ok := KeyOf(obj); ok {
		l.Queue.Add(key)
	}
}

// Handler enqueues the key of every object the informer adds, updates or
// deletes: the handler of a controller's own kind.
func (l *Loop) Handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    l.Enqueue,
		UpdateFunc: func(_, obj any) { l.Enqueue(obj) },
		DeleteFunc: l.Enqueue,
	}
}

// Run processes keys until ctx is done, then shuts the queue down and waits
// for the workers to finish their current key.
func (l *Loop) Run(ctx context.Context) {
	workers := max(l.Workers, 1)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	l.Queue.ShutDown()
	wg.Wait()
}

func (l *Loop) next(ctx context.Context) bool {
	key, quit := l.Queue.Get()
	if quit {
		return false
	}
	defer l.Queue.Done(key)
	began := time.Now()
	err := l.Sync(ctx, key)
	if l.Observe != nil {
		l.Observe(key, time.Since(began), err)
	}
	var later *requeueAfter
	switch {
	case err == nil:
		l.Queue.Forget(key)
	case errors.As(err, &later):
		l.Queue.Forget(key)
		l.Queue.AddAfter(key, later.d)
	default:
		klog.FromContext(ctx).V(2).Info("sync failed, requeueing", "controller", l.Name, "key", key, "err", err)
		l.Queue.AddRateLimited(key)
	}
	return true
}

type requeueAfter struct{ d time.Duration }

func (r *requeueAfter) Error() string { return fmt.Sprintf("requeue after %v", r.d) }

// After returns an error that makes the Loop look at the key again after d,
// without back-off and without counting as a failure.
func After(d time.Duration) error { return &requeueAfter{d: d} }

// IsRequeue reports whether err was made by After.
func IsRequeue(err error) bool {
	var later *requeueAfter
	return errors.As(err, &later)
}

// KeyOf returns the namespace/name key of an informer object, including
// objects wrapped in a DeletedFinalStateUnknown tombstone.
func KeyOf(obj any) (string, bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("no key for %T: %w", obj, err))
		return "", false
	}
	return key, true
}

// Unwrap returns the object inside a DeletedFinalStateUnknown tombstone, or obj.
func Unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
