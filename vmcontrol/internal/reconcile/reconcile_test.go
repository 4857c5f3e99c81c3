package reconcile

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

func TestLoopRetriesAndRequeues(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	l := &Loop{
		Name:    "test",
		Queue:   NewQueue("test"),
		Workers: 2,
		Sync: func(_ context.Context, key string) error {
			mu.Lock()
			defer mu.Unlock()
			calls[key]++
			switch {
			case key == "ns/flaky" && calls[key] < 3:
				return errors.New("transient")
			case key == "ns/later" && calls[key] == 1:
				return After(10 * time.Millisecond)
			}
			if calls["ns/flaky"] >= 3 && calls["ns/later"] >= 2 {
				select {
				case <-done:
				default:
					close(done)
				}
			}
			return nil
		},
	}
	l.Queue.Add("ns/flaky")
	l.Queue.Add("ns/later")
	stopped := make(chan struct{})
	go func() { l.Run(ctx); close(stopped) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("keys not retried: %v", calls)
	}
	cancel()
	<-stopped
	if !l.Queue.ShuttingDown() {
		t.Fatal("Run must shut the queue down")
	}
	if calls["ns/flaky"] != 3 || calls["ns/later"] != 2 {
		t.Fatalf("calls = %v, want flaky 3 (two failures) and later 2", calls)
	}
}

func TestKeyOfTombstone(t *testing.T) {
	key, ok := KeyOf(cache.DeletedFinalStateUnknown{Key: "ns/gone"})
	if !ok || key != "ns/gone" {
		t.Fatalf("KeyOf(tombstone) = %q, %v", key, ok)
	}
	if got := Unwrap(cache.DeletedFinalStateUnknown{Obj: "x"}); got != "x" {
		t.Fatalf("Unwrap = %v", got)
	}
}
