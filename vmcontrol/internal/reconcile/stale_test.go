package reconcile

import "testing"

func TestSuperseded(t *testing.T) {
	s := NewSuperseded()
	if s.Stale("ns/a", "1") {
		t.Fatal("nothing written yet")
	}
	s.Wrote("ns/a", "1")
	s.Wrote("ns/a", "2")
	if !s.Stale("ns/a", "1") || !s.Stale("ns/a", "2") {
		t.Fatal("versions written over must be stale")
	}
	if s.Stale("ns/b", "1") {
		t.Fatal("keys are independent")
	}
	if s.Stale("ns/a", "3") {
		t.Fatal("a newer version is fresh")
	}
	if s.Stale("ns/a", "1") {
		t.Fatal("seeing a fresh version clears the record")
	}
	s.Wrote("ns/a", "4")
	s.Forget("ns/a")
	if s.Stale("ns/a", "4") {
		t.Fatal("Forget drops the key")
	}
}
