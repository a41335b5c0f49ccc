package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statementCounter counts the statements sent on a pool, by kind: the
// statement's text, its whitespace collapsed and cut to its first 110
// characters. Statements sent in a pipeline (a pgx batch) are counted
// each, and the pipelines too.
type statementCounter struct {
	mu     sync.Mutex
	counts map[string]int
	pool   *pgxpool.Pool
}

var (
	_ pgx.QueryTracer = (*statementCounter)(nil)
	_ pgx.BatchTracer = (*statementCounter)(nil)
)

// statementKindLength is how much of a statement's text names its kind.
const statementKindLength = 110

// openCountedPool opens a pool on url whose statements c counts.
func openCountedPool(ctx context.Context, url string) (*statementCounter, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	c := &statementCounter{counts: map[string]int{}}
	cfg.ConnConfig.Tracer = c
	if c.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *statementCounter) add(prefix, sql string) {
	kind := strings.Join(strings.Fields(sql), " ")
	if len(kind) > statementKindLength {
		kind = kind[:statementKindLength]
	}
	c.mu.Lock()
	c.counts[prefix+kind]++
	c.mu.Unlock()
}

// TraceQueryStart implements pgx.QueryTracer.
func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add("", d.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	c.add("", "(pipeline)")
	for _, q := range d.Batch.QueuedQueries {
		c.add("in a pipeline: ", q.SQL)
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// write writes the counts, most frequent first, each divided by per (the
// run's workflows or signals) too.
func (c *statementCounter) write(w io.Writer, label string, per int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	kinds := make([]string, 0, len(c.counts))
	for k := range c.counts {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if d := c.counts[b] - c.counts[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	if _, err := fmt.Fprintf(w, "%s: statements by kind (count, per workflow or signal)\n", label); err != nil {
		return err
	}
	for _, k := range kinds {
		if _, err := fmt.Fprintf(w, "%8d %8.2f  %s\n", c.counts[k], float64(c.counts[k])/float64(max(per, 1)), k); err != nil {
			return err
		}
	}
	return nil
}
