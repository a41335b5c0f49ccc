package providertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

func (b *bundle) holds(t *testing.T) provider.HoldStore {
	return capability[provider.HoldStore](t, b.store, "provider.HoldStore")
}

// testHolds covers legal holds: a held instance is not purged.
func testHolds(t *testing.T, factory Factory) {
	ended := func(t *testing.T, b *bundle, id string) {
		t.Helper()
		require.NoError(t, b.appendEvents(t.Context(), id, chain(id, nil, startEvent(t, execID), markerEvent(t, "m"))))
		p := projections(t, id, 2, "done", true) // status completed
		p.Tasks, p.TaskEvents = nil, nil         // task ids are unique per store
		b.save(t, p)
	}
	hold := func(id, holdID string) *provider.Hold {
		return &provider.Hold{InstanceID: id, HoldID: holdID, Reason: "litigation", Actor: "user:counsel", Ticket: "LIT-7", PlacedAt: at(time.Minute)}
	}

	t.Run("HeldInstanceIsNotPurgedUntilReleased", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ended(t, b, "i-1")
		hs := b.holds(t)
		cur, placed, err := hs.PlaceHold(t.Context(), hold("i-1", "h-1"))
		require.NoError(t, err)
		require.True(t, placed)
		require.Equal(t, hold("i-1", "h-1"), cur)
		cur, placed, err = hs.PlaceHold(t.Context(), hold("i-1", "h-2"))
		require.NoError(t, err)
		require.False(t, placed, "an instance has one hold")
		require.Equal(t, "h-1", cur.HoldID, "the hold in place is returned")
		got, err := hs.GetHold(t.Context(), "i-1")
		require.NoError(t, err)
		require.Equal(t, hold("i-1", "h-1"), got)

		_, err = b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: at(time.Hour)})
		require.ErrorIs(t, err, provider.ErrHeld)
		require.Len(t, b.load(t, "i-1", 1), 2, "nothing was deleted")
		_, err = b.store.GetInstance(t.Context(), "i-1")
		require.NoError(t, err)
		_, err = b.purges(t).GetTombstone(t.Context(), "i-1")
		require.ErrorIs(t, err, provider.ErrNotFound, "no tombstone was kept")

		require.ErrorIs(t, hs.ReleaseHold(t.Context(), "i-1", "h-2"), provider.ErrNotFound, "another hold's id releases nothing")
		require.NoError(t, hs.ReleaseHold(t.Context(), "i-1", "h-1"))
		require.ErrorIs(t, hs.ReleaseHold(t.Context(), "i-1", "h-1"), provider.ErrNotFound)
		_, err = hs.GetHold(t.Context(), "i-1")
		require.ErrorIs(t, err, provider.ErrNotFound)
		_, err = b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: at(time.Hour)})
		require.NoError(t, err, "released, it is purged")
		_, _, err = hs.PlaceHold(t.Context(), hold("i-1", "h-3"))
		require.ErrorIs(t, err, provider.ErrNotFound, "a purged instance cannot be held")
	})

	t.Run("QueuedHoldRecordKeepsPurgeOff", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		ended(t, b, "i-1")
		// A release queues its record before it drops the hold: a purge
		// between the two must not delete the record.
		m, err := provider.NewMessage("m-release", "i-1", "", "release:h-1", &history.HoldReleased{HoldID: "h-1", Reason: "settled"})
		require.NoError(t, err)
		b.enqueue(t, base, m)
		_, err = b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: "i-1", By: "user:ops", Now: at(time.Hour)})
		require.ErrorIs(t, err, provider.ErrInvalidState)
		require.Len(t, b.load(t, "i-1", 1), 2, "nothing was deleted")
		msgs, err := b.store.ListMessages(t.Context(), &provider.ListMessagesParams{InstanceID: "i-1"})
		require.NoError(t, err)
		require.Len(t, msgs, 1, "the record is still queued")
	})

	t.Run("HoldAndPurgeRaceOneWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		for i := range 20 {
			id := fmt.Sprintf("i-%02d", i)
			ended(t, b, id)
			var (
				wg        sync.WaitGroup
				placed    bool
				holdErr   error
				purgeErr  error
				tombstone *provider.Tombstone
			)
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, placed, holdErr = b.holds(t).PlaceHold(context.Background(), hold(id, "h-"+id))
			}()
			go func() {
				defer wg.Done()
				tombstone, purgeErr = b.purges(t).PurgeInstance(context.Background(), &provider.PurgeInstanceParams{InstanceID: id, By: "user:ops", Now: at(time.Hour)})
			}()
			wg.Wait()
			held := holdErr == nil && placed
			purged := purgeErr == nil && tombstone != nil
			require.False(t, held && purged, "%s: the hold was placed and the instance purged", id)
			if held {
				// The purge saw the hold, or met the placement holding
				// the instance (a transient refusal); again, it sees it.
				if !errors.Is(purgeErr, provider.ErrHeld) {
					require.ErrorIs(t, purgeErr, provider.ErrInvalidState, id)
				}
				_, err := b.purges(t).PurgeInstance(t.Context(), &provider.PurgeInstanceParams{InstanceID: id, By: "user:ops", Now: at(time.Hour)})
				require.ErrorIs(t, err, provider.ErrHeld, id)
				require.Len(t, b.load(t, id, 1), 2, "%s: a held instance keeps its history", id)
			}
			if purged {
				require.ErrorIs(t, holdErr, provider.ErrNotFound, id)
				_, err := b.holds(t).GetHold(t.Context(), id)
				require.ErrorIs(t, err, provider.ErrNotFound, "%s: a purged instance has no hold", id)
			}
		}
	})

	t.Run("InstanceAndHoldReadTogether", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		reader, ok := b.store.(provider.InstanceHoldReader)
		if !ok {
			t.Skip("the store reads an instance's record and hold apart (no provider.InstanceHoldReader)")
		}
		_, _, err := reader.GetInstanceHold(t.Context(), "nobody")
		require.ErrorIs(t, err, provider.ErrNotFound)
		ended(t, b, "i-1")
		ended(t, b, "i-2")
		want, err := b.store.GetInstance(t.Context(), "i-1")
		require.NoError(t, err)
		rec, h, err := reader.GetInstanceHold(t.Context(), "i-1")
		require.NoError(t, err)
		require.Equal(t, want, rec)
		require.Nil(t, h, "no hold yet")
		_, placed, err := b.holds(t).PlaceHold(t.Context(), hold("i-1", "h-1"))
		require.NoError(t, err)
		require.True(t, placed)
		rec, h, err = reader.GetInstanceHold(t.Context(), "i-1")
		require.NoError(t, err)
		require.Equal(t, want, rec)
		require.Equal(t, hold("i-1", "h-1"), h)
		_, h, err = reader.GetInstanceHold(t.Context(), "i-2")
		require.NoError(t, err)
		require.Nil(t, h, "another instance's hold is not this one's")
		require.NoError(t, b.holds(t).ReleaseHold(t.Context(), "i-1", "h-1"))
		_, h, err = reader.GetInstanceHold(t.Context(), "i-1")
		require.NoError(t, err)
		require.Nil(t, h, "released")
	})

	t.Run("HoldNeedsARecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		_, _, err := b.holds(t).PlaceHold(t.Context(), hold("nobody", "h-1"))
		require.ErrorIs(t, err, provider.ErrNotFound)
		_, err = b.holds(t).GetHold(t.Context(), "nobody")
		require.ErrorIs(t, err, provider.ErrNotFound)
	})

	t.Run("ListHoldsPagesInIDOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, factory)
		for _, id := range []string{"i-3", "i-1", "i-2", "i-4"} {
			ended(t, b, id)
		}
		for _, id := range []string{"i-3", "i-1", "i-2"} {
			_, _, err := b.holds(t).PlaceHold(t.Context(), hold(id, "h-"+id))
			require.NoError(t, err)
		}
		ids := func(after string, limit int) []string {
			t.Helper()
			hs, err := b.holds(t).ListHolds(t.Context(), after, limit)
			require.NoError(t, err)
			var out []string
			for _, h := range hs {
				out = append(out, h.InstanceID)
			}
			return out
		}
		require.Equal(t, []string{"i-1", "i-2", "i-3"}, ids("", 0))
		require.Equal(t, []string{"i-1", "i-2"}, ids("", 2))
		require.Equal(t, []string{"i-3"}, ids("i-2", 2))
	})
}

