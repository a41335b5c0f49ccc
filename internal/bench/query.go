package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/query"
)

// QueryConfig configures [QueryBench].
type QueryConfig struct {
	// Runs is how many times each query is timed (after one untimed run);
	// 0 means 11.
	Runs int
	// Explain, when set, has the result carry the plan of each query on a
	// generic plan, as EXPLAIN (ANALYZE, BUFFERS) prints it.
	Explain bool
}

// QueryTiming is the timings of one query in one plan mode.
type QueryTiming struct {
	// Query names the query; Mode is "default" (the server's plan cache
	// settings, custom plans first) or "generic" (plan_cache_mode =
	// force_generic_plan).
	Query, Mode string
	// Median, Min and Max of the timed runs.
	Median, Min, Max time.Duration
	// Rows is how many records (or groups) the last run returned.
	Rows int
}

// QueryResult is what [QueryBench] measured.
type QueryResult struct {
	// Instances is how many instance records the store holds.
	Instances int64
	// Timings are per query and plan mode.
	Timings []QueryTiming
	// Plans are the EXPLAIN output of each query on a generic plan, by
	// query name (QueryConfig.Explain).
	Plans map[string]string
}

// The queries QueryBench times: the goals.
const (
	// QuerySelective lists the first 50 of one customer's completed
	// orders created in the middle half of the preload's span of time.
	QuerySelective = "customer+status+created_at, first 50"
	// QueryCountByStatus counts every instance by status.
	QueryCountByStatus = "count by status"
)

// QueryBench times the search queries on a store that
// [PreloadPostgresWith] filled with attributes: [QuerySelective], a
// different customer on each run (and other customers on generic plans
// than on default ones), and [QueryCountByStatus], each on the server's
// default plan cache mode and on generic plans.
func QueryBench(ctx context.Context, store *postgres.Store, c QueryConfig) (*QueryResult, error) {
	if c.Runs <= 0 {
		c.Runs = 11
	}
	res := &QueryResult{Plans: map[string]string{}}
	// The span of the preload's creation times: copy 1 is the oldest,
	// the newest the highest.
	pool, ident := store.Pool(), pgx.Identifier{store.Schema()}.Sanitize()
	var (
		first, last time.Time
		withAttrs   bool
	)
	err := pool.QueryRow(ctx, `SELECT (SELECT created_at FROM `+ident+`.instances WHERE instance_id >= $1 ORDER BY instance_id LIMIT 1),
       (SELECT created_at FROM `+ident+`.instances WHERE instance_id >= $1 AND instance_id < $2 ORDER BY instance_id DESC LIMIT 1),
       (SELECT attrs IS NOT NULL FROM `+ident+`.instances WHERE instance_id >= $1 ORDER BY instance_id LIMIT 1)`,
		PreloadPrefix, PreloadPrefix+"~").Scan(&first, &last, &withAttrs)
	if err != nil {
		return nil, fmt.Errorf("bench: query: find the preloaded instances (run with --preload): %w", err)
	}
	if !withAttrs {
		return nil, errors.New("bench: query: the preloaded instances have no search attributes: preload a schema of its own with --query")
	}
	span := last.Sub(first)
	from, to := first.Add(span/4).UTC(), first.Add(3*span/4).UTC()
	schema := query.SchemaOf(PreloadAttributes)
	status, err := query.ParseField("status", schema)
	if err != nil {
		return nil, err
	}
	selective := func(i int) (query.Expr, error) {
		customer := fmt.Sprintf("customer-%05d", (i*379+17)%PreloadCustomers)
		return query.Parse(fmt.Sprintf("customer = '%s' AND status = 'completed' AND created_at BETWEEN '%s' AND '%s'",
			customer, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano)), schema)
	}
	queries := []struct {
		name string
		run  func(ctx context.Context, s *postgres.Store, i int) (int, error)
	}{
		{QuerySelective, func(ctx context.Context, s *postgres.Store, i int) (int, error) {
			where, err := selective(i)
			if err != nil {
				return 0, err
			}
			recs, err := s.ListInstances(ctx, &provider.ListInstancesParams{Where: where, Limit: 50})
			return len(recs), err
		}},
		{QueryCountByStatus, func(ctx context.Context, s *postgres.Store, _ int) (int, error) {
			groups, err := s.CountInstances(ctx, &provider.CountInstancesParams{By: &status})
			if err == nil && res.Instances == 0 {
				for _, g := range groups {
					res.Instances += g.Count
				}
			}
			return len(groups), err
		}},
	}
	for m, mode := range []string{"default", "generic"} {
		// Each mode asks for other customers, whose pages the other's
		// runs did not bring into the cache.
		base := m * 5000
		tr := &lastQuery{}
		s, done, err := sibling(ctx, store, mode == "generic", tr)
		if err != nil {
			return nil, err
		}
		for _, q := range queries {
			// One run to warm the cache and prepare the statement.
			if _, err := q.run(ctx, s, base+c.Runs); err != nil {
				done()
				return nil, fmt.Errorf("bench: query %s: %w", q.name, err)
			}
			times := make([]time.Duration, c.Runs)
			var rows int
			for i := range times {
				begin := time.Now()
				if rows, err = q.run(ctx, s, base+i); err != nil {
					done()
					return nil, fmt.Errorf("bench: query %s: %w", q.name, err)
				}
				times[i] = time.Since(begin)
			}
			slices.Sort(times)
			res.Timings = append(res.Timings, QueryTiming{Query: q.name, Mode: mode, Median: times[len(times)/2], Min: times[0], Max: times[len(times)-1], Rows: rows})
			if c.Explain && mode == "generic" {
				sql, args := tr.get()
				plan, err := explainGeneric(ctx, s.Pool(), sql, args)
				if err != nil {
					done()
					return nil, fmt.Errorf("bench: explain %s: %w", q.name, err)
				}
				res.Plans[q.name] = plan
			}
		}
		done()
	}
	return res, nil
}

