package oracle

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
	"github.com/chronicleflow/chronicle/provider/providertest"
)

// No Oracle server runs in CI, so TestFlowConformanceOnPostgres runs the
// conformance cases of priority, activity limits and slots
// (providertest's Priority, ActivityLimits and Slots groups), and the
// queue and activity groups whose statements they change, on a store
// whose statements go to PostgreSQL through a driver that rewrites the
// little Oracle SQL they use that PostgreSQL spells otherwise: binds
// (:name to typed $n), FROM dual, NVL, ROWNUM = 1, the token sequence and
// RETURNING … INTO, '' bound as NULL, and a failed statement rolling back
// alone. The schema is the package's migrations, translated the same way
// (types, virtual columns as stored ones). It checks the statements'
// columns, conditions, order and the Go code around them, and the row
// locks that serialize concurrency keys, rate windows and slot sets
// (PostgreSQL's READ COMMITTED re-checks an UPDATE's condition on the row
// it waited for, as Oracle does). What it cannot check is Oracle itself:
// its parser, plans and locking details; the gated suite does.

// pgFlowGroups are the groups of providertest.Exercise that run on the
// translation.
var pgFlowGroups = []string{
	"Priority", "ActivityLimits", "Slots",
	"Queue", "Activities", "ActivityExpiry", "ConcurrentActivities", "AbandonMessages", "ListQueuedActivities", "EnqueueStart",
}

// envFlowChild marks the child process that runs the conformance groups.
const envFlowChild = "CHRONICLE_ORACLE_FLOW_ON_PG"

func TestFlowConformanceOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	if os.Getenv(envFlowChild) == "" {
		t.Parallel()
		// Only some groups of the suite can run on this translation
		// (others append history with INSERT ALL, or use Oracle's MERGE),
		// and Exercise runs every group: a child process runs it filtered
		// to the flow groups and to the queue and activity groups whose
		// statements the flow changed.
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run",
			"^TestFlowConformanceOnPostgres$/^("+strings.Join(pgFlowGroups, "|")+")$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), envFlowChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the groups on PostgreSQL: %v\n%s", err, out)
		}
		for _, group := range pgFlowGroups {
			if !strings.Contains(string(out), "--- PASS: TestFlowConformanceOnPostgres/"+group+" ") {
				t.Errorf("group %s did not pass:\n%s", group, out)
			}
		}
		return
	}
	providertest.Exercise(t, func(t *testing.T) provider.Store { return pgFlowStore(t, url) })
}

