package round

import (
	"fmt"
	"strconv"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// Failure types a parent sees in the SubWorkflowFailed of a child that
// never ran for it.
const (
	// FailureSubWorkflowAlreadyStarted: the child's instance id was taken by
	// a running instance, so the child was not started.
	FailureSubWorkflowAlreadyStarted = "SubWorkflowAlreadyStarted"
	// FailureDeadLetterDiscarded: an operator discarded the dead letter of
	// the work item (an activity task, a child's start).
	FailureDeadLetterDiscarded = provider.FailureDeadLetterDiscarded
)

// parentKey names one execution of a parent instance; a purged and reused
// instance id gets new execution ids, so keys never repeat.
func parentKey(instanceID, executionID string) string { return instanceID + "\x00" + executionID }

// DefaultChildID derives the instance id of a child started without an
// explicit one: the parent's instance id, its execution id and the Seq of
// the SubWorkflowScheduled event, joined by "/". The execution id keeps the
// ids of a purged and reused parent id apart. An id over
// [history.MaxIDLength] is replaced by a deterministic UUID of the same
// parts.
func DefaultChildID(parentID, parentExecutionID string, seq int64) string {
	id := parentID + "/" + parentExecutionID + "/" + strconv.FormatInt(seq, 10)
	if len(id) > history.MaxIDLength {
		id = history.DeterministicID(parentKey(parentID, parentExecutionID), seq, "child")
	}
	return id
}

// ChildExecutionID derives the execution id of the child a parent schedules
// at seq. It depends on the parent's identity, not on the child's instance
// id, so two parents sharing a child id never share its execution id.
func ChildExecutionID(parentID, parentExecutionID string, seq int64) string {
	return history.DeterministicID(parentKey(parentID, parentExecutionID), seq, "child-execution")
}

// ChildStartMessageID derives the id of the start message of the child a
// parent schedules at seq.
func ChildStartMessageID(parentID, parentExecutionID string, seq int64) string {
	return history.DeterministicID(parentKey(parentID, parentExecutionID), seq, "child-start")
}

// RefusedChildStart returns the message that tells a parent its child's
// start m was refused because the child's instance id is taken by a running
// instance (the snapshot's), and true; false when m is not a child's start.
// The round acks the start and enqueues this message instead of
// dead-lettering the start, so the parent's sub-workflow fails at once
// with [FailureSubWorkflowAlreadyStarted], as a Temporal child's does.
func (s *Snapshot) RefusedChildStart(m *provider.Message) (provider.Message, bool, error) {
	n, ok, err := provider.ChildNeverRan(m, history.Failure{
		Message: fmt.Sprintf("sub-workflow instance %s is already running (execution %s); the child was not started",
			m.InstanceID, s.ExecutionID),
		Type:         FailureSubWorkflowAlreadyStarted,
		NonRetryable: true,
	})
	if err != nil {
		return provider.Message{}, false, fmt.Errorf("refusal of child %s: %w", m.InstanceID, err)
	}
	return n, ok, nil
}
