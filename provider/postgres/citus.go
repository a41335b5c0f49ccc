package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Citus (https://www.citusdata.com) distributes a table by one of its
// columns: each value's rows live in one shard, on one worker node, and a
// statement whose every distributed table is pinned to one value of the
// column runs there as a single-shard "router" query. A store on a Citus
// coordinator distributes its per-instance tables by part, co-located, so
// that a round, which names its instance's partition in every statement,
// runs on the worker holding that partition; the small global tables are
// reference tables, copied to every node. See docs/scaling.md.

// perInstanceKeys are the per-instance tables (migration 0009) with the
// columns of their primary key and unique indexes as a distributed store
// has them: Citus requires every unique index of a distributed table to
// contain the distribution column, so part leads each. The first table
// is the one the others are co-located with.
var perInstanceKeys = []struct {
	table string
	// pkey is the primary key; unique the unique indexes (name and DDL
	// of the index with part, {{schema}} for the schema).
	pkey   string
	unique map[string]string
}{
	{table: "instances", pkey: "part, instance_id"},
	{table: "history", pkey: "part, instance_id, seq", unique: map[string]string{
		"history_idempotency_key": `CREATE UNIQUE INDEX history_idempotency_key
    ON {{schema}}.history (part, instance_id, execution_id, class, correlation_id)
    WHERE class IS NOT NULL`,
	}},
	{table: "messages", pkey: "part, id"},
	{table: "activity_task_ids", pkey: "part, instance_id, id"},
	{table: "activity_tasks", pkey: "part, id"},
	{table: "dead_letters", pkey: "part, id"},
	{table: "human_tasks", pkey: "part, task_id"},
	{table: "human_task_events", pkey: "part, instance_id, seq, task_id"},
	{table: "custom_projections", pkey: "part, instance_id, name"},
	{table: "tombstones", pkey: "part, instance_id, seq"},
	{table: "legal_holds", pkey: "part, instance_id"},
}

// referenceTables are the global tables of a distributed store, made
// reference tables (a copy on every node) in this order: a table comes
// after the one its foreign key references.
var referenceTables = []string{
	"schema_migrations", "store_settings", "partition_leases", "partition_nodes",
	"checkpoints", "checkpoint_leaves", "flow_rates", "flow_keys", "flow_slots",
}

// Distribute makes the store's tables distributed on the Citus cluster
// whose coordinator the store is connected to: it adds part to the
// primary key and unique indexes of each per-instance table, distributes
// those tables by part, co-located with instances, and makes the global
// tables reference tables. The schema must be at [LatestSchemaVersion]
// and the citus extension created in the database. Tables distributed
// already are left alone, so Distribute may run again (New with
// [Options].Citus and MigrateOnStart runs it after every Migrate); it
// takes the schema's migration lock, so nodes starting together
// distribute once. Afterwards the store uses the statement forms that
// Citus routes to one shard; a Store opened on a distributed schema
// finds out by itself (see [Store.Distributed]).
//
// Distribute is meant for a new, empty store, before it is used: Citus
// copies the rows of a table it distributes, under a lock that stops
// every round, and the store switches its statements.
func (s *Store) Distribute(ctx context.Context) error {
	ident := pgx.Identifier{s.schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{{schema}}", ident) }
	var hasCitus bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&hasCitus); err != nil {
		return failf(err, "distribute %s: find the citus extension", s.schema)
	}
	if !hasCitus {
		return fmt.Errorf("postgres: distribute %s: %w", s.schema, ErrNoCitus)
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if v != LatestSchemaVersion() {
		return fmt.Errorf("postgres: distribute %s: the schema is at version %d, not %d: migrate it first", s.schema, v, LatestSchemaVersion())
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return failf(err, "distribute %s", s.schema)
	}
	defer conn.Release()
	// A session-level advisory lock: create_distributed_table commits
	// work on the workers, and runs best outside a transaction block.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLockKey(s.schema)); err != nil {
		return failf(err, "distribute %s: lock", s.schema)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLockKey(s.schema)) // the session's lock ends with it anyway
	}()
	kinds := map[string]string{}
	rows, err := conn.Query(ctx, `
SELECT c.relname, p.partmethod::text
FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
WHERE c.relnamespace = $1::regnamespace`, s.schema)
	if err != nil {
		return failf(err, "distribute %s: read the distributed tables", s.schema)
	}
	for rows.Next() {
		var name, method string
		if err := rows.Scan(&name, &method); err != nil {
			rows.Close()
			return failf(err, "distribute %s: read the distributed tables", s.schema)
		}
		kinds[name] = method
	}
	if err := rows.Err(); err != nil {
		return failf(err, "distribute %s: read the distributed tables", s.schema)
	}
	for i, t := range perInstanceKeys {
		if _, ok := kinds[t.table]; ok {
			continue
		}
		table := ident + "." + pgx.Identifier{t.table}.Sanitize()
		err := pgx.BeginTxFunc(ctx, conn, readCommitted, func(tx pgx.Tx) error {
			stmts := []string{
				`ALTER TABLE ` + table + ` DROP CONSTRAINT ` + pgx.Identifier{t.table + "_pkey"}.Sanitize(),
				`ALTER TABLE ` + table + ` ADD PRIMARY KEY (` + t.pkey + `)`,
			}
			for name, ddl := range t.unique {
				stmts = append(stmts, `DROP INDEX `+ident+`.`+pgx.Identifier{name}.Sanitize(), q(ddl))
			}
			for _, sql := range stmts {
				if _, err := tx.Exec(ctx, sql); err != nil {
					return fmt.Errorf("%s: %w", sql, err)
				}
			}
			return nil
		})
		if err != nil {
			return failf(err, "distribute %s: key %s by part", s.schema, t.table)
		}
		// The first table gets its own co-location group and shard count,
		// the others are co-located with it.
		sql, args := `SELECT create_distributed_table($1, 'part', colocate_with => 'none', shard_count => $2)`, []any{s.schema + "." + t.table, s.shardCount()}
		if i > 0 {
			sql, args = `SELECT create_distributed_table($1, 'part', colocate_with => $2)`, []any{s.schema + "." + t.table, s.schema + "." + perInstanceKeys[0].table}
		}
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			return failf(err, "distribute %s: distribute %s", s.schema, t.table)
		}
	}
	for _, t := range referenceTables {
		if _, ok := kinds[t]; ok {
			continue
		}
		if _, err := conn.Exec(ctx, `SELECT create_reference_table($1)`, s.schema+"."+t); err != nil {
			return failf(err, "distribute %s: make %s a reference table", s.schema, t)
		}
	}
	s.setCitus(true)
	return nil
}