// pgFlowStore returns a store on a new PostgreSQL schema holding the
// translated migrations.
func pgFlowStore(t *testing.T, url string) *Store {
	t.Helper()
	schema := pgtest.Schema(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(&pgOracleConnector{inner: stdlib.GetConnector(*cfg)})
	t.Cleanup(func() { _ = db.Close() })
	n := names{schema: schema, prefix: "CHRONICLE"}
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations {
		for _, stmt := range m.statements {
			ddl, ok := pgDDL(n.render(stmt))
			if !ok {
				continue
			}
			if _, err := db.ExecContext(ctx, ddl); err != nil {
				t.Fatalf("%s: %v\n%s", m.name, err, ddl)
			}
		}
	}
	return &Store{
		db: db, names: n, sql: newStatements(n), log: slog.New(slog.DiscardHandler),
		listenWait: time.Second, locked: map[string]int{},
	}
}

var (
	pgTypes = strings.NewReplacer(
		"BINARY_DOUBLE", "double precision", "BLOB", "bytea", "CLOB", "text",
		"TIMESTAMP WITH TIME ZONE", "timestamptz",
	)
	pgNumber   = regexp.MustCompile(`NUMBER\(\d+\)`)
	pgVarchar  = regexp.MustCompile(`VARCHAR2\(\d+ BYTE\)`)
	pgRaw      = regexp.MustCompile(`RAW\(\d+\)`)
	pgIdentity = regexp.MustCompile(`GENERATED ALWAYS AS IDENTITY \([^)]*\)`)
	pgVirtual  = regexp.MustCompile(`NUMBER GENERATED ALWAYS AS \((.*)\) VIRTUAL`)
	pgIndex    = regexp.MustCompile(`^CREATE (UNIQUE )?INDEX "[^"]+"\.`)
	pgAddCols  = regexp.MustCompile(`(?s)^(ALTER TABLE \S+) ADD \((.*)\)$`)
	pgCase     = regexp.MustCompile(`CASE WHEN [^,]*? END`)
)

// pgDDL translates a statement of a migration; false for the AQ blocks.
func pgDDL(stmt string) (string, bool) {
	if strings.HasPrefix(stmt, "BEGIN") || strings.HasPrefix(stmt, "DECLARE") {
		return "", false
	}
	stmt = pgVirtual.ReplaceAllString(stmt, "numeric GENERATED ALWAYS AS ($1) STORED")
	stmt = pgIdentity.ReplaceAllString(stmt, "GENERATED ALWAYS AS IDENTITY")
	stmt = pgNumber.ReplaceAllString(stmt, "bigint")
	stmt = pgVarchar.ReplaceAllString(stmt, `text COLLATE "C"`)
	stmt = pgRaw.ReplaceAllString(stmt, "bytea")
	stmt = pgTypes.Replace(stmt)
	stmt = pgIndex.ReplaceAllString(stmt, "CREATE ${1}INDEX ")
	if strings.HasPrefix(stmt, "CREATE UNIQUE INDEX") {
		stmt = pgCase.ReplaceAllString(stmt, "($0)") // an expression of an index is in parentheses
	}
	if m := pgAddCols.FindStringSubmatch(stmt); m != nil {
		var cols []string
		for _, line := range strings.Split(m[2], "\n") {
			if line = strings.TrimSuffix(strings.TrimSpace(line), ","); line != "" {
				cols = append(cols, "ADD COLUMN "+line)
			}
		}
		stmt = m[1] + " " + strings.Join(cols, ", ")
	}
	return stmt, true
}

// pgOracleConnector opens connections that take the store's Oracle SQL.
type pgOracleConnector struct{ inner driver.Connector }

func (c *pgOracleConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgOracleConn{inner: conn}, nil
}

func (c *pgOracleConnector) Driver() driver.Driver { return c.inner.Driver() }

type pgOracleConn struct {
	inner driver.Conn
	inTx  bool
}

func (c *pgOracleConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no prepare") }
func (c *pgOracleConn) Close() error                        { return c.inner.Close() }
func (c *pgOracleConn) Begin() (driver.Tx, error) {
	return nil, errors.New("no Begin without a context")
}

func (c *pgOracleConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.inner.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return &pgOracleTx{inner: tx, conn: c}, nil
}

func (c *pgOracleConn) CheckNamedValue(*driver.NamedValue) error { return nil }

type pgOracleTx struct {
	inner driver.Tx
	conn  *pgOracleConn
}

func (t *pgOracleTx) Commit() error   { t.conn.inTx = false; return pgError(t.inner.Commit()) }
func (t *pgOracleTx) Rollback() error { t.conn.inTx = false; return t.inner.Rollback() }

// pgOracleError carries the ORA- code of a PostgreSQL error, as godror's
// errors do.
type pgOracleError struct {
	code int
	err  error
}

func (e *pgOracleError) Error() string { return fmt.Sprintf("ORA-%05d: %v", e.code, e.err) }
func (e *pgOracleError) Code() int     { return e.code }
func (e *pgOracleError) Unwrap() error { return e.err }

func pgError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505":
			return &pgOracleError{codeUniqueViolation, err}
		case "40P01":
			return &pgOracleError{codeDeadlock, err}
		}
	}
	return err
}

var (
	pgBind      = regexp.MustCompile(`'[^']*'|::[a-z]+|:[A-Za-z][A-Za-z0-9_$#]*`)
	pgNextval   = regexp.MustCompile(`TO_CHAR\(("[^"]+"\."[^"]+")\.NEXTVAL\)`)
	pgReturning = regexp.MustCompile(`RETURNING (\w+) INTO :(\w+)$`)
	pgDual      = regexp.MustCompile(`\s+FROM dual\b`)
)

