package provider

import (
	"context"
	"errors"
	"time"
)

// ErrHeld: the instance is under a legal hold; [PurgeStore.PurgeInstance]
// refuses it, deleting nothing.
var ErrHeld = errors.New("provider: instance is under a legal hold")

// Hold is a legal hold on an instance, as the store keeps it.
type Hold struct {
	InstanceID string
	// HoldID names the hold; the HoldPlaced and HoldReleased events of
	// the instance's history carry it.
	HoldID string
	Reason string
	// Actor placed it ("user:<name>").
	Actor    string
	Ticket   string
	PlacedAt time.Time
}

// HoldStore keeps legal holds. A hold is a record of its own, next to the
// instance's (the instance's record is folded from history and rewritten
// by every round; a hold is not), and lives until it is released: a
// purge refuses a held instance with ErrHeld, deleting nothing, in the
// same atomic step that would otherwise delete it.
type HoldStore interface {
	// PlaceHold keeps h unless the instance already has a hold. It
	// returns ErrNotFound when the store has no record of the instance
	// (unknown, not started yet, or being purged), and the hold the
	// instance already has with placed false when it is held (writing
	// nothing). Placing a hold and a purge of the instance are atomic
	// with each other: either the purge refused the instance, or the
	// placement returns ErrNotFound.
	PlaceHold(ctx context.Context, h *Hold) (current *Hold, placed bool, err error)

	// ReleaseHold deletes the hold of an instance if its id is holdID,
	// and returns ErrNotFound when the instance has no such hold.
	ReleaseHold(ctx context.Context, instanceID, holdID string) error

	// GetHold returns the hold of an instance, or ErrNotFound.
	GetHold(ctx context.Context, instanceID string) (*Hold, error)

	// ListHolds returns the holds of instances whose id is after afterID,
	// in id order, at most limit (zero means no limit).
	ListHolds(ctx context.Context, afterID string, limit int) ([]Hold, error)
}

// InstanceHoldReader is implemented by a HoldStore that reads an
// instance's record and its legal hold in one call (one round trip on
// PostgreSQL instead of two); describing an instance uses it when the
// store has it.
type InstanceHoldReader interface {
	// GetInstanceHold returns the record of an instance as
	// Store.GetInstance does (ErrNotFound when it has none), and its
	// hold, nil when it has none, read together.
	GetInstanceHold(ctx context.Context, instanceID string) (*InstanceRecord, *Hold, error)
}