// ErrNoCitus is returned by [Store.Distribute] on a database without the
// citus extension.
var ErrNoCitus = errors.New("the citus extension is not created in the database")

// Distributed reports whether the store's tables are distributed by
// Citus: then the store uses the statement forms that Citus routes to one
// shard.
func (s *Store) Distributed() bool { return s.citus }

// useCitus finds out whether the store's instances table is distributed,
// and if it is, switches the store to the statement forms for Citus.
func (s *Store) useCitus(ctx context.Context) error {
	var hasCitus, distributed bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&hasCitus); err != nil {
		return failf(err, "find out whether %s is distributed", s.schema)
	}
	if hasCitus {
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass($1))`,
			pgx.Identifier{s.schema, "instances"}.Sanitize()).Scan(&distributed)
		if err != nil {
			return failf(err, "find out whether %s is distributed", s.schema)
		}
	}
	s.setCitus(distributed)
	return nil
}

// setCitus switches the store to the statement forms of a store whose
// tables are distributed (or not).
func (s *Store) setCitus(distributed bool) {
	if distributed != s.citus {
		s.citus = distributed
		s.sql = newStatements(s.schema, distributed)
	}
}

// startCitus distributes the store's tables when opts ask for it, and
// switches the store to the statements for Citus when its tables are
// distributed.
func (s *Store) startCitus(ctx context.Context, opts Options) error {
	if opts.Citus && opts.MigrateOnStart {
		return s.Distribute(ctx)
	}
	if err := s.useCitus(ctx); err != nil {
		return err
	}
	if opts.Citus && !s.citus {
		return fmt.Errorf("postgres: schema %s is not distributed by Citus: run Distribute (chronicle migrate --citus)", s.schema)
	}
	return nil
}

// citusConflicts rewrites the conflict targets of the per-instance tables
// to their keys on a distributed store, which lead with part.
var citusConflicts = strings.NewReplacer(
	"ON CONFLICT (id)", "ON CONFLICT (part, id)",
	"ON CONFLICT (instance_id)", "ON CONFLICT (part, instance_id)",
	"ON CONFLICT (task_id)", "ON CONFLICT (part, task_id)",
	"ON CONFLICT (instance_id, seq, task_id)", "ON CONFLICT (part, instance_id, seq, task_id)",
	"ON CONFLICT (instance_id, name)", "ON CONFLICT (part, instance_id, name)",
)

// priorityShift matches the order key of a claimed task,
// $n::timestamptz - make_interval(mins => priority): Citus refuses a
// STABLE function (timestamptz - interval) of a column in an UPDATE, and
// citusForm computes the same instant in UTC timestamps, whose arithmetic
// is IMMUTABLE.
var priorityShift = regexp.MustCompile(`(\$\d+)::timestamptz - make_interval\(mins => ([a-z_.]+)\)`)

// citusShifts rewrite the park's shifts of messages' times (see
// parkShift) in UTC timestamps, for the same reason as priorityShift.
var citusShifts = func() *strings.Replacer {
	var pairs []string
	for _, col := range []string{"visible_at", "order_at"} {
		for _, op := range []string{" + ", " - "} {
			pairs = append(pairs, col+op+parkShift, "("+col+" AT TIME ZONE 'UTC'"+op+parkShift+") AT TIME ZONE 'UTC'")
		}
	}
	return strings.NewReplacer(pairs...)
}()

// citusForm returns the form of a statement (schema filled in) for a
// store distributed by Citus.
func citusForm(sql string) string {
	sql = priorityShift.ReplaceAllString(sql, "(${1}::timestamptz AT TIME ZONE 'UTC' - make_interval(mins => ${2})) AT TIME ZONE 'UTC'")
	sql = citusShifts.Replace(sql)
	return citusConflicts.Replace(sql)
}

// joinOnPart returns the join condition of two per-instance tables'
// partitions, "a.part = b.part AND ", on a distributed store, where Citus
// joins distributed tables on their distribution column only; "" on
// PostgreSQL, whose plans need not change.
func (s *Store) joinOnPart(a, b string) string {
	if !s.citus {
		return ""
	}
	return a + ".part = " + b + ".part AND "
}

// citusDeadLetterPartSQL finds the partition of a dead letter, by its id
// alone (a query of every shard): Citus locks rows (FOR UPDATE) only in a
// query of one shard.
const citusDeadLetterPartSQL = `SELECT part FROM {{schema}}.dead_letters WHERE id = $1 LIMIT 1`

// The enqueue of messages on a distributed store. The plain statement
// (enqueueMessagesSQL) inserts the rows of every partition from arrays,
// an INSERT … SELECT that Citus runs through the coordinator, and creates
// instance rows by a join Citus cannot push down. On Citus the messages
// are grouped by partition, and every statement names its partition, a
// router query of one shard:
//
//   - citusLockSQL locks the group's instance rows FOR KEY SHARE and
//     returns the ids it found;
//   - citusMessagesSQL inserts the messages by a multi-row VALUES, in
//     chunks of citusChunks rows;
//   - once those ran, citusInstancesSQL inserts the rows of the instances
//     the lock did not find, in a later round trip of the same
//     transaction. (An insert of a row that exists, even ON CONFLICT DO
//     NOTHING, waits for a round that holds the row; the plain statement
//     avoids it with NOT EXISTS, which Citus cannot route.)
const (
	citusLockSQL = `
