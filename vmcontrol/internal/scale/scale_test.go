package scale

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/vmcontrol/internal/expectations"
)

func TestCreateSlowStartStopsAtTheFirstFailingBatch(t *testing.T) {
	exp := expectations.New(time.Minute)
	var calls atomic.Int32
	// The fourth create fails: batches 1, 2 and then 4 (creates 3 to 6)
	// are tried, the rest of the 10 are not.
	tried, failed := Create(exp, "k", 10, func(i int) error {
		calls.Add(1)
		if i == 3 {
			return errors.New("refused")
		}
		return nil
	})
	if tried != 7 || calls.Load() != 7 || len(failed) != 1 {
		t.Fatalf("tried %d, %d calls, failures %v; want 7, 7 and one", tried, calls.Load(), failed)
	}
	// Six creations are expected (the failed one was taken back).
	for range 5 {
		exp.CreationObserved("k")
	}
	if exp.Satisfied("k") {
		t.Error("expectations satisfied after 5 of 6 successful creations were observed")
	}
	exp.CreationObserved("k")
	if !exp.Satisfied("k") {
		t.Error("expectations not satisfied after all 6 successful creations were observed")
	}
	if tried, failed := Create(exp, "k", 3, func(int) error { return nil }); tried != 3 || failed != nil {
		t.Errorf("Create of 3 = %d, %v", tried, failed)
	}
}

func TestRetry(t *testing.T) {
	gr := schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachines"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewInvalid(schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachine"}, "x", nil), false},
		{apierrors.NewBadRequest("no"), false},
		{apierrors.NewForbidden(gr, "x", errors.New("exceeded quota")), true},
		{errors.New("connection refused"), true},
	} {
		if got := Retry(tc.err); got != tc.want {
			t.Errorf("Retry(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestDeleteCountsGoneAsDeleted(t *testing.T) {
	exp := expectations.New(time.Minute)
	gr := schema.GroupResource{Resource: "virtualmachines"}
	uids := []types.UID{"a", "b", "c", "d"}
	errs := []error{nil, apierrors.NewNotFound(gr, "b"), apierrors.NewConflict(gr, "c", errors.New("uid")), errors.New("boom")}
	var deleted, failed []int
	err := Delete(exp, "k", uids, func(i int) error { return errs[i] },
		func(i int) { deleted = append(deleted, i) },
		func(i int, err error) error { failed = append(failed, i); return err })
	if err == nil || len(deleted) != 1 || deleted[0] != 0 || len(failed) != 1 || failed[0] != 3 {
		t.Fatalf("err %v, deleted %v, failed %v; want the error of d, a deleted, d failed", err, deleted, failed)
	}
	// Only a's deletion is still expected.
	if exp.Satisfied("k") {
		t.Error("expectations satisfied before a's deletion was observed")
	}
	exp.DeletionObserved("k", "a")
	if !exp.Satisfied("k") {
		t.Error("expectations not satisfied after a's deletion was observed")
	}
}
