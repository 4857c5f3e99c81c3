package expectations

import (
	"testing"
	"time"
)

func TestExpectations(t *testing.T) {
	now := time.Unix(1000, 0)
	e := New(time.Minute)
	e.now = func() time.Time { return now }

	if !e.Satisfied("ns/vm") {
		t.Fatal("a key never seen must be satisfied")
	}
	e.ExpectCreations("ns/vm", 2)
	if e.Satisfied("ns/vm") {
		t.Fatal("two pending creations must block")
	}
	e.CreationObserved("ns/vm")
	if e.Satisfied("ns/vm") {
		t.Fatal("one pending creation must still block")
	}
	e.CreationObserved("ns/vm")
	e.CreationObserved("ns/vm") // an extra observation must not go negative
	if !e.Satisfied("ns/vm") {
		t.Fatal("all creations observed: satisfied")
	}
	e.ExpectCreations("ns/vm", 1)
	if e.Satisfied("ns/vm") {
		t.Fatal("a negative count leaked into a new expectation")
	}
	e.CreationObserved("ns/vm")

	e.ExpectDeletions("ns/vm", "a", "b")
	e.DeletionObserved("ns/vm", "a")
	e.DeletionObserved("ns/vm", "zzz")
	if e.Satisfied("ns/vm") {
		t.Fatal("deletion of b is still pending")
	}
	e.DeletionObserved("ns/vm", "b")
	if !e.Satisfied("ns/vm") {
		t.Fatal("all deletions observed: satisfied")
	}

	e.ExpectCreations("ns/other", 1)
	now = now.Add(2 * time.Minute)
	if !e.Satisfied("ns/other") {
		t.Fatal("expectations older than the TTL must expire")
	}
	e.Forget("ns/other")
	if _, ok := e.items["ns/other"]; ok {
		t.Fatal("Forget must drop the key")
	}
}
