package oracle

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded schema change: its statements run one by one,
// each committing on its own (Oracle DDL commits), and each recorded once
// done.
type migration struct {
	version    int
	name       string
	statements []string
}

// migrations are the embedded migrations in version order.
var migrations = func() []migration {
	ms, err := loadMigrations(migrationFiles, "migrations")
	if err != nil {
		panic(fmt.Sprintf("oracle: %v", err))
	}
	return ms
}()

// loadMigrations reads the migrations of dir: files NNNN_description.sql
// with versions 1, 2, … without gaps, each holding at least one statement.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		prefix, rest, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || len(prefix) != 4 || rest == ".sql" {
			return nil, fmt.Errorf("migration %s: want a name NNNN_description.sql", name)
		}
		if v != len(out)+1 {
			return nil, fmt.Errorf("migration %s is out of sequence: want version %d", name, len(out)+1)
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		stmts, err := splitStatements(string(data))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		out = append(out, migration{version: v, name: name, statements: stmts})
	}
	return out, nil
}

// splitStatements splits a migration into its statements: each ends with
// a line holding only "/", as in SQL*Plus. Lines that are comments
// ("--") are dropped. A SQL statement must not end with ";" (the server
// refuses it); a PL/SQL block (BEGIN or DECLARE) must end with "END;".
func splitStatements(text string) ([]string, error) {
	var (
		out     []string
		current []string
	)
	flush := func(line int) error {
		stmt := strings.TrimSpace(strings.Join(current, "\n"))
		current = nil
		if stmt == "" {
			return fmt.Errorf("line %d: empty statement", line)
		}
		upper := strings.ToUpper(stmt)
		plsql := strings.HasPrefix(upper, "BEGIN") || strings.HasPrefix(upper, "DECLARE")
		switch {
		case plsql && !strings.HasSuffix(upper, "END;"):
			return fmt.Errorf("line %d: a PL/SQL block must end with END;", line)
		case !plsql && strings.HasSuffix(stmt, ";"):
			return fmt.Errorf("line %d: a SQL statement must not end with ;", line)
		}
		out = append(out, stmt)
		return nil
	}
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "/":
			if err := flush(i + 1); err != nil {
				return nil, err
			}
		case strings.HasPrefix(trimmed, "--"):
		default:
			current = append(current, strings.TrimRight(line, " \t\r"))
		}
	}
	if rest := strings.TrimSpace(strings.Join(current, "\n")); rest != "" {
		return nil, fmt.Errorf("text after the last statement: it must end with a line holding only /")
	}
	if len(out) == 0 {
		return nil, errors.New("no statements")
	}
	return out, nil
}

// LatestSchemaVersion is the schema version this package creates and
// expects: the number of its embedded migrations.
func LatestSchemaVersion() int { return len(migrations) }

// bootstrapSQL creates the migration records and the migration lock, and
// its row; each statement is a no-op when it ran before.
var bootstrapSQL = []string{`
CREATE TABLE {{obj:SCHEMA_MIGRATIONS}} (
    version    NUMBER(10) NOT NULL,
    name       VARCHAR2(200 BYTE) NOT NULL,
    steps_done NUMBER(10) DEFAULT 0 NOT NULL,
    complete   NUMBER(1) DEFAULT 0 NOT NULL,
    applied_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    CONSTRAINT {{name:SCHEMA_MIGRATIONS_PK}} PRIMARY KEY (version)
)`, `
CREATE TABLE {{obj:MIGRATION_LOCK}} (
    id NUMBER(1) NOT NULL,
    CONSTRAINT {{name:MIGRATION_LOCK_PK}} PRIMARY KEY (id)
)`, `
INSERT INTO {{obj:MIGRATION_LOCK}} (id)
SELECT 1 FROM dual WHERE NOT EXISTS (SELECT 1 FROM {{obj:MIGRATION_LOCK}})`,
}

// Statements of the migrator on its records.
const (
	migrationLockSQL  = `SELECT id FROM {{obj:MIGRATION_LOCK}} WHERE id = 1 FOR UPDATE`
	migrationStateSQL = `SELECT version, steps_done, complete FROM {{obj:SCHEMA_MIGRATIONS}}`
	migrationStartSQL = `INSERT INTO {{obj:SCHEMA_MIGRATIONS}} (version, name) VALUES (:version, :name)`
	migrationStepSQL  = `UPDATE {{obj:SCHEMA_MIGRATIONS}} SET steps_done = :steps, applied_at = SYSTIMESTAMP WHERE version = :version`
	migrationDoneSQL  = `UPDATE {{obj:SCHEMA_MIGRATIONS}} SET complete = 1, applied_at = SYSTIMESTAMP WHERE version = :version`
	schemaVersionSQL  = `SELECT NVL(MAX(version), 0) FROM {{obj:SCHEMA_MIGRATIONS}} WHERE complete = 1`
)

// Migrate brings the store's objects to [LatestSchemaVersion]. Oracle
// commits every DDL statement on its own, so a migration cannot be one
// transaction: the migrator holds a row lock on <PREFIX>_MIGRATION_LOCK
// (SELECT … FOR UPDATE in a transaction of a session of its own, kept
// open until it is done; a lock taken by the session that runs the DDL
// would end with its first commit), runs the statements on a second
// session, and records in <PREFIX>_SCHEMA_MIGRATIONS each statement as it
// completes. Nodes that start together migrate once: the others wait for
// the lock, then find nothing to do. A migration cut short resumes at the
// statement it was in, which is allowed to find its object made already.
// Migrating an up-to-date schema does nothing. It returns the version
// reached. It needs two connections of the pool at once.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	v, err := migrate(ctx, s.db, s.names, migrations)
	if err != nil {
		return 0, fmt.Errorf("oracle: migrate %s.%s: %w", s.names.schema, s.names.prefix, err)
	}
	return v, nil
}

