package provider

import (
	"context"

	"github.com/chronicleflow/chronicle/history"
)

// CheckpointStore keeps signed checkpoints ([history.Checkpoint]): a chain
// of its own, numbered from 1 without gaps, each naming the previous one's
// hash. The engine signs them; the store only keeps them, with their
// leaves, and finds those that cover an instance. A store without it runs
// workflows as before; the engine answers checkpoint calls with a typed
// unsupported error.
type CheckpointStore interface {
	// AppendCheckpoint stores a sealed checkpoint with its leaves, in one
	// atomic step. Its Number must be the stored latest's + 1 (1 for the
	// first) and its PrevHash the latest's Hash: otherwise it returns
	// ErrConflict and stores nothing (another process appended first; the
	// caller reads the latest and tries again). A checkpoint already
	// stored under its Number with the same Hash is a no-op (a retry).
	AppendCheckpoint(ctx context.Context, c *history.Checkpoint) error

	// LatestCheckpoint returns the checkpoint with the highest Number,
	// with its leaves, or ErrNotFound when there is none.
	LatestCheckpoint(ctx context.Context) (*history.Checkpoint, error)

	// ListCheckpoints returns checkpoints with their leaves in Number
	// order, Number above AfterNumber, at most Limit (zero means 100);
	// with InstanceID set, only those having a leaf for that instance.
	ListCheckpoints(ctx context.Context, p *ListCheckpointsParams) ([]history.Checkpoint, error)
}

// ListCheckpointsParams are the params of ListCheckpoints.
type ListCheckpointsParams struct {
	AfterNumber int64
	InstanceID  string
	Limit       int
}
