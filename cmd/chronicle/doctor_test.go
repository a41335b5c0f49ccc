package main

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// TestDoctorWithKey: with --key, doctor verifies the history against the
// signed checkpoints. A history rewritten with recomputed hashes passes
// plain verification and makes projections differ; doctor names the
// rewrite and does not tell the operator to rebuild the projections,
// which would erase the only trace of the original.
func TestDoctorWithKey(t *testing.T) {
	t.Parallel()
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, "doctor")
	signer, err := chronicle.NewEd25519Signer("2026-11", ed25519.NewKeyFromSeed(seed))
	require.NoError(t, err)
	tmp := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "keys.pub"), []byte(history.KeyringLine("2026-11", signer.Public().(ed25519.PublicKey))+"\n"), 0o644))
	sign := func(s *memory.Store) {
		e, err := chronicle.New(s, chronicle.Options{Checkpoints: &chronicle.CheckpointOptions{Signer: signer}})
		require.NoError(t, err)
		defer e.Close()
		c, err := e.SweepCheckpoint(context.Background())
		require.NoError(t, err)
		require.NotNil(t, c)
	}
	signed := hooks{afterSeed: sign}
	forged := hooks{afterSeed: func(s *memory.Store) {
		sign(s)
		require.True(t, s.RewriteHistory("CLM-1001", func(ev []history.Event) []history.Event {
			status, err := history.Encode("refunded")
			require.NoError(t, err)
			ev[14].Payload, err = history.EncodeAttributes(&history.CustomStatusSet{Status: status})
			require.NoError(t, err)
			return ev
		}))
	}}

	r := runTool(t, tmp, signed, "doctor", "--key", "$TMP/keys.pub")
	require.Contains(t, r.stdout, "signed checkpoints: 1 (latest 1), every covered history verified")

	r = runTool(t, tmp, forged, "doctor")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stdout, "projections rebuild", "without the key, doctor sees only projections that differ")

	r = runTool(t, tmp, forged, "doctor", "--key", "$TMP/keys.pub")
	checkGolden(t, "doctor_forged_key", transcript([]string{"doctor", "--key", "$TMP/keys.pub"}, r))
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stdout, "CLM-1001: history rewritten after checkpoint 1")
	require.NotContains(t, r.stdout, "projections rebuild")
	require.Contains(t, r.stdout, "do not rebuild projections")

	r = runTool(t, tmp, forged, "--json", "doctor", "--key", "$TMP/keys.pub")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stdout, `"forged": true`)
}