func migrate(ctx context.Context, db *sql.DB, n names, ms []migration) (int, error) {
	for i, stmt := range bootstrapSQL {
		_, err := db.ExecContext(ctx, n.render(stmt))
		if err != nil && !alreadyExists(err) && !isDuplicate(err) {
			return 0, fmt.Errorf("create the migration records (step %d): %w", i+1, translate(err))
		}
	}
	lockConn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("lock: %w", translate(err))
	}
	defer func() { _ = lockConn.Close() }()
	lockTx, err := lockConn.BeginTx(ctx, readCommitted)
	if err != nil {
		return 0, fmt.Errorf("lock: %w", translate(err))
	}
	// Rolling back releases the lock; nothing was written in it.
	defer func() { _ = lockTx.Rollback() }()
	var one int64
	if err := lockTx.QueryRowContext(ctx, n.render(migrationLockSQL)).Scan(intScan{&one}); err != nil {
		return 0, fmt.Errorf("lock: %w", translate(err))
	}
	work, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", translate(err))
	}
	defer func() { _ = work.Close() }()
	type state struct {
		steps    int64
		complete bool
	}
	applied := map[int64]state{}
	rows, err := work.QueryContext(ctx, n.render(migrationStateSQL))
	if err != nil {
		return 0, fmt.Errorf("read the applied migrations: %w", translate(err))
	}
	for rows.Next() {
		var version, steps, complete int64
		if err := rows.Scan(intScan{&version}, intScan{&steps}, intScan{&complete}); err != nil {
			rows.Close()
			return 0, fmt.Errorf("read the applied migrations: %w", translate(err))
		}
		applied[version] = state{steps: steps, complete: complete == 1}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read the applied migrations: %w", translate(err))
	}
	for v, st := range applied {
		if st.complete && int(v) > len(ms) {
			return 0, fmt.Errorf("the schema is at version %d, newer than this package's %d", v, len(ms))
		}
	}
	version := 0
	for _, m := range ms {
		st, resumed := applied[int64(m.version)]
		if st.complete {
			version = m.version
			continue
		}
		if !resumed {
			if _, err := work.ExecContext(ctx, n.render(migrationStartSQL), named("version", int64(m.version)), named("name", m.name)); err != nil {
				return 0, fmt.Errorf("record %s: %w", m.name, translate(err))
			}
		}
		for k := int(st.steps); k < len(m.statements); k++ {
			_, err := work.ExecContext(ctx, n.render(m.statements[k]))
			// The statement a cut-short run was in may have done its work
			// before the record of it was written.
			if err != nil && !(resumed && k == int(st.steps) && alreadyExists(err)) {
				return 0, fmt.Errorf("apply %s, statement %d: %w", m.name, k+1, translate(err))
			}
			if _, err := work.ExecContext(ctx, n.render(migrationStepSQL), named("steps", int64(k+1)), named("version", int64(m.version))); err != nil {
				return 0, fmt.Errorf("record %s, statement %d: %w", m.name, k+1, translate(err))
			}
		}
		if _, err := work.ExecContext(ctx, n.render(migrationDoneSQL), named("version", int64(m.version))); err != nil {
			return 0, fmt.Errorf("record %s: %w", m.name, translate(err))
		}
		version = m.version
	}
	return version, nil
}

// SchemaVersion returns the version of the store's objects: the highest
// migration completed, 0 when none is (or its records do not exist yet).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, s.names.render(schemaVersionSQL)).Scan(intScan{&v})
	if oracleCode(err) == codeNoSuchTable {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("oracle: read the schema version of %s.%s: %w", s.names.schema, s.names.prefix, translate(err))
	}
	return int(v), nil
}

// dropSQL removes every object the migrations create, the queue first.
var dropSQL = func() []string {
	out := []string{
		`BEGIN DBMS_AQADM.STOP_QUEUE(queue_name => '{{aq:WQ}}'); END;`,
		`BEGIN DBMS_AQADM.DROP_QUEUE_TABLE(queue_table => '{{aq:WQT}}', force => TRUE); END;`,
	}
	for _, t := range append(append([]string{}, dataTables...), tableSchemaMigrations, tableMigrationLock) {
		out = append(out, `DROP TABLE {{obj:`+t+`}} CASCADE CONSTRAINTS PURGE`)
	}
	return append(out, `DROP SEQUENCE {{obj:`+sequenceLeaseTokens+`}}`)
}()

// DropObjects removes every object the migrations created under schema
// and prefix (validated as in [Options]), with all their data: the wake
// queue and its queue table, the tables and the sequence. Objects already
// gone are skipped. It is for tests and for uninstalling; nothing else
// calls it.
func DropObjects(ctx context.Context, db *sql.DB, schema, prefix string) error {
	var errs []error
	if err := ValidateSchema(schema); err != nil {
		errs = append(errs, err)
	}
	if err := ValidatePrefix(prefix); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
	}
	n := names{schema: strings.ToUpper(schema), prefix: strings.ToUpper(prefix)}
	for i, stmt := range dropSQL {
		_, err := db.ExecContext(ctx, n.render(stmt))
		// Stopping a queue that is gone fails like dropping it.
		if err != nil && !alreadyGone(err) && i > 0 {
			return fmt.Errorf("oracle: drop %s.%s: %w", n.schema, n.prefix, translate(err))
		}
	}
	return nil
}
