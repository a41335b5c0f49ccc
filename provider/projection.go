package provider

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/query"
)

// Status is an instance's lifecycle state.
type Status string

// Instance statuses.
const (
	StatusRunning    Status = "running"
	StatusSuspended  Status = "suspended"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
	StatusTerminated Status = "terminated"
)

// Terminal reports whether s is an end state.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusTerminated
}

// Projections are what a round writes besides history: every record is a
// fold of the instance's history up to Seq, so all of them can be rebuilt.
// A provider writes each record unless the stored one was folded at or
// beyond Seq, which makes the write idempotent in peek-lock mode.
type Projections struct {
	InstanceID string
	// Seq is the last event folded into these records.
	Seq int64
	// Snapshot is the encoded runtime snapshot
	// ([github.com/chronicleflow/chronicle/round.Snapshot]): opaque bytes
	// to the store.
	Snapshot []byte
	// Instance is the instance record, nil when unchanged.
	Instance *InstanceRecord
	// Tasks are the task records changed in this round.
	Tasks []TaskRecord
	// TaskEvents are task events to add (unique by instance, Seq and task:
	// the end of an execution closes several tasks at one Seq).
	TaskEvents []TaskEventRecord
	// Custom are the changed records of user projections.
	Custom []CustomRecord
	// Lease, in peek-lock rounds, fences the writes: they begin only while
	// the lease's token is current (ErrLeaseLost otherwise), so that a
	// zombie round whose instance was purged and started again meanwhile
	// does not write the purged run's projections over the new run's.
	Lease *Lease
}

// InstanceRecord is the queryable summary of an instance.
type InstanceRecord struct {
	InstanceID    string
	ExecutionID   string
	Name          string
	Version       string
	Status        Status
	BusinessKey   string
	BusinessParts map[string]string
	CustomStatus  []byte
	ParentID      string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	CompletedAt   time.Time
	// Output is the encoded result of a completed instance.
	Output []byte
	// Failure is the error of a failed instance.
	Failure *history.Failure
	// LastError is the most recent error recorded in history (a failed
	// activity, say).
	LastError string
	// LastSeq is the last event folded into the record.
	LastSeq int64
	// Attributes are the search attributes of the current execution, by
	// declared name.
	Attributes map[string]query.Value
	// CustomStatusText is the custom status when it was set as a string
	// (empty otherwise): the form queries compare.
	CustomStatusText string
	// Incident is not folded from history: it is "reason: error" of the
	// newest unresolved dead letter of the instance, kept by the provider.
	Incident string
}

// ErrTaskIDTaken: a round created a human task whose id a task of another
// instance already has. Human task ids are unique per store: a client acts
// on a task by its id alone.
var ErrTaskIDTaken = errors.New("provider: human task id already used by another instance")

// TaskIDTakenError is the error of SaveProjections when a task record of
// InstanceID names a task id that Owner's task already has; nothing of the
// write is saved, so the round fails and its messages are retried, then
// dead-lettered with this error.
type TaskIDTakenError struct {
	TaskID     string
	InstanceID string
	Owner      string
}

// Error implements error.
func (e *TaskIDTakenError) Error() string {
	return fmt.Sprintf("provider: human task id %q of instance %s is already used by instance %s; task ids must be unique per store", e.TaskID, e.InstanceID, e.Owner)
}

// Unwrap returns [ErrTaskIDTaken].
func (e *TaskIDTakenError) Unwrap() error { return ErrTaskIDTaken }

// TaskStatus is a human task's state.
type TaskStatus string

// Task statuses.
const (
	TaskOpen      TaskStatus = "open"
	TaskCompleted TaskStatus = "completed"
	TaskCancelled TaskStatus = "cancelled"
)

// TaskRecord is the queryable state of a human task.
type TaskRecord struct {
	TaskID      string
	InstanceID  string
	ExecutionID string
	Name        string
	Status      TaskStatus
	Assignee    string
	Roles       []string
	Payload     []byte
	Result      []byte
	Due         time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time
	// Seq is the last event folded into the record.
	Seq int64
}

