package mongo

import (
	"context"

	"github.com/chronicleflow/chronicle/history"
)

// SetAfterFirstRead installs the hook CancelActivities runs after its
// first read.
func SetAfterFirstRead(s *Store, hook func()) { s.afterFirstRead = hook }

// SetBeforeClaimWrite installs the hook ClaimActivity runs before it
// writes a claim of a task it read as claimable.
func SetBeforeClaimWrite(s *Store, hook func(taskID string)) { s.beforeClaimWrite = hook }

// SetBeforeSettleWrite installs the hook CompleteActivity, RetryActivity
// and DeadLetterActivity run after they checked the claim and before
// their first write.
func SetBeforeSettleWrite(s *Store, hook func(taskID string)) { s.beforeSettleWrite = hook }

// SetAfterSettleStep installs the hook the settlements of an activity
// claim run after their first write; its error ends the call there.
func SetAfterSettleStep(s *Store, hook func(taskID string) error) { s.afterSettleStep = hook }

// ClaimKey claims an idempotency key for the event at seq of an append
// whose first Seq is first, as AppendHistory does before it writes the
// events: what a round that crashed between the two writes leaves.
func ClaimKey(ctx context.Context, s *Store, instanceID string, k history.Key, seq, first int64) error {
	return s.claimKey(ctx, instanceID, k, seq, first)
}

// InsertClaim writes claim step k of a task, valid until until (Unix
// nanoseconds), as a claimer that died before it wrote the claim into the
// task's hint leaves it.
func InsertClaim(ctx context.Context, s *Store, taskID string, k, until int64) error {
	var d taskDoc
	if err := s.c.tasks.FindOne(ctx, filter("_id", taskID)).Decode(&d); err != nil {
		return err
	}
	_, err := s.c.claims.InsertOne(ctx, &stepDoc{ID: stepID(taskID, k), Task: taskID, K: k, Kind: stepClaim, Token: newToken(), Owner: "dead", Until: until, Activity: d.Task})
	return err
}
