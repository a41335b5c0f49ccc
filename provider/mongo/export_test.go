package mongo

import (
	"context"

	"github.com/chronicleflow/chronicle/history"
)

// SetAfterFirstRead installs the hook CancelActivities runs after its
// first read.
func SetAfterFirstRead(s *Store, hook func()) { s.afterFirstRead = hook }

// ClaimKey claims an idempotency key for the event at seq of an append
// whose first Seq is first, as AppendHistory does before it writes the
// events: what a round that crashed between the two writes leaves.
func ClaimKey(ctx context.Context, s *Store, instanceID string, k history.Key, seq, first int64) error {
	return s.claimKey(ctx, instanceID, k, seq, first)
}

// InsertClaim writes the claim document of claim n of a task, valid
// until until (Unix nanoseconds), as a claimer that died before it wrote
// the claim into the task leaves it.
func InsertClaim(ctx context.Context, s *Store, taskID string, n, until int64) error {
	cid := id(taskID, pad(n))
	_, err := s.c.claims.InsertOne(ctx, &claimDoc{ID: cid, Task: taskID, Until: until})
	return err
}

// SetBeforeWrite installs the hook some multi-record steps run before a
// record write (see Store.beforeWrite); an error stops the step there.
func SetBeforeWrite(s *Store, hook func(what string) error) { s.beforeWrite = hook }
