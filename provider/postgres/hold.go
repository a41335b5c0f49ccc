package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/provider"
)

var _ provider.HoldStore = (*Store)(nil)

// holdLockSQL takes the instance's row FOR KEY SHARE, as an enqueue does:
// a purge (FOR UPDATE SKIP LOCKED) passes over a row being held, and a
// hold waits for a purge holding the row, then finds it gone.
const holdLockSQL = `
SELECT 1 FROM {{schema}}.instances WHERE part = $2 AND instance_id = $1 AND record_seq IS NOT NULL FOR KEY SHARE`

const insertHoldSQL = `
INSERT INTO {{schema}}.legal_holds (part, instance_id, hold_id, reason, actor, ticket, placed_at)
VALUES ($7, $1, $2, $3, $4, $5, $6) ON CONFLICT (instance_id) DO NOTHING`

const holdColumns = `instance_id, hold_id, reason, actor, ticket, placed_at`

const getHoldSQL = `SELECT ` + holdColumns + ` FROM {{schema}}.legal_holds WHERE part = $2 AND instance_id = $1`

const releaseHoldSQL = `DELETE FROM {{schema}}.legal_holds WHERE part = $3 AND instance_id = $1 AND hold_id = $2`

const listHoldsSQL = `SELECT ` + holdColumns + ` FROM {{schema}}.legal_holds WHERE instance_id > $1 ORDER BY instance_id LIMIT NULLIF($2, 0)`

func scanHold(row pgx.Row) (*provider.Hold, error) {
	var (
		h  provider.Hold
		at time.Time
	)
	if err := row.Scan(&h.InstanceID, &h.HoldID, &h.Reason, &h.Actor, &h.Ticket, &at); err != nil {
		return nil, err
	}
	h.PlacedAt = at.UTC()
	return &h, nil
}

// PlaceHold implements provider.HoldStore in one transaction.
func (s *Store) PlaceHold(ctx context.Context, h *provider.Hold) (*provider.Hold, bool, error) {
	var cur *provider.Hold
	err := s.inTx(ctx, "hold "+h.InstanceID, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, s.sql.holdLock, h.InstanceID, s.part(h.InstanceID)).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: hold %s: %w", h.InstanceID, provider.ErrNotFound)
		}
		if err != nil {
			return failf(err, "hold %s", h.InstanceID)
		}
		if _, err := tx.Exec(ctx, s.sql.insertHold, h.InstanceID, h.HoldID, h.Reason, h.Actor, h.Ticket, h.PlacedAt.UTC(), s.part(h.InstanceID)); err != nil {
			return failf(err, "hold %s", h.InstanceID)
		}
		cur, err = scanHold(tx.QueryRow(ctx, s.sql.getHold, h.InstanceID, s.part(h.InstanceID)))
		return failf(err, "hold %s", h.InstanceID)
	})
	if err != nil {
		return nil, false, err
	}
	return cur, cur.HoldID == h.HoldID, nil
}

// ReleaseHold implements provider.HoldStore.
func (s *Store) ReleaseHold(ctx context.Context, instanceID, holdID string) error {
	tag, err := s.pool.Exec(ctx, s.sql.releaseHold, instanceID, holdID, s.part(instanceID))
	if err != nil {
		return failf(err, "release hold %s of %s", holdID, instanceID)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: release hold %s of %s: %w", holdID, instanceID, provider.ErrNotFound)
	}
	return nil
}

// GetHold implements provider.HoldStore.
func (s *Store) GetHold(ctx context.Context, instanceID string) (*provider.Hold, error) {
	h, err := scanHold(s.pool.QueryRow(ctx, s.sql.getHold, instanceID, s.part(instanceID)))
	if err != nil {
		return nil, failf(err, "hold of %s", instanceID)
	}
	return h, nil
}

// ListHolds implements provider.HoldStore.
func (s *Store) ListHolds(ctx context.Context, afterID string, limit int) ([]provider.Hold, error) {
	rows, err := s.pool.Query(ctx, s.sql.listHolds, afterID, limit)
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
func (s *Store) purgeHeld(ctx context.Context, tx pgx.Tx, instanceID string) error {
	h, err := scanHold(tx.QueryRow(ctx, s.sql.getHold, instanceID, s.part(instanceID)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return failf(err, "purge %s", instanceID)
	}
	return fmt.Errorf("postgres: purge %s: %w (hold %s placed by %s)", instanceID, provider.ErrHeld, h.HoldID, h.Actor)
}
