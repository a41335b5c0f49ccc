package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chronicleflow/chronicle/provider/postgres"
	"github.com/chronicleflow/chronicle/query"
)

// PreloadPrefix starts the id of every instance [PreloadPostgres] writes.
// Preloaded ids look like UUIDs and sort before the time-ordered ids the
// engine generates, as the instances of a store's past would.
const PreloadPrefix = "00000000-0000-7000-8000-"

// preloadChunk is how many instances one statement of the preload copies.
const preloadChunk = 25_000

// ErrPreload is wrapped by the errors of [PreloadPostgres].
var ErrPreload = errors.New("bench: preload")

// PreloadResult says what [PreloadPostgres] did.
type PreloadResult struct {
	// Template is the ended W1 instance whose rows were copied.
	Template string
	// Existing counts the preloaded instances the schema held before.
	Existing int
	// Added counts the instances this call added.
	Added int
	// Duration is how long copying took, the template's run included.
	Duration time.Duration
}

// PreloadPostgres fills store's schema with n ended W1 instances and their
// histories, quickly: it runs one W1 workflow to its end (the template)
// unless the schema already holds a completed instance, then copies the
// template's rows in set-based statements (INSERT … SELECT FROM
// generate_series), 25,000 instances at a time, into every table where
// the template has rows. Each copy gets its own instance id (starting
// with [PreloadPrefix]), execution id and task ids, and times shifted
// into the past; the stored event bytes and hashes stay the template's,
// so the copies have the size, columns and index keys of real ended
// instances but their hash chains do not verify. An ended instance
// leaves no row in the queue tables, and neither does the preload.
//
// Preloaded instances already in the schema count towards n: a second
// call with the same n adds nothing. progress, when not nil, is called
// after each chunk with the number of preloaded instances so far.
func PreloadPostgres(ctx context.Context, store *postgres.Store, n int, progress func(done int)) (*PreloadResult, error) {
	return PreloadPostgresWith(ctx, store, n, PreloadOptions{Progress: progress})
}

// PreloadOptions are the options of [PreloadPostgresWith].
type PreloadOptions struct {
	// Progress, when not nil, is called after each chunk with the number
	// of preloaded instances so far.
	Progress func(done int)
	// Attributes gives each copy search attributes ([PreloadAttributes])
	// and one of several statuses, so that queries have something to
	// find (see [QueryBench]).
	Attributes bool
}

// PreloadCustomers is how many distinct values the preloaded "customer"
// attribute takes: copy k is an order of customer (k × 7919) mod
// PreloadCustomers, so each customer's orders spread evenly over the
// preload's span of time.
const PreloadCustomers = 10_000

// PreloadAttributes declares the search attributes that a preload with
// attributes gives its copies: "customer" (a keyword, [PreloadCustomers]
// values, written "customer-00042"), "amount" (a float, 0.00 to 1,555.35),
// "items" (an int, 1 to 7), "region" (a keyword, 8 values) and "express"
// (a bool, one in five). Statuses are mixed: of every 20 copies, about 15
// are completed, 2 running, 2 failed and 1 terminated. All but the
// customer are drawn from hashes of the copy's number, so that they are
// independent of the customer and of each other.
var PreloadAttributes = map[string]query.Type{
	"customer": query.Keyword, "amount": query.Float, "items": query.Int, "region": query.Keyword, "express": query.Bool,
}

// preloadAttrsSQL is the attrs of copy k (migration 0006's layout).
const preloadAttrsSQL = `jsonb_build_object(
    'customer', jsonb_build_object('k', 'customer-' || lpad(((k::bigint * 7919) % 10000)::text, 5, '0')),
    'amount', jsonb_build_object('f', round(((hashint4(k + 1)::bigint & 65535) % 100000)::numeric / 100 + (k % 10) * 100, 2)),
    'items', jsonb_build_object('i', (hashint4(k + 2)::bigint & 65535) % 7 + 1),
    'region', jsonb_build_object('k', (ARRAY['af-south', 'ap-east', 'ap-south', 'eu-north', 'eu-west', 'sa-east', 'us-east', 'us-west'])[(hashint4(k + 3)::bigint & 65535) % 8 + 1]),
    'express', jsonb_build_object('b', (hashint4(k + 4)::bigint & 65535) % 5 = 0))`