// TaskEventRecord is one entry of a task's audit trail.
type TaskEventRecord struct {
	InstanceID string
	TaskID     string
	// Seq is the history event the record was folded from.
	Seq      int64
	Kind     history.Kind
	Actor    string
	At       time.Time
	Assignee string
	Detail   string
}

// CustomRecord is the state of a user-registered projection for one
// instance.
type CustomRecord struct {
	Name       string
	Version    int
	InstanceID string
	Seq        int64
	Data       []byte
}

// Replaces reports whether a store writes r over old, the stored record of
// the same projection and instance: r of the same version folded beyond
// old's Seq, or r of a newer version folded at least as far. A record
// never goes back in Seq, and an older version never replaces a newer
// one, so during a rolling deploy the record moves on only with the newest
// version; going back to an older version takes a rebuild
// (ResetProjections, then SaveProjections).
func (r *CustomRecord) Replaces(old *CustomRecord) bool {
	switch {
	case r.Version == old.Version:
		return r.Seq > old.Seq
	case r.Version > old.Version:
		return r.Seq >= old.Seq
	}
	return false
}

// Equal reports whether two records hold the same folded state. Incident,
// which is not folded from history, is ignored; nil and empty collections
// are equal.
func (r *InstanceRecord) Equal(o *InstanceRecord) bool {
	if r == nil || o == nil {
		return r == o
	}
	return len(r.Diff(o)) == 0
}

// Diff names the fields in which two records' folded state differs (see
// Equal).
func (r *InstanceRecord) Diff(o *InstanceRecord) []string {
	var d []string
	check := func(field string, same bool) {
		if !same {
			d = append(d, field)
		}
	}
	check("InstanceID", r.InstanceID == o.InstanceID)
	check("ExecutionID", r.ExecutionID == o.ExecutionID)
	check("Name", r.Name == o.Name)
	check("Version", r.Version == o.Version)
	check("Status", r.Status == o.Status)
	check("BusinessKey", r.BusinessKey == o.BusinessKey)
	check("BusinessParts", maps.Equal(r.BusinessParts, o.BusinessParts))
	check("CustomStatus", bytes.Equal(r.CustomStatus, o.CustomStatus))
	check("ParentID", r.ParentID == o.ParentID)
	check("CreatedAt", r.CreatedAt.Equal(o.CreatedAt))
	check("UpdatedAt", r.UpdatedAt.Equal(o.UpdatedAt))
	check("CompletedAt", r.CompletedAt.Equal(o.CompletedAt))
	check("Output", bytes.Equal(r.Output, o.Output))
	check("Failure", failureEqual(r.Failure, o.Failure))
	check("LastError", r.LastError == o.LastError)
	check("LastSeq", r.LastSeq == o.LastSeq)
	check("Attributes", attributesEqual(r.Attributes, o.Attributes))
	check("CustomStatusText", r.CustomStatusText == o.CustomStatusText)
	return d
}

// attributesEqual compares two sets of attribute values; an unset (zero)
// value counts as absent.
func attributesEqual(a, b map[string]query.Value) bool {
	set := func(m map[string]query.Value) int {
		n := 0
		for _, v := range m {
			if v.Type != query.Invalid {
				n++
			}
		}
		return n
	}
	if set(a) != set(b) {
		return false
	}
	for k, v := range a {
		if v.Type == query.Invalid {
			continue
		}
		w, ok := b[k]
		if !ok || v.Type != w.Type || v.Str != w.Str || v.Int != w.Int || v.Bool != w.Bool || !v.Time.Equal(w.Time) ||
			!slices.Equal(v.List, w.List) || !(v.Float == w.Float || v.Float != v.Float && w.Float != w.Float) {
			return false
		}
	}
	return true
}

func failureEqual(a, b *history.Failure) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Message == b.Message && a.Type == b.Type && a.NonRetryable == b.NonRetryable && bytes.Equal(a.Details, b.Details)
}
