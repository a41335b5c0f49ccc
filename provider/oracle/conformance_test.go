package oracle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/oracle"
	"github.com/chronicleflow/chronicle/provider/oracle/oracletest"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

// TestOracleConformance runs the provider contract's suite on the server named
// by CHRONICLE_TEST_ORACLE_DSN; without one it is skipped loudly.
func TestOracleConformance(t *testing.T) {
	oracletest.DSN(t)
	t.Parallel()
	providertest.Exercise(t, func(t *testing.T) provider.Store {
		return oracletest.NewStore(t, oracle.Options{})
	})
}

// TestOracleMigrateTwiceAndConcurrently checks on a server that migrations run
// once under their lock and that an up-to-date schema is left alone.
func TestOracleMigrateTwiceAndConcurrently(t *testing.T) {
	oracletest.DSN(t)
	t.Parallel()
	s := oracletest.NewStore(t, oracle.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			v, err := s.Migrate(ctx)
			if err == nil && v != oracle.LatestSchemaVersion() {
				err = errors.New("migrate reached another version")
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil || v != oracle.LatestSchemaVersion() {
		t.Fatalf("schema version %d, %v", v, err)
	}
}

// TestOracleOutcomeUnknownCommitIsRetried checks that a round whose commit
// outcome is unknown can run again: its appends and enqueues are
// idempotent.
func TestOracleOutcomeUnknownCommitIsRetried(t *testing.T) {
	oracletest.DSN(t)
	t.Parallel()
	s := oracletest.NewStore(t, oracle.Options{})
	fail := true
	oracle.SetAfterCommit(s, func() error {
		if fail {
			fail = false
			return oracle.ErrOutcomeUnknown
		}
		return nil
	})
	ctx := t.Context()
	m, err := provider.NewMessage("m-1", "inst-1", "", "", &history.EventRaised{Name: "go"})
	if err != nil {
		t.Fatal(err)
	}
	round := func() error {
		return s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
			return tx.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{m}, Now: time.Now()})
		})
	}
	if err := round(); !errors.Is(err, oracle.ErrOutcomeUnknown) {
		t.Fatalf("first round: %v", err)
	}
	if err := round(); err != nil {
		t.Fatalf("the retried round: %v", err)
	}
	msgs, err := s.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: "inst-1"})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("queued %d messages, %v; want the one", len(msgs), err)
	}
}
