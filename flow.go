package chronicle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// Waiting says why an instance has not started: its start waits for a
// slot of its concurrency key.
type Waiting struct {
	// Key and Limit are the concurrency the start asked for.
	Key   string
	Limit int
	// Holders are the instances that hold the key's slots.
	Holders []string
	// Position is the instance's place among the key's waiters (1 is
	// next); 0 when it has not joined them yet: its first round has not
	// run, and its start did not wait from its enqueue (see
	// docs/operations.md, "Flow control").
	Position int
	// Since is when it began to wait (zero with Position 0).
	Since time.Time
}

// SlotSet is the state of a concurrency key: its limit, the instances
// holding its slots and those waiting for one, in order.
type SlotSet = provider.SlotRecord

// SlotFilter selects the concurrency keys ListConcurrency returns.
type SlotFilter struct {
	// OnlyWaiting leaves out keys nobody waits for.
	OnlyWaiting bool
	// AfterKey and Limit page the keys (Limit zero means 100).
	AfterKey string
	Limit    int
}

// ListConcurrency returns the concurrency keys of instances, in key order,
// each with its holders and waiters: the waiting work of flow control.
func (e *Engine) ListConcurrency(ctx context.Context, f SlotFilter) ([]SlotSet, error) {
	fs, err := e.flowStore()
	if err != nil {
		return nil, err
	}
	return fs.ListSlots(ctx, &provider.ListSlotsParams{AfterKey: f.AfterKey, Limit: f.Limit, OnlyWaiting: f.OnlyWaiting})
}

// Concurrency returns the state of one concurrency key of instances, or
// ErrConcurrencyKeyNotFound when no instance ever asked for it.
func (e *Engine) Concurrency(ctx context.Context, key string) (*SlotSet, error) {
	fs, err := e.flowStore()
	if err != nil {
		return nil, err
	}
	set, err := fs.GetSlots(ctx, key)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrConcurrencyKeyNotFound, key)
	}
	return set, err
}

// RunningActivities returns how many activity tasks with a concurrency key
// (ActivityOptions.Concurrency) hold a live claim now.
func (e *Engine) RunningActivities(ctx context.Context, key string) (int, error) {
	fs, err := e.flowStore()
	if err != nil {
		return 0, err
	}
	return fs.CountClaims(ctx, key, e.now())
}

// fillWaiting sets inst.Waiting when its queued start asks for a
// concurrency slot.
func (e *Engine) fillWaiting(ctx context.Context, inst *Instance, start *provider.Message) error {
	a, err := history.DecodeAttributes(start.Kind, start.Payload)
	if err != nil {
		return nil
	}
	s, ok := a.(*history.ExecutionStarted)
	if !ok || s.Concurrency == nil {
		return nil
	}
	w := &Waiting{Key: s.Concurrency.Key, Limit: s.Concurrency.Limit}
	inst.Waiting = w
	fs, ok := e.store.(provider.FlowStore)
	if !ok {
		return nil
	}
	set, err := fs.GetSlots(ctx, w.Key)
	if errors.Is(err, provider.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, h := range set.Holders {
		w.Holders = append(w.Holders, h.ID)
	}
	if i := slices.IndexFunc(set.Waiters, func(h provider.SlotHolder) bool { return h.ID == inst.ID }); i >= 0 {
		w.Position, w.Since = i+1, set.Waiters[i].Since
	}
	return nil
}

func (e *Engine) flowStore() (provider.FlowStore, error) {
	return capability[provider.FlowStore](e.store, "provider.FlowStore")
}
