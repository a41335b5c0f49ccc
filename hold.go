package chronicle

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// LegalHold is a legal hold on an instance: while it is in place the
// instance is neither purged (by [Engine.Purge], a purge batch or a
// retention policy) nor erased. See docs/audit.md, "Legal hold and
// retention".
type LegalHold = provider.Hold

// HoldOptions say who places or releases a legal hold, and why.
type HoldOptions struct {
	// Reason says why; required.
	Reason string
	// Actor is the operator, recorded as "user:<Actor>"; required.
	Actor string
	// Ticket is an optional reference (a ticket or case number), held to
	// the limits of [ControlOptions.Ticket].
	Ticket string
}

// ErrHeld is matched by the error of a purge or an erasure refused because
// the instance is under a legal hold (see [HeldError]).
var ErrHeld = errors.New("chronicle: instance is under a legal hold")

// HeldError names the held instances a purge or an erasure left alone,
// with their holds.
type HeldError struct {
	Holds []LegalHold
}

// Error implements error.
func (e *HeldError) Error() string {
	if len(e.Holds) == 1 {
		h := e.Holds[0]
		return fmt.Sprintf("chronicle: instance %s is under a legal hold (placed by %s at %s: %s)", h.InstanceID, h.Actor, h.PlacedAt.Format("2006-01-02T15:04:05Z"), h.Reason)
	}
	ids := make([]string, len(e.Holds))
	for i, h := range e.Holds {
		ids[i] = h.InstanceID
	}
	return fmt.Sprintf("chronicle: %d instances are under a legal hold: %s", len(ids), strings.Join(ids, ", "))
}

// Is matches [ErrHeld].
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

func (e *Engine) holdStore() (provider.HoldStore, error) {
	return capability[provider.HoldStore](e.store, "provider.HoldStore")
}

// holdCorrelation is the correlation of a hold's HoldPlaced (placed) or
// HoldReleased event: the round records each once per execution.
func holdCorrelation(holdID string, placed bool) string {
	if placed {
		return "hold:" + holdID
	}
	return "release:" + holdID
}

func (e *Engine) checkHoldOptions(instanceID string, o HoldOptions) (string, error) {
	if err := e.validateID("instance id", instanceID); err != nil {
		return "", err
	}
	if strings.TrimSpace(o.Reason) == "" {
		return "", invalid("a legal hold needs a reason")
	}
	if err := checkControl(o.Reason, &ControlOptions{Ticket: o.Ticket}); err != nil {
		return "", err
	}
	if o.Actor == "" {
		return "", invalid("a legal hold needs an actor (the operator)")
	}
	return e.actor(o.Actor)
}

// Hold places a legal hold on an instance, running or ended, and returns
// it: the store keeps the hold first (from then on a purge refuses the
// instance), then the instance's next round records a HoldPlaced event
// with the actor, reason and ticket, also after its execution's end. An
// instance has at most one hold: holding a held instance changes nothing
// and returns the hold in place (recording its event again if a crash had
// lost it; a round records it once). Hold refuses an unknown instance, or
// one whose first round has not run, with ErrInstanceNotFound, a missing
// reason or actor with ErrInvalidArgument, and a store without
// [provider.HoldStore] with an *UnsupportedError.
func (e *Engine) Hold(ctx context.Context, instanceID string, opts HoldOptions) (*LegalHold, error) {
	actor, err := e.checkHoldOptions(instanceID, opts)
	if err != nil {
		return nil, err
	}
	s, err := e.holdStore()
	if err != nil {
		return nil, err
	}
	h := &LegalHold{InstanceID: instanceID, HoldID: e.opts.NewID(), Reason: opts.Reason, Actor: actor, Ticket: opts.Ticket, PlacedAt: e.now()}
	cur, _, err := s.PlaceHold(ctx, h)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s (a hold needs an instance whose first round has run)", ErrInstanceNotFound, instanceID)
	}
	if err != nil {
		return nil, fmt.Errorf("hold %s: %w", instanceID, err)
	}
	if err := e.recordHold(ctx, cur, true, &history.HoldPlaced{HoldID: cur.HoldID, Reason: cur.Reason, Ticket: cur.Ticket}, cur.Actor); err != nil {
		return nil, err
	}
	return cur, nil
}

// ReleaseHold releases the legal hold of an instance: its next round
// records a HoldReleased event with the actor, reason and ticket, and the
// store then drops the hold (so that history never shows a release the
// store has not made, a crash in between leaves the instance held; a
// retry finishes). An instance without a hold is refused with ErrNotHeld.
func (e *Engine) ReleaseHold(ctx context.Context, instanceID string, opts HoldOptions) error {
	actor, err := e.checkHoldOptions(instanceID, opts)
	if err != nil {
		return err
	}
	s, err := e.holdStore()
	if err != nil {
		return err
	}
	cur, err := s.GetHold(ctx, instanceID)
	if errors.Is(err, provider.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotHeld, instanceID)
	}
	if err != nil {
		return fmt.Errorf("release the hold of %s: %w", instanceID, err)
	}
	if err := e.recordHold(ctx, cur, false, &history.HoldReleased{HoldID: cur.HoldID, Reason: opts.Reason, Ticket: opts.Ticket}, actor); err != nil {
		return err
	}
	err = s.ReleaseHold(ctx, instanceID, cur.HoldID)
	if errors.Is(err, provider.ErrNotFound) {
		return fmt.Errorf("%w: %s (released meanwhile)", ErrNotHeld, instanceID)
	}
	return err
}

// ErrNotHeld: ReleaseHold named an instance without a legal hold.
var ErrNotHeld = errors.New("chronicle: instance is not under a legal hold")

// recordHold queues the message whose event records a hold or its
// release; its id derives from the hold, so a retry queues it once.
func (e *Engine) recordHold(ctx context.Context, h *LegalHold, placed bool, attrs history.Attributes, actor string) error {
	corr := holdCorrelation(h.HoldID, placed)
	m, err := provider.NewMessage(corr+"@"+h.InstanceID, h.InstanceID, "", corr, attrs)
	if err != nil {
		return err
	}
	m.Actor = actor
	return e.enqueue(ctx, m)
}

// GetHold returns the legal hold of an instance, or nil when it has none.
func (e *Engine) GetHold(ctx context.Context, instanceID string) (*LegalHold, error) {
	if err := e.validateID("instance id", instanceID); err != nil {
		return nil, err
	}
	s, ok := e.store.(provider.HoldStore)
	if !ok {
		return nil, nil // nothing can be held
	}
	h, err := s.GetHold(ctx, instanceID)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, nil
	}
	return h, err
}

// ListHolds returns every legal hold in place, in instance id order.
func (e *Engine) ListHolds(ctx context.Context) ([]LegalHold, error) {
	s, err := e.holdStore()
	if err != nil {
		return nil, err
	}
	var out []LegalHold
	for after := ""; ; {
		page, err := s.ListHolds(ctx, after, 500)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 500 {
			return out, nil
		}
		after = page[len(page)-1].InstanceID
	}
}

// checkNotHeld returns a *HeldError when the instance is under a legal
// hold, and nil otherwise (also when the store keeps no holds). A purge
// calls it before it archives anything, and so does an erasure; the
// store's purge refuses a held instance again atomically.
func (e *Engine) checkNotHeld(ctx context.Context, instanceID string) error {
	h, err := e.GetHold(ctx, instanceID)
	if err != nil {
		return err
	}
	if h != nil {
		return &HeldError{Holds: []LegalHold{*h}}
	}
	return nil
}
