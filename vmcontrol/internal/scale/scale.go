// Package scale is the core the replica set and pool controllers share:
// creating replicas in slow-start batches and deleting them with a UID
// precondition, both under expectations, and which failures are retried.
package scale

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/vmcontrol/internal/expectations"
)

// Create creates n replicas with create(i), i from 0, in slow-start batches
// (1, 2, 4, …), each batch at once after raising the creation expectations
// of key for it; a create that fails lowers them again, as no event will
// come for it. It stops after the first batch with a failure, so a refusal
// costs one call, not n, and the next sync starts again with a batch of
// one. It returns how many creates were tried and the failures of the
// last batch.
func Create(exp *expectations.Expectations, key string, n int, create func(i int) error) (tried int, failed []error) {
	for batch := 1; tried < n; batch *= 2 {
		size := min(batch, n-tried)
		exp.ExpectCreations(key, size)
		errs := make(chan error, size)
		for i := tried; i < tried+size; i++ {
			go func() {
				err := create(i)
				if err != nil {
					exp.CreationObserved(key)
				}
				errs <- err
			}()
		}
		for range size {
			if err := <-errs; err != nil {
				failed = append(failed, err)
			}
		}
		tried += size
		if len(failed) > 0 {
			return tried, failed
		}
	}
	return tried, nil
}

// Retry reports whether a failed create is worth trying again with
// back-off: not when the API server refuses the object itself (Invalid,
// BadRequest), which only a change of the template mends, and whose update
// brings the owner back. A quota or RBAC refusal (Forbidden) may pass
// later without any change, so it is retried.
func Retry(err error) bool {
	return !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err)
}

// Delete deletes the replicas with the given UIDs with del(i) (which
// passes the UID as a precondition), under the deletion expectations of
// key. One already gone (NotFound, or Conflict: its UID changed) counts as
// deleted without a report; deleted(i) is called for each one deleted and
// failed(i, err) for each failure, whose errors Delete joins.
func Delete(exp *expectations.Expectations, key string, uids []types.UID, del func(i int) error, deleted func(i int), failed func(i int, err error) error) error {
	exp.ExpectDeletions(key, uids...)
	var errs []error
	for i, uid := range uids {
		err := del(i)
		switch {
		case err == nil:
			deleted(i)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			exp.DeletionObserved(key, uid) // gone already
		default:
			exp.DeletionObserved(key, uid)
			errs = append(errs, failed(i, err))
		}
	}
	return errors.Join(errs...)
}
