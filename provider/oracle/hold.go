package oracle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

var _ provider.HoldStore = (*Store)(nil)

// holdLockSQL locks the row of an instance that has a record, waiting
// for a round: a purge (FOR UPDATE SKIP LOCKED) passes over a row being
// held, and a hold that waited for a purge finds the row gone.
const holdLockSQL = `
SELECT 1 FROM {{obj:INSTANCES}} WHERE instance_id = :inst AND record_seq IS NOT NULL FOR UPDATE`

// insertHoldSQL keeps a hold unless the instance has one; the instance's
// row lock keeps a concurrent placement out.
const insertHoldSQL = `
INSERT INTO {{obj:LEGAL_HOLDS}} (instance_id, hold_id, reason, actor, ticket, placed_at)
SELECT :inst, :hold_id, :reason, :actor, :ticket, :placed FROM dual
WHERE NOT EXISTS (SELECT 1 FROM {{obj:LEGAL_HOLDS}} WHERE instance_id = :inst)`

const holdColumnList = `instance_id, hold_id, reason, actor, ticket, placed_at`

const getHoldSQL = `SELECT ` + holdColumnList + ` FROM {{obj:LEGAL_HOLDS}} WHERE instance_id = :inst`

const releaseHoldSQL = `DELETE FROM {{obj:LEGAL_HOLDS}} WHERE instance_id = :inst AND hold_id = :hold_id`

const listHoldsSQL = `
SELECT ` + holdColumnList + ` FROM {{obj:LEGAL_HOLDS}}
WHERE (:after IS NULL OR instance_id > :after)
ORDER BY instance_id
FETCH FIRST :lim ROWS ONLY`

func scanHold(row rowScanner) (*provider.Hold, error) {
	var (
		h      provider.Hold
		placed int64
	)
	if err := row.Scan(&h.InstanceID, &h.HoldID, strScan{&h.Reason}, strScan{&h.Actor}, strScan{&h.Ticket}, intScan{&placed}); err != nil {
		return nil, err
	}
	h.PlacedAt = time.Unix(0, placed).UTC()
	return &h, nil
}

// PlaceHold implements provider.HoldStore in one transaction.
func (s *Store) PlaceHold(ctx context.Context, h *provider.Hold) (*provider.Hold, bool, error) {
	if err := checkTime("hold time", h.PlacedAt); err != nil {
		return nil, false, err
	}
	var cur *provider.Hold
	err := s.inTx(ctx, "hold "+h.InstanceID, func(tx *sql.Tx) error {
		var one int64
		err := tx.QueryRowContext(ctx, s.sql.holdLock, named("inst", h.InstanceID)).Scan(intScan{&one})
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("oracle: hold %s: %w", h.InstanceID, provider.ErrNotFound)
		}
		if err != nil {
			return failf(err, "hold %s", h.InstanceID)
		}
		if _, err := tx.ExecContext(ctx, s.sql.insertHold, named("inst", h.InstanceID), named("hold_id", h.HoldID),
			named("reason", textArg(h.Reason)), named("actor", h.Actor), named("ticket", h.Ticket), named("placed", timeArg(h.PlacedAt))); err != nil {
			return failf(err, "hold %s", h.InstanceID)
		}
		cur, err = scanHold(tx.QueryRowContext(ctx, s.sql.getHold, named("inst", h.InstanceID)))
		return failf(err, "hold %s", h.InstanceID)
	})
	if err != nil {
		return nil, false, err
	}
	return cur, cur.HoldID == h.HoldID, nil
}

// ReleaseHold implements provider.HoldStore.
func (s *Store) ReleaseHold(ctx context.Context, instanceID, holdID string) error {
	res, err := s.db.ExecContext(ctx, s.sql.releaseHold, named("inst", instanceID), named("hold_id", holdID))
	if err != nil {
		return failf(err, "release hold %s of %s", holdID, instanceID)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("oracle: release hold %s of %s: %w", holdID, instanceID, errors.Join(provider.ErrNotFound, err))
	}
	return nil
}

// GetHold implements provider.HoldStore.
func (s *Store) GetHold(ctx context.Context, instanceID string) (*provider.Hold, error) {
	h, err := scanHold(s.db.QueryRowContext(ctx, s.sql.getHold, named("inst", instanceID)))
	if err != nil {
		return nil, failf(err, "hold of %s", instanceID)
	}
	return h, nil
}

// ListHolds implements provider.HoldStore.
func (s *Store) ListHolds(ctx context.Context, afterID string, limit int) ([]provider.Hold, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	rows, err := s.db.QueryContext(ctx, s.sql.listHolds, named("after", textArg(afterID)), named("lim", limit))
	if err != nil {
		return nil, failf(err, "list holds")
	}
	defer rows.Close()
	var out []provider.Hold
	for rows.Next() {
		h, err := scanHold(rows)
		if err != nil {
			return nil, failf(err, "list holds")
		}
		out = append(out, *h)
	}
	return out, failf(rows.Err(), "list holds")
}

// purgeHeld refuses, with ErrHeld, the purge of an instance that has a
// legal hold; the purge holds the instance's row.
func (s *Store) purgeHeld(ctx context.Context, tx *sql.Tx, instanceID string) error {
	h, err := scanHold(tx.QueryRowContext(ctx, s.sql.getHold, named("inst", instanceID)))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return failf(err, "purge %s", instanceID)
	}
	return fmt.Errorf("oracle: purge %s: %w (hold %s placed by %s)", instanceID, provider.ErrHeld, h.HoldID, h.Actor)
}
