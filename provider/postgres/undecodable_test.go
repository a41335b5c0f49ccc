package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// TestUndecodableMessage puts a row whose envelope does not decode in the
// messages table, ahead of every other message: it is dead-lettered with
// its bytes and the reason, and the other instances go on.
func TestUndecodableMessage(t *testing.T) {
	t.Parallel()
	s := pgtest.NewStore(t, postgres.Options{})
	admin := adminConn(t)
	ctx := t.Context()
	garbage := []byte{0xc1, 0xff, 0x00, 'x'}
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "m-1", "inst-a")}, Now: base}))
	_, err := admin.Exec(ctx, "INSERT INTO "+pgx.Identifier{s.Schema(), "messages"}.Sanitize()+
		" (id, instance_id, visible_at, order_at, attempts, envelope) VALUES ('bad-1', 'inst-a', $1, $1, 2, $2)", base.Add(-1), garbage)
	require.NoError(t, err)
	require.NoError(t, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{signal(t, "n-1", "inst-b")}, Now: base}))

	// The first round gets inst-a's good message; the garbage is gone.
	var got []string
	for b := take(t, s, base); b != nil; b = take(t, s, base) {
		for _, m := range b.Messages {
			got = append(got, m.ID)
		}
	}
	require.ElementsMatch(t, []string{"m-1", "n-1"}, got)

	letters, err := s.ListDeadLetters(ctx, &provider.ListDeadLettersParams{})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	l := letters[0]
	require.Equal(t, "inst-a", l.InstanceID)
	require.Equal(t, provider.ReasonUndecodable, l.Reason)
	require.Contains(t, l.Error, "bad-1")
	require.Contains(t, l.Error, "decode message envelope")
	require.Equal(t, garbage, l.Raw, "the dead letter does not keep the stored bytes")
	require.Nil(t, l.Message)
	require.Equal(t, 3, l.Attempts)
	got1, err := s.GetDeadLetter(ctx, l.ID)
	require.NoError(t, err)
	require.Equal(t, l, *got1)
	var incident string
	require.NoError(t, admin.QueryRow(ctx, "SELECT incident FROM "+pgx.Identifier{s.Schema(), "instances"}.Sanitize()+
		" WHERE instance_id = 'inst-a'").Scan(&incident))
	require.Contains(t, incident, string(provider.ReasonUndecodable))

	// It cannot be redriven, only discarded.
	err = s.ResolveDeadLetter(ctx, &provider.ResolveDeadLetterParams{ID: l.ID, Status: provider.DeadLetterRedriven, By: "ops", Now: base})
	require.ErrorIs(t, err, provider.ErrInvalidState)
	require.NoError(t, s.ResolveDeadLetter(ctx, &provider.ResolveDeadLetterParams{ID: l.ID, Status: provider.DeadLetterDiscarded, By: "ops", Now: base}))
}
