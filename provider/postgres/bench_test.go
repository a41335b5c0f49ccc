package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/query"
)

// BenchmarkRound measures transactional rounds of the shape the runner
// runs: dequeue one instance's message, load its history, append an
// event, save the snapshot and instance record, enqueue a follow-up
// message and ack, in one transaction. Messages are queued beforehand, one
// instance each. With attributes=5 the record carries five search
// attributes, as W1 with attributes writes them.
func BenchmarkRound(b *testing.B) {
	attrs := map[string]query.Value{
		"customer": {Type: query.Keyword, Str: "customer-07919"}, "amount": {Type: query.Float, Float: 123.45},
		"items": {Type: query.Int, Int: 3}, "region": {Type: query.Keyword, Str: "eu-west"}, "express": {Type: query.Bool, Bool: true},
	}
	for _, c := range []struct {
		parallelism int
		attrs       map[string]query.Value
	}{{1, nil}, {1, attrs}, {4, nil}, {4, attrs}} {
		parallelism := c.parallelism
		b.Run(fmt.Sprintf("parallelism=%d/attributes=%d", parallelism, len(c.attrs)), func(b *testing.B) {
			url := pgtest.URL(b)
			if strings.Contains(url, "?") {
				url += "&pool_max_conns=16"
			} else {
				url += "?pool_max_conns=16"
			}
			s := pgtest.NewStore(b, postgres.Options{URL: url})
			ctx := b.Context()
			for i := 0; i < b.N; i += 1000 {
				var msgs []provider.Message
				for j := i; j < min(i+1000, b.N); j++ {
					m, err := provider.NewMessage(fmt.Sprintf("m-%d", j), fmt.Sprintf("i-%d", j), "", "k", &history.EventRaised{Name: "go"})
					require.NoError(b, err)
					msgs = append(msgs, m)
				}
				require.NoError(b, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: msgs, Now: base}))
			}
			record := &provider.InstanceRecord{Name: "bench", Status: provider.StatusRunning, CreatedAt: base, UpdatedAt: base, Attributes: c.attrs}
			b.SetParallelism(parallelism)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					err := s.RunRound(ctx, func(ctx context.Context, tx provider.Tx) error {
						batch, err := tx.DequeueInstance(ctx, &provider.DequeueParams{Now: base, Owner: "bench", Limit: 100})
						if err != nil || batch == nil {
							return fmt.Errorf("dequeue: %v, batch %v", err, batch)
						}
						id := batch.InstanceID
						if _, err := tx.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1}); err != nil {
							return err
						}
						e := []history.Event{{Seq: 1, InstanceID: id, ExecutionID: "exec-1", Kind: batch.Messages[0].Kind,
							CorrelationID: "k", At: base, Actor: "system", Payload: batch.Messages[0].Payload}}
						history.Seal(nil, e)
						if err := tx.AppendHistory(ctx, &provider.AppendHistoryParams{InstanceID: id, Events: e}); err != nil {
							return err
						}
						rec := *record
						rec.InstanceID = id
						if err := tx.SaveProjections(ctx, &provider.Projections{InstanceID: id, Seq: 1, Snapshot: []byte("snapshot"), Instance: &rec}); err != nil {
							return err
						}
						next, err := provider.NewMessage(batch.Messages[0].ID+"/next", id, "", "k2", &history.EventRaised{Name: "next"})
						if err != nil {
							return err
						}
						next.VisibleAt = base.Add(1e12)
						if err := tx.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: []provider.Message{next}, Now: base}); err != nil {
							return err
						}
						return tx.AckMessages(ctx, &provider.AckMessagesParams{InstanceID: id, MessageIDs: []string{batch.Messages[0].ID}})
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rounds/s")
		})
	}
}
