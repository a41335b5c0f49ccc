package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// BenchmarkCitusCrossPartitionWrite measures what a write to another
// instance costs on a distributed store: an enqueue of one message to
// each of two instances whose partitions' shards are on different workers
// (a transaction of both workers, committed in two phases) against one of
// two messages to one instance (one worker), and against two instances of
// one partition.
func BenchmarkCitusCrossPartitionWrite(b *testing.B) {
	s := pgtest.NewCitusStore(b, postgres.Options{Partitions: 16})
	ctx := context.Background()
	// The worker holding each partition.
	node := map[int]int{}
	for part := range 16 {
		var port int
		require.NoError(b, s.Pool().QueryRow(ctx, `
SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
WHERE p.shardid = get_shard_id_for_distribution_column($1, $2::int)`, s.Schema()+".instances", part).Scan(&port))
		node[part] = port
	}
	// Instances: a and b in partitions on different workers, c in a's.
	var a, bID, c string
	for i := 0; a == "" || bID == "" || c == ""; i++ {
		id := fmt.Sprintf("inst-%d", i)
		p := provider.PartitionOf(id, 16)
		switch {
		case a == "":
			a = id
		case bID == "" && node[p] != node[provider.PartitionOf(a, 16)]:
			bID = id
		case c == "" && p == provider.PartitionOf(a, 16) && id != a:
			c = id
		}
	}
	seq := 0
	msg := func(instance string) provider.Message {
		seq++
		id := fmt.Sprintf("m-%d", seq)
		m, err := provider.NewMessage(id, instance, "", id, &history.EventRaised{Name: "poke", Payload: []byte("x"), IdempotencyKey: id})
		require.NoError(b, err)
		return m
	}
	for _, c := range []struct {
		name    string
		targets []string
	}{
		{"OneInstance", []string{a, a}},
		{"OnePartition", []string{a, c}},
		{"TwoWorkers", []string{a, bID}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				msgs := []provider.Message{msg(c.targets[0]), msg(c.targets[1])}
				require.NoError(b, s.EnqueueMessages(ctx, &provider.EnqueueMessagesParams{Messages: msgs, Now: time.Now()}))
			}
		})
	}
}