SELECT instance_id FROM {{schema}}.instances WHERE part = $2 AND instance_id = ANY ($1::text[]) ORDER BY instance_id FOR KEY SHARE`
	// citusStartSQL creates the row of a started instance (EnqueueStart);
	// a unique violation tells that it exists.
	citusStartSQL = `INSERT INTO {{schema}}.instances (part, instance_id) VALUES ($1, $2)`
	// citusAnyMessagesSQL is anyMessagesSQL for the instances of one
	// partition.
	citusAnyMessagesSQL = `
SELECT EXISTS (SELECT 1 FROM {{schema}}.messages WHERE part = $2 AND instance_id = ANY ($1::text[]))`
)

// citusChunks are the row counts of the multi-row inserts: n rows are
// inserted in chunks of these sizes, largest first, so that a connection
// prepares at most len(citusChunks) texts of each insert.
var citusChunks = []int{64, 32, 16, 8, 4, 2, 1}

// chunk returns the size of the next chunk of n rows.
func chunk(n int) int {
	for _, c := range citusChunks {
		if c <= n {
			return c
		}
	}
	return 1
}

// chunks yields rows cut into the chunks of the multi-row inserts, in
// order (see chunk).
func chunks[T any](rows []T) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		for len(rows) > 0 {
			n := chunk(len(rows))
			if !yield(rows[:n]) {
				return
			}
			rows = rows[n:]
		}
	}
}

// valuesSQL returns an INSERT of n rows into columns, each value cast to
// the type of its column ($k::type).
func valuesSQL(head string, types []string, n int, tail string) string {
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(" VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for j, typ := range types {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "$%d::%s", i*len(types)+j+1, typ)
		}
		b.WriteString(")")
	}
	b.WriteString(tail)
	return b.String()
}

// citusMessagesSQL returns the insert of n messages.
func citusMessagesSQL(n int) string {
	return valuesSQL("INSERT INTO {{schema}}.messages (part, id, instance_id, visible_at, attempts, last_error, envelope, order_at)",
		[]string{"int", "text", "text", "timestamptz", "int", "text", "bytea", "timestamptz"}, n, " ON CONFLICT (part, id) DO NOTHING")
}

// citusInstancesSQL returns the insert of the rows of n instances.
func citusInstancesSQL(n int) string {
	return valuesSQL("INSERT INTO {{schema}}.instances (part, instance_id)", []string{"int", "text"}, n, " ON CONFLICT DO NOTHING")
}

// partGroups returns the indexes of parts grouped by partition, the
// partitions in ascending order and each group in input order.
func partGroups(parts []int32) (order []int32, groups map[int32][]int) {
	groups = map[int32][]int{}
	for i, p := range parts {
		if _, ok := groups[p]; !ok {
			order = append(order, p)
		}
		groups[p] = append(groups[p], i)
	}
	slices.Sort(order)
	return order, groups
}

// queueLock queues on b the FOR KEY SHARE lock of the rows of instances
// (of partitions parts) that an enqueue takes (see lockInstancesSQL). On
// Citus found, when not nil, gets the ids of the rows found.
func (s *Store) queueLock(b *pgx.Batch, instances []string, parts []int32, found func(ids []string)) {
	if !s.citus {
		b.Queue(s.sql.lockInstances, instances, parts)
		return
	}
	order, groups := partGroups(parts)
	for _, p := range order {
		seen := map[string]bool{}
		ids := make([]string, 0, len(groups[p]))
		for _, i := range groups[p] {
			if !seen[instances[i]] {
				seen[instances[i]] = true
				ids = append(ids, instances[i])
			}
		}
		b.Queue(s.sql.citusLock, ids, p).Query(func(rows pgx.Rows) error {
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err == nil && found != nil {
				found(got)
			}
			return err
		})
	}
}

// queueInstances queues on b the insert of the rows of instances (of
// partitions parts) that are not in found.
func (s *Store) queueInstances(b *pgx.Batch, instances []string, parts []int32, found map[string]bool) {
	order, groups := partGroups(parts)
	for _, p := range order {
		var ids []string
		for _, i := range groups[p] {
			if !found[instances[i]] {
				found[instances[i]] = true
				ids = append(ids, instances[i])
			}
		}
		for c := range chunks(ids) {
			args := make([]any, 0, 2*len(c))
			for _, id := range c {
				args = append(args, p, id)
			}
			b.Queue(s.sql.citusInstances[len(c)], args...)
		}
	}
}

// queueEnqueue queues on b the statements that enqueue the messages of a,
// after the lock of their instances' rows; once the batch ran them, done
// (if not nil) gets the count of messages inserted. On Citus the rows of
// instances that have none are inserted by statements the batch's
// callbacks queue on later(), a batch the caller sends after b in the
// same transaction; a nil later means that every instance has its row
// already (the round holds it), and queues neither lock nor insert.
func (s *Store) queueEnqueue(b *pgx.Batch, a *messageArgs, later func() *pgx.Batch, done func(inserted int64) error) {
	if !s.citus {
		if later != nil {
			b.Queue(s.sql.lockInstances, a.instances, a.parts)
		}
		b.Queue(s.sql.enqueueMessages, a.args()...).QueryRow(func(row pgx.Row) error {
			var n int64
			if err := row.Scan(&n); err != nil {
				return err
			}
			if done != nil {
				return done(n)
			}
			return nil
		})
		return
	}
	if later != nil {
		found := map[string]bool{}
		groups := 0
		order, _ := partGroups(a.parts)
		s.queueLock(b, a.instances, a.parts, func(ids []string) {
			for _, id := range ids {
				found[id] = true
			}
			if groups++; groups == len(order) {
				next := &pgx.Batch{}
				s.queueInstances(next, a.instances, a.parts, found)
				if next.Len() > 0 {
					l := later()
					l.QueuedQueries = append(l.QueuedQueries, next.QueuedQueries...)
				}
			}
		})
	}
	order, groups := partGroups(a.parts)
	var total int64
	var last *pgx.QueuedQuery
	for _, p := range order {
		for c := range chunks(groups[p]) {
			args := make([]any, 0, 8*len(c))
			for _, i := range c {
				args = append(args, p, a.ids[i], a.instances[i], a.visible[i], a.attempts[i], a.errors[i], a.envelopes[i], a.order[i])
			}
			last = b.Queue(s.sql.citusMessages[len(c)], args...)
			last.Exec(func(ct pgconn.CommandTag) error {
				total += ct.RowsAffected()
				return nil
			})
		}
	}
	if last != nil {
		last.Exec(func(ct pgconn.CommandTag) error {
			total += ct.RowsAffected()
			if done != nil {
				return done(total)
			}
			return nil
		})
	}
}

// sendAll sends b on db, then the statements its callbacks queued on
// *next, until none are left; db must be a transaction for them to be
// atomic.
func sendAll(ctx context.Context, db dbtx, b *pgx.Batch, next **pgx.Batch) error {
	for b != nil && b.Len() > 0 {
		*next = nil
		if err := db.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		b = *next
	}
	return nil
}

// laterOf returns a later function for queueEnqueue that queues on *next.
func laterOf(next **pgx.Batch) func() *pgx.Batch {
	return func() *pgx.Batch {
		if *next == nil {
			*next = &pgx.Batch{}
		}
		return *next
	}
}

// citusCompleteActivity is completeActivity on a distributed store, in a
// transaction of two round trips: the result's instance locked and the
// task deleted while the token matches (router queries), and only when
// it was, the result enqueued. (The plain statement guards the inserts
// with the delete in one statement of data-modifying CTEs, which Citus
// runs as several distributed subplans.)
func (s *Store) citusCompleteActivity(ctx context.Context, p *provider.CompleteActivityParams, a *messageArgs) error {
	var inserted int64
	err := s.inTx(ctx, "complete activity task "+p.TaskID, func(tx pgx.Tx) error {
		part := s.part(p.Result.InstanceID)
		var done int64
		found := map[string]bool{}
		b := &pgx.Batch{}
		s.queueLock(b, a.instances, a.parts, func(ids []string) {
			for _, id := range ids {
				found[id] = true
			}
		})
		b.Queue(s.sql.deleteTask, p.TaskID, p.Token, part).QueryRow(func(row pgx.Row) error { return row.Scan(&done) })
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return failf(err, "complete activity task %s", p.TaskID)
		}
		if done == 0 {
			return leaseLost(p.TaskID)
		}
		b = &pgx.Batch{}
		s.queueInstances(b, a.instances, a.parts, found)
		s.queueEnqueue(b, a, nil, func(n int64) error { inserted = n; return nil })
		return failf(tx.SendBatch(ctx, b).Close(), "complete activity task %s", p.TaskID)
	})
	if err != nil {
		return err
	}
	if inserted > 0 {
		s.announce(provider.QueueOrchestration, a.parts)
	}
	return nil
}

// citusEnqueueStart is EnqueueStart on a distributed store, in one round
// trip of router queries: the instance's row inserted without ON
// CONFLICT, then the messages, in one batch, whose implicit transaction a
// unique violation of the row (the instance exists) rolls back whole. As
// with ON CONFLICT, a concurrent insert of the row makes it wait for that
// one's commit and then find it. (The plain statement guards the messages
// with the row's insert in data-modifying CTEs, which Citus runs as
// subplans.)
func (s *Store) citusEnqueueStart(ctx context.Context, p *provider.EnqueueStartParams, a *messageArgs) (bool, error) {
	var inserted int64
	b := &pgx.Batch{}
	b.Queue(s.sql.citusStart, s.part(p.InstanceID), p.InstanceID)
	if len(a.ids) > 0 {
		s.queueEnqueue(b, a, nil, func(n int64) error { inserted = n; return nil })
	}
	err := s.rc.SendBatch(ctx, b).Close()
	// The row's insert is the batch's only one without ON CONFLICT (and
	// Citus relays a worker's error without the constraint's name).
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeUniqueViolation {
		return false, nil
	}
	if err != nil {
		return false, failf(err, "start of %s", p.InstanceID)
	}
	if inserted > 0 {
		s.announce(provider.QueueOrchestration, []int32{s.part(p.InstanceID)})
	}
	return true, nil
}

// shardCount is the shard count of a distributed store's tables: one
// shard per partition, at most 32 (Citus's default). More shards than
// partitions would stay empty; a shard holding several partitions moves
// between nodes with all of them.
func (s *Store) shardCount() int { return min(max(s.partitions, 1), 32) }

// citusAppendCheckSQL tells whether an append whose first event is $3
// continues the stored log of an instance: nothing at or after it, and its
// predecessor present (appendHistorySQL's guard, a router query).
const citusAppendCheckSQL = `
SELECT NOT EXISTS (SELECT 1 FROM {{schema}}.history h WHERE h.part = $2 AND h.instance_id = $1 AND h.seq >= $3)
  AND ($3 = 1 OR EXISTS (SELECT 1 FROM {{schema}}.history h WHERE h.part = $2 AND h.instance_id = $1 AND h.seq = $3 - 1))`

// citusHistorySQL returns the insert of n events, each row (part,
// instance_id, seq, execution_id, kind, class, correlation_id, at, hash,
// event).
func citusHistorySQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO {{schema}}.history (part, instance_id, seq, execution_id, kind, class, correlation_id, at, hash, event) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		p := i*10 + 1
		fmt.Fprintf(&b, "($%d::int, $%d::text, $%d::bigint, $%d::text, $%d::text, nullif($%d::text, ''), $%d::text, $%d::timestamptz, $%d::bytea, $%d::bytea)",
			p, p+1, p+2, p+3, p+4, p+5, p+6, p+7, p+8, p+9)
	}
	return b.String()
}

// citusAppend is the append of citusAppendHistory: its
// guard (citusAppendCheckSQL) in one round trip, then, when the append
// continues the log, the events inserted by multi-row VALUES under the
// savepoint chronicle_append, router queries all. It returns the count
// inserted: 0 when the guard failed or an insert met a unique key (a
// concurrent append, a used idempotency key), after rolling back to the
// savepoint; citusAppendHistory then finds out which.
func (s *Store) citusAppend(ctx context.Context, tx pgx.Tx, a *appendArgs) (int64, error) {
	var ok bool
	if err := tx.QueryRow(ctx, s.sql.citusAppendCheck, a.id, a.part, a.first).Scan(&ok); err != nil {
		return 0, err
	}
	if !ok {
		return 0, nil
	}
	b := &pgx.Batch{}
	b.Queue(`SAVEPOINT chronicle_append`)
	var inserted int64
	for i := 0; i < len(a.seqs); {
		n := 1
		for _, c := range citusChunks {
			if c <= len(a.seqs)-i {
				n = c
				break
			}
		}
		args := make([]any, 0, 10*n)
		for j := i; j < i+n; j++ {
			args = append(args, a.part, a.id, a.seqs[j], a.executions[j], a.kinds[j], a.classes[j], a.correlations[j], a.ats[j], a.hashes[j], a.blobs[j])
		}
		b.Queue(s.sql.citusHistory[n], args...).Exec(func(ct pgconn.CommandTag) error {
			inserted += ct.RowsAffected()
			return nil
		})
		i += n
	}
	b.Queue(`RELEASE SAVEPOINT chronicle_append`)
	err := tx.SendBatch(ctx, b).Close()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeUniqueViolation {
		if _, rbErr := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT chronicle_append`); rbErr != nil {
			return 0, rbErr
		}
		return 0, nil
	}
	return inserted, err
}

