package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded migrations in version order. File names are
// NNNN_description.sql with versions 1, 2, … without gaps.
var migrations = func() []migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(fmt.Sprintf("postgres: read embedded migrations: %v", err))
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		prefix, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v != len(out)+1 {
			panic(fmt.Sprintf("postgres: embedded migration %s is out of sequence", name))
		}
		data, err := migrationFiles.ReadFile(path.Join("migrations", name))
		if err != nil {
			panic(fmt.Sprintf("postgres: read embedded migration %s: %v", name, err))
		}
		out = append(out, migration{version: v, name: name, sql: string(data)})
	}
	return out
}()

// LatestSchemaVersion is the schema version this package creates and
// expects: the number of its embedded migrations.
func LatestSchemaVersion() int { return len(migrations) }

// Migrate brings the store's schema to [LatestSchemaVersion], creating the
// schema if needed. It runs in one transaction under a transaction-level
// advisory lock derived from the schema name, so nodes starting together
// migrate once and the others wait, then find nothing to do. Migrating an
// up-to-date schema does nothing. It returns the version reached.
//
// A schema created by Migrate (from version 0) records the partition count
// of [Options].Partitions (1 when it is 0); a schema migrated from an
// earlier version has one partition.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	v, err := migrate(ctx, s.pool, s.schema, len(migrations), s.createPartitions)
	if err == nil && v >= partitionsMigration {
		// A schema this call created has the count just recorded.
		err = s.readPartitions(ctx)
	}
	return v, err
}

// partitionsMigration is the version of the migration that creates
// store_settings.
const partitionsMigration = 9

// SchemaVersion returns the version of the store's schema: the highest
// migration applied, 0 when the schema or its migrations table does not
// exist yet.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.pool, s.schema)
}

// migrationsTable returns the DDL of the migrations table of a schema.
func migrationsTable(ident string) string {
	return `CREATE TABLE IF NOT EXISTS ` + ident + `.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
}

// migrationLockKey is the advisory lock key of a schema's migrations.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("chronicle/migrate/" + schema))
	return int64(h.Sum64())
}

// migrate applies the migrations up to version upTo.
// A schema created from version 0 up to partitionsMigration or later
// records partitions as its partition count.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, upTo, partitions int) (version int, err error) {
	ident := pgx.Identifier{schema}.Sanitize()
	err = pgx.BeginTxFunc(ctx, pool, readCommitted, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey(schema)); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+ident); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		if _, err := tx.Exec(ctx, migrationsTable(ident)); err != nil {
			return fmt.Errorf("create migrations table: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+ident+`.schema_migrations`).Scan(&version); err != nil {
			return fmt.Errorf("read version: %w", err)
		}
		if version > len(migrations) {
			return fmt.Errorf("schema %s is at version %d, newer than this package's %d", schema, version, len(migrations))
		}
		created := version == 0
		for _, m := range migrations[min(version, upTo):upTo] {
			if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{{schema}}", ident)); err != nil {
				return fmt.Errorf("apply %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+ident+`.schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return fmt.Errorf("record %s: %w", m.name, err)
			}
			version = m.version
		}
		if created && version >= partitionsMigration && partitions > 1 {
			if _, err := tx.Exec(ctx, `UPDATE `+ident+`.store_settings SET partitions = $1`, partitions); err != nil {
				return fmt.Errorf("record the partition count: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: migrate schema %s: %w", schema, translate(err))
	}
	return version, nil
}

func schemaVersion(ctx context.Context, pool *pgxpool.Pool, schema string) (int, error) {
	var version int
	err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&version)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == codeUndefinedTable || pgErr.Code == codeInvalidSchemaName) {
		return 0, nil // undefined table or schema: nothing applied
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: read schema version of %s: %w", schema, translate(err))
	}
	return version, nil
}

// createdBy maps what the migrations create to the migration that creates
// it: "table" for CREATE TABLE, "table.column" and ".column" for ADD
// COLUMN.
var createdBy = func() map[string]string {
	tables := regexp.MustCompile(`(?i)CREATE TABLE \{\{schema\}\}\.(\w+)`)
	columns := regexp.MustCompile(`(?i)ALTER TABLE \{\{schema\}\}\.(\w+) ADD COLUMN (\w+)`)
	out := map[string]string{}
	for _, m := range migrations {
		for _, t := range tables.FindAllStringSubmatch(m.sql, -1) {
			out[strings.ToLower(t[1])] = m.name
		}
		for _, c := range columns.FindAllStringSubmatch(m.sql, -1) {
			out[strings.ToLower(c[1]+"."+c[2])] = m.name
			out["."+strings.ToLower(c[2])] = m.name
		}
	}
	return out
}()

// quoted finds the quoted names of a server message: relation
// "s.checkpoints", column "purged" of relation "checkpoint_leaves".
var quoted = regexp.MustCompile(`"([^"]+)"`)

// missingMigration names the migration that creates what a 42P01
// (undefined table), 42703 (undefined column) or 3F000 (undefined schema)
// error finds missing, "" when it is not one of the migrations' objects.
func missingMigration(e *pgconn.PgError) string {
	names := quoted.FindAllStringSubmatch(e.Message, -1)
	switch e.Code {
	case codeInvalidSchemaName:
		return migrations[0].name
	case codeUndefinedTable:
		if len(names) > 0 {
			rel := names[0][1]
			if _, table, ok := strings.Cut(rel, "."); ok {
				rel = table
			}
			return createdBy[strings.ToLower(rel)]
		}
	case codeUndefinedColumn:
		// `column "purged" of relation "checkpoint_leaves" does not
		// exist`, `column "purged" does not exist` or `column
		// l.purged does not exist`.
		col := ""
		if len(names) > 0 {
			col = names[0][1]
		} else if f := strings.Fields(e.Message); len(f) >= 2 {
			col = f[1]
		}
		if _, c, ok := strings.Cut(col, "."); ok {
			col = c
		}
		col = strings.ToLower(col)
		if len(names) > 1 {
			if m := createdBy[strings.ToLower(names[1][1])+"."+col]; m != "" {
				return m
			}
		}
		return createdBy["."+col]
	}
	return ""
}