var _ provider.HoldStore = unsupported{}

func (unsupported) PlaceHold(context.Context, *provider.Hold) (*provider.Hold, bool, error) {
	return nil, false, provider.ErrUnsupported
}

func (unsupported) ReleaseHold(context.Context, string, string) error {
	return provider.ErrUnsupported
}

func (unsupported) GetHold(context.Context, string) (*provider.Hold, error) {
	return nil, provider.ErrUnsupported
}

func (unsupported) ListHolds(context.Context, string, int) ([]provider.Hold, error) {
	return nil, provider.ErrUnsupported
}

// PlaceHold injects faults around the wrapped call.
func (w faultyStore) PlaceHold(ctx context.Context, h *provider.Hold) (*provider.Hold, bool, error) {
	var (
		v  *provider.Hold
		ok bool
	)
	err := w.f.do(ctx, "PlaceHold", func() (err error) { v, ok, err = w.holds().PlaceHold(ctx, h); return err })
	return v, ok, err
}

// ReleaseHold injects faults around the wrapped call.
func (w faultyStore) ReleaseHold(ctx context.Context, instanceID, holdID string) error {
	return w.f.do(ctx, "ReleaseHold", func() error { return w.holds().ReleaseHold(ctx, instanceID, holdID) })
}

// GetHold injects faults around the wrapped call.
func (w faultyStore) GetHold(ctx context.Context, instanceID string) (*provider.Hold, error) {
	var v *provider.Hold
	err := w.f.do(ctx, "GetHold", func() (err error) { v, err = w.holds().GetHold(ctx, instanceID); return err })
	return v, err
}

// ListHolds injects faults around the wrapped call.
func (w faultyStore) ListHolds(ctx context.Context, afterID string, limit int) ([]provider.Hold, error) {
	var v []provider.Hold
	err := w.f.do(ctx, "ListHolds", func() (err error) { v, err = w.holds().ListHolds(ctx, afterID, limit); return err })
	return v, err
}

func (w faultyStore) holds() provider.HoldStore { return orUnsupported[provider.HoldStore](w.s) }