// newToken returns the token of a claim on a distributed store: 128
// random bits, to which the claim statement appends the task's id, so
// that every claim of a task has a token of its own.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error: it crashes the program instead
	return hex.EncodeToString(b[:])
}

// The enqueue of activity tasks on a distributed store. The plain
// statement (enqueueActivitiesSQL) records the new task ids and inserts
// their tasks in one statement of data-modifying CTEs, which Citus runs as
// subplans through the coordinator. On Citus citusTaskIDsSQL records the
// ids by a multi-row VALUES … RETURNING the ids it inserted (a router
// query per partition), and, once the round trip returned them,
// citusTasksSQL inserts those tasks, deferred with the round's next
// writes.

// citusTaskIDsSQL returns the insert of n task ids.
func citusTaskIDsSQL(n int) string {
	return valuesSQL("INSERT INTO {{schema}}.activity_task_ids (part, id, instance_id)", []string{"int", "text", "text"}, n,
		" ON CONFLICT DO NOTHING RETURNING id")
}

// citusTasksSQL returns the insert of n activity tasks, queued (token,
// owner and locked_until NULL) or claimed.
func citusTasksSQL(n int) string {
	return valuesSQL("INSERT INTO {{schema}}.activity_tasks (part, id, instance_id, execution_id, queue, ready_at, envelope, "+
		"priority, order_at, name, concurrency_key, concurrency_limit, token, owner, locked_until)",
		[]string{"int", "text", "text", "text", "text", "timestamptz", "bytea", "int", "timestamptz", "text", "text", "int", "text", "text", "timestamptz"},
		n, "")
}