// preloadStatusSQL is the status of copy k.
const preloadStatusSQL = `(CASE (hashint4(k)::bigint & 65535) % 20 WHEN 0 THEN 'failed' WHEN 1 THEN 'terminated' WHEN 2 THEN 'running' WHEN 3 THEN 'running' ELSE 'completed' END)`

// PreloadPostgresWith is [PreloadPostgres] with options.
func PreloadPostgresWith(ctx context.Context, store *postgres.Store, n int, opts PreloadOptions) (*PreloadResult, error) {
	progress := opts.Progress
	if n < 0 {
		return nil, fmt.Errorf("%w: n is %d, want at least 0", ErrPreload, n)
	}
	begin := time.Now()
	pool, schema := store.Pool(), pgx.Identifier{store.Schema()}.Sanitize()
	res := &PreloadResult{}
	// Copies are numbered from 1 without gaps (chunks commit in order),
	// so the highest id tells how many there are: one index probe, where
	// a count would read, and cache, every preloaded row.
	var last string
	err := pool.QueryRow(ctx, `SELECT instance_id FROM `+schema+`.instances WHERE instance_id >= $1 AND instance_id < $2
ORDER BY instance_id DESC LIMIT 1`, PreloadPrefix, PreloadPrefix+"~").Scan(&last)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("%w: find preloaded instances: %w", ErrPreload, err)
	default:
		k, err := strconv.ParseInt(strings.TrimPrefix(last, PreloadPrefix), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: preloaded instance id %q: %w", ErrPreload, last, err)
		}
		res.Existing = int(k)
	}
	if res.Existing >= n {
		res.Duration = time.Since(begin)
		return res, nil
	}
	if res.Template, err = preloadTemplate(ctx, store); err != nil {
		return nil, err
	}
	tables, err := templateTables(ctx, pool, store.Schema(), res.Template, opts.Attributes)
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPreload, err)
	}
	defer conn.Release()
	// The preload's commits need not wait for the WAL flush: a crash
	// loses a benchmark's filler, not data.
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPreload, err)
	}
	defer func() {
		// The connection goes back to the pool: restore the session.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `RESET synchronous_commit`)
	}()
	for from := res.Existing + 1; from <= n; from += preloadChunk {
		to := min(from+preloadChunk-1, n)
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, t := range tables {
				if _, err := tx.Exec(ctx, t.copySQL, res.Template, from, to, n); err != nil {
					return fmt.Errorf("copy into %s: %w", t.name, err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%w: instances %d–%d: %w", ErrPreload, from, to, err)
		}
		res.Added += to - from + 1
		if progress != nil {
			progress(res.Existing + res.Added)
		}
	}
	// Stats of the session's writes reach the server now rather than
	// when it next idles, so a snapshot taken next sees them.
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil && !undefinedFunction(err) {
		return nil, fmt.Errorf("%w: %w", ErrPreload, err)
	}
	res.Duration = time.Since(begin)
	return res, nil
}

// preloadTemplate returns a completed instance of the store, running one
// W1 workflow to its end first when there is none.
func preloadTemplate(ctx context.Context, store *postgres.Store) (string, error) {
	q := `SELECT instance_id FROM ` + pgx.Identifier{store.Schema()}.Sanitize() + `.instances
WHERE status = 'completed' AND name = 'sequence' AND record_seq IS NOT NULL AND instance_id >= $1
ORDER BY instance_id LIMIT 1`
	var id string
	err := store.Pool().QueryRow(ctx, q, PreloadPrefix+"~").Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: find a template: %w", ErrPreload, err)
	}
	if _, err := Run(ctx, store, Config{Workload: W1, Instances: 1}); err != nil {
		return "", fmt.Errorf("%w: run the template: %w", ErrPreload, err)
	}
	if err := store.Pool().QueryRow(ctx, q, PreloadPrefix+"~").Scan(&id); err != nil {
		return "", fmt.Errorf("%w: find the template: %w", ErrPreload, err)
	}
	return id, nil
}

// preloadTable is a table the template has rows in, with the statement
// that copies them: $1 is the template's id, $2–$3 the range of copy
// numbers, $4 the preload's size (times are shifted by $4-k seconds).
type preloadTable struct {
	name, copySQL string
}

// queueTables are the tables an ended instance has no rows in.
var queueTables = []string{"messages", "activity_tasks"}

