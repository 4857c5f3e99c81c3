package reconcile

import "sync"

// Superseded remembers the resource versions a controller has written over,
// per key, so a sync running on an informer cache that has not yet caught up
// with the controller's own write can be skipped: acting on such a stale
// object would only produce a conflicting write (409) or a duplicate one.
// The watch event of the controller's write enqueues the key again.
type Superseded struct {
	mu   sync.Mutex
	keys map[string][]string
}

// NewSuperseded returns an empty tracker.
func NewSuperseded() *Superseded { return &Superseded{keys: map[string][]string{}} }

// Wrote records that the object at key was written over while at resourceVersion rv.
func (s *Superseded) Wrote(key, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[key] = append(s.keys[key], rv)
}

// Stale reports whether the cached object at key (at resourceVersion rv) is
// one the controller already wrote over. A fresh object clears what was
// recorded for key.
func (s *Superseded) Stale(key, rv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, old := range s.keys[key] {
		if old == rv {
			return true
		}
	}
	delete(s.keys, key)
	return false
}

// Forget drops key (the object is gone).
func (s *Superseded) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.keys, key)
}