// claimOf is the claim of a task inserted claimed.
type claimOf struct {
	token, owner string
	until        time.Time
}

// citusEnqueueActivities enqueues the tasks of args (as activityArgs
// returns them), claimed when claim is not nil, on a distributed store:
// the ids in a round trip of their own (the writes deferred before go
// with them), the tasks of the new ones deferred. done gets the count of
// tasks inserted when the insert ran.
func (t *roundTx) citusEnqueueActivities(ctx context.Context, args []any, claim *claimOf, done func(int64)) error {
	ids, instances, executions, queues := args[0].([]string), args[1].([]string), args[2].([]string), args[3].([]string)
	ready, envelopes, priorities, order := args[4].([]time.Time), args[5].([][]byte), args[6].([]int32), args[7].([]time.Time)
	names, keys, limits, parts := args[8].([]string), args[9].([]string), args[10].([]int32), args[11].([]int32)
	fresh := map[string]bool{}
	b := deferred{t}.batch()
	groupOrder, groups := partGroups(parts)
	for _, p := range groupOrder {
		for c := range chunks(groups[p]) {
			row := make([]any, 0, 3*len(c))
			for _, i := range c {
				row = append(row, p, ids[i], instances[i])
			}
			b.Queue(t.s.sql.citusTaskIDs[len(c)], row...).Query(func(rows pgx.Rows) error {
				got, err := pgx.CollectRows(rows, pgx.RowTo[string])
				for _, id := range got {
					fresh[id] = true
				}
				return err
			})
		}
	}
	if err := t.flush(ctx); err != nil {
		return err
	}
	var total int64
	var last *pgx.QueuedQuery
	for _, p := range groupOrder {
		var idx []int
		for _, i := range groups[p] {
			if fresh[ids[i]] {
				idx = append(idx, i)
			}
		}
		for c := range chunks(idx) {
			row := make([]any, 0, 15*len(c))
			for _, i := range c {
				var key, limit any
				if keys[i] != "" {
					key, limit = keys[i], limits[i]
				}
				readyAt, orderAt := ready[i], order[i]
				var token, owner, until any
				if claim != nil {
					readyAt, orderAt = claim.until, provider.OrderAt(claim.until, int(priorities[i]))
					token, owner, until = claim.token, claim.owner, claim.until
				}
				row = append(row, p, ids[i], instances[i], executions[i], queues[i], readyAt, envelopes[i],
					priorities[i], orderAt, names[i], key, limit, token, owner, until)
			}
			last = deferred{t}.batch().Queue(t.s.sql.citusTasks[len(c)], row...)
			last.Exec(func(ct pgconn.CommandTag) error {
				total += ct.RowsAffected()
				return nil
			})
		}
	}
	if last != nil && done != nil {
		last.Exec(func(ct pgconn.CommandTag) error {
			total += ct.RowsAffected()
			done(total)
			return nil
		})
	}
	return nil
}