// sibling opens a store on store's schema with a pool of its own, traced
// by tr, its sessions on generic plans when generic is set.
func sibling(ctx context.Context, store *postgres.Store, generic bool, tr *lastQuery) (*postgres.Store, func(), error) {
	cfg := store.Pool().Config()
	cfg.ConnConfig.Tracer = tr
	cfg.MaxConns = 2
	if generic {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	s, err := postgres.New(ctx, postgres.Options{Pool: pool, Schema: store.Schema()})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s, func() { s.Close(); pool.Close() }, nil
}

// lastQuery is a pgx tracer that keeps the last statement and arguments
// sent.
type lastQuery struct {
	mu   sync.Mutex
	sql  string
	args []any
}

func (l *lastQuery) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.HasPrefix(d.SQL, "SELECT") || !strings.Contains(d.SQL, `"instances"`) {
		return ctx // the store's own statements (its listener's, say)
	}
	l.mu.Lock()
	l.sql, l.args = d.SQL, d.Args
	l.mu.Unlock()
	return ctx
}

func (l *lastQuery) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *lastQuery) get() (string, []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sql, l.args
}

// explainGeneric prepares sql on a session on generic plans and returns
// EXPLAIN (ANALYZE, BUFFERS) of its execution with args, written as
// literals that EXECUTE converts to the parameters' types.
func explainGeneric(ctx context.Context, pool *pgxpool.Pool, sql string, args []any) (string, error) {
	if sql == "" {
		return "", errors.New("no statement was traced")
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		return "", err
	}
	const name = "chronicle_bench_explain"
	if _, err := conn.Conn().Prepare(ctx, name, sql); err != nil {
		return "", err
	}
	defer func() { _ = conn.Conn().Deallocate(context.WithoutCancel(ctx), name) }()
	var lits []string
	for _, a := range args {
		if _, ok := a.(pgx.QueryExecMode); ok {
			continue // how the store sent it, not an argument
		}
		lit, err := sqlLiteral(a)
		if err != nil {
			return "", err
		}
		lits = append(lits, lit)
	}
	exec := "EXECUTE " + name
	if len(lits) > 0 {
		exec += "(" + strings.Join(lits, ", ") + ")"
	}
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+exec, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	return strings.Join(lines, "\n"), nil
}

// sqlLiteral writes a bind argument of the store's statements as an SQL
// literal, for EXPLAIN only.
func sqlLiteral(a any) (string, error) {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := a.(type) {
	case string:
		return quote(v), nil
	case []byte:
		return quote(string(v)), nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	case time.Time:
		return quote(v.UTC().Format(time.RFC3339Nano)), nil
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = quote(s)
		}
		return "ARRAY[" + strings.Join(q, ", ") + "]::text[]", nil
	}
	return "", fmt.Errorf("bench: no literal for %T", a)
}