// translate rewrites a statement and its named binds for PostgreSQL; out
// is the destination of a RETURNING … INTO, if any.
func pgTranslate(query string, args []driver.NamedValue) (string, []driver.NamedValue, *sql.Out, error) {
	var out *sql.Out
	if m := pgReturning.FindStringSubmatch(query); m != nil {
		query = strings.TrimSuffix(query, m[0]) + "RETURNING " + m[1]
		for _, a := range args {
			if o, ok := a.Value.(sql.Out); ok && a.Name == m[2] {
				out = &o
			}
		}
	}
	query = pgNextval.ReplaceAllString(query, `nextval('$1')::text`)
	query = pgDual.ReplaceAllString(query, "")
	query = strings.NewReplacer("NVL(", "COALESCE(", " AND ROWNUM = 1", "").Replace(query)
	byName := map[string]driver.Value{}
	for _, a := range args {
		if _, ok := a.Value.(sql.Out); ok {
			continue
		}
		v := a.Value
		if s, ok := v.(string); ok && s == "" {
			v = nil // Oracle binds '' as NULL
		}
		byName[strings.ToLower(a.Name)] = v
	}
	index := map[string]int{}
	var pos []driver.NamedValue
	var missing error
	query = pgBind.ReplaceAllStringFunc(query, func(m string) string {
		if strings.HasPrefix(m, "'") || strings.HasPrefix(m, "::") {
			return m // a literal, or a cast of the translation
		}
		name := strings.ToLower(m[1:])
		v, ok := byName[name]
		if !ok {
			missing = fmt.Errorf("bind %s has no value", m)
			return m
		}
		i, seen := index[name]
		if !seen {
			pos = append(pos, driver.NamedValue{Ordinal: len(pos) + 1, Value: v})
			i = len(pos)
			index[name] = i
		}
		cast := ""
		switch a := args[slicesIndex(args, name)].Value.(type) {
		case string:
			cast = "::text"
		case int64, int:
			cast = "::bigint"
		case []byte:
			cast = "::bytea"
		case nil:
		default:
			missing = fmt.Errorf("bind %s: unexpected %T", m, a)
		}
		return "($" + strconv.Itoa(i) + cast + ")"
	})
	return query, pos, out, missing
}

func slicesIndex(args []driver.NamedValue, name string) int {
	for i, a := range args {
		if strings.EqualFold(a.Name, name) {
			return i
		}
	}
	return 0
}

func (c *pgOracleConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	trimmed := strings.TrimSpace(query)
	if strings.HasPrefix(trimmed, "DECLARE") || strings.HasPrefix(trimmed, "BEGIN") {
		// The AQ wake-up: no queue here.
		for _, a := range args {
			if o, ok := a.Value.(sql.Out); ok {
				if p, ok := o.Dest.(*string); ok {
					*p = ""
				}
			}
		}
		return driver.RowsAffected(0), nil
	}
	q, pos, out, err := pgTranslate(trimmed, args)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, query)
	}
	exec := c.inner.(driver.ExecerContext)
	// A failed statement rolls back alone in Oracle; in PostgreSQL it
	// ends the transaction, unless a savepoint takes it back.
	guard := c.inTx && !strings.Contains(q, "SAVEPOINT")
	if guard {
		if _, err := exec.ExecContext(ctx, "SAVEPOINT ora_statement", nil); err != nil {
			return nil, err
		}
	}
	var res driver.Result
	if out != nil {
		var rows driver.Rows
		rows, err = c.inner.(driver.QueryerContext).QueryContext(ctx, q, pos)
		if err == nil {
			dest := make([]driver.Value, 1)
			if err = rows.Next(dest); err == nil {
				*out.Dest.(*string) = fmt.Sprint(dest[0])
				res = driver.RowsAffected(1)
			}
			_ = rows.Close()
		}
	} else {
		res, err = exec.ExecContext(ctx, q, pos)
	}
	if guard {
		end := "RELEASE SAVEPOINT ora_statement"
		if err != nil {
			end = "ROLLBACK TO SAVEPOINT ora_statement"
		}
		if _, err := exec.ExecContext(ctx, end, nil); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", pgError(err), q)
	}
	return res, nil
}

func (c *pgOracleConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, pos, _, err := pgTranslate(strings.TrimSpace(query), args)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, query)
	}
	rows, err := c.inner.(driver.QueryerContext).QueryContext(ctx, q, pos)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", pgError(err), q)
	}
	return rows, nil
}