// templateTables lists the tables of schema with an instance_id column in
// which the template has rows, and builds their copy statements from the
// catalog, so that columns added by later migrations are copied too.
func templateTables(ctx context.Context, pool *pgxpool.Pool, schema, template string, attrs bool) ([]preloadTable, error) {
	rows, err := pool.Query(ctx, `
SELECT c.relname, array_agg(a.attname::text ORDER BY a.attnum), array_agg(format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    AND a.attidentity = '' AND a.attgenerated = ''
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')
  AND EXISTS (SELECT 1 FROM pg_attribute x WHERE x.attrelid = c.oid AND x.attname = 'instance_id' AND NOT x.attisdropped)
GROUP BY c.relname
ORDER BY c.relname = 'instances' DESC, c.relname`, schema)
	if err != nil {
		return nil, fmt.Errorf("%w: read the catalog: %w", ErrPreload, err)
	}
	type table struct {
		name        string
		cols, types []string
	}
	var all []table
	for rows.Next() {
		var t table
		if err := rows.Scan(&t.name, &t.cols, &t.types); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%w: read the catalog: %w", ErrPreload, err)
		}
		all = append(all, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: read the catalog: %w", ErrPreload, err)
	}
	ident := pgx.Identifier{schema}.Sanitize()
	var out []preloadTable
	for _, t := range all {
		tbl := ident + "." + pgx.Identifier{t.name}.Sanitize()
		var has bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+tbl+` WHERE instance_id = $1)`, template).Scan(&has); err != nil {
			return nil, fmt.Errorf("%w: read %s: %w", ErrPreload, t.name, err)
		}
		if !has {
			continue
		}
		for _, q := range queueTables {
			if t.name == q {
				return nil, fmt.Errorf("%w: the template %s still has rows in %s: it has not ended", ErrPreload, template, q)
			}
		}
		out = append(out, preloadTable{name: t.name, copySQL: copySQL(ident, tbl, t.cols, t.types, attrs && t.name == "instances")})
	}
	if len(out) == 0 || out[0].name != "instances" {
		return nil, fmt.Errorf("%w: the template %s has no instance row", ErrPreload, template)
	}
	return out, nil
}

// copySQL returns the statement copying the template's rows of a table
// for copies $2 to $3: ids are derived from the copy's number k, so that
// every copy is an instance of its own with keys of the template's shape.
// With attrs, the copies' search attributes and statuses are set too.
func copySQL(schema, table string, cols, types []string, attrs bool) string {
	const (
		idOf   = `'` + PreloadPrefix + `' || lpad(to_hex(k), 12, '0')`
		execOf = `'00000000-0000-7001-8000-' || lpad(to_hex(k), 12, '0')`
	)
	exprs := make([]string, len(cols))
	for i, c := range cols {
		col := "r." + pgx.Identifier{c}.Sanitize()
		switch {
		case attrs && c == "attrs":
			exprs[i] = preloadAttrsSQL
		case attrs && c == "status":
			exprs[i] = preloadStatusSQL
		case c == "instance_id":
			exprs[i] = idOf
		case c == "execution_id":
			exprs[i] = "CASE WHEN " + col + " IS NULL THEN NULL ELSE " + execOf + " END"
		case c == "correlation_id" || c == "parent_id":
			// A correlation id may be the execution's id (start, end).
			exprs[i] = "replace(" + col + ", tpl.execution_id, " + execOf + ")"
		case (c == "id" || strings.HasSuffix(c, "_id")) && types[i] == "text":
			// Other ids (task ids, dead-letter ids) are unique keys of
			// their own: a UUID-shaped hash spreads them as real ones are.
			exprs[i] = "md5(" + col + " || '/' || k)::uuid::text"
		case types[i] == "timestamp with time zone":
			exprs[i] = col + " - make_interval(secs => $4 - k)"
		default:
			exprs[i] = col
		}
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	return `INSERT INTO ` + table + ` (` + strings.Join(quoted, ", ") + `)
SELECT ` + strings.Join(exprs, ", ") + `
FROM generate_series($2::int, $3::int) AS k
CROSS JOIN (SELECT execution_id FROM ` + schema + `.instances WHERE instance_id = $1) AS tpl
CROSS JOIN LATERAL (SELECT * FROM ` + table + ` WHERE instance_id = $1) AS r
WHERE $4::int >= $3
ORDER BY k`
}
