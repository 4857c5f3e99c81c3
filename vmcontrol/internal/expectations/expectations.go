// Package expectations remembers the creates and deletes a controller has
// issued but its informers have not shown yet, so that a sync running on a
// stale cache does not create or delete the same object twice. It follows
// the Kubernetes ReplicaSet controller: raise expectations before issuing a
// request, lower them when the informer reports the object (or the request
// fails), and skip acting while they are unmet. Expectations expire after a
// TTL so a lost watch event cannot block a controller forever.
package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultTTL is how long unmet expectations block a key, as in Kubernetes.
const DefaultTTL = 5 * time.Minute

// Expectations tracks pending creations (by count) and deletions (by UID)
// per controller key. The zero value is not usable; call New.
type Expectations struct {
	mu    sync.Mutex
	ttl   time.Duration
	now   func() time.Time
	items map[string]*record
}

type record struct {
	adds      int
	deletions map[types.UID]struct{}
	setAt     time.Time
}

// New returns empty expectations that expire after ttl (DefaultTTL if zero).
func New(ttl time.Duration) *Expectations {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Expectations{ttl: ttl, now: time.Now, items: map[string]*record{}}
}

// ExpectCreations records that n creations are about to be issued for key.
func (e *Expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(key)
	r.adds += n
	r.setAt = e.now()
}

// CreationObserved lowers key's pending creations by one: the informer saw
// the object, or the create failed.
func (e *Expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.items[key]; ok && r.adds > 0 {
		r.adds--
	}
}

// ExpectDeletions records that the objects with these UIDs are about to be deleted.
func (e *Expectations) ExpectDeletions(key string, uids ...types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(key)
	for _, uid := range uids {
		r.deletions[uid] = struct{}{}
	}
	r.setAt = e.now()
}

// DeletionObserved removes uid from key's pending deletions: the informer
// saw it go, or the delete failed.
func (e *Expectations) DeletionObserved(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.items[key]; ok {
		delete(r.deletions, uid)
	}
}

// Satisfied reports whether key has nothing pending, or its expectations expired.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.items[key]
	if !ok {
		return true
	}
	if r.adds <= 0 && len(r.deletions) == 0 {
		return true
	}
	return e.now().Sub(r.setAt) > e.ttl
}

// Forget drops everything recorded for key (the object was deleted).
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.items, key)
}

func (e *Expectations) get(key string) *record {
	r, ok := e.items[key]
	if !ok {
		r = &record{deletions: map[types.UID]struct{}{}}
		e.items[key] = r
	}
	return r
}
