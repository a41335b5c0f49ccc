package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/chronicleflow/chronicle/provider/mongo"
	"github.com/chronicleflow/chronicle/provider/oracle"
	"github.com/chronicleflow/chronicle/provider/postgres"
)

// migrateJSON is migrate's JSON output.
type migrateJSON struct {
	Schema  string `json:"schema"`
	Version int    `json:"version"`
	Latest  int    `json:"latest"`
}

func runMigrate(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	partitions := fs.Int("partitions", 0, "PostgreSQL and MongoDB: the partition count of a schema or database this migration creates (0: one); one that exists keeps its count")
	citus := fs.Bool("citus", false, "PostgreSQL: then distribute the schema's tables by partition on the Citus cluster of the store's coordinator (docs/scaling.md)")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if isMongo(c.storeURL) {
		return migrateMongo(c, *partitions)
	}
	if isOracle(c.storeURL) {
		return migrateOracle(c)
	}
	if !isPostgres(c.storeURL) {
		return errors.New("migrate needs a postgres://, mongodb:// or oracle:// store; the memory store needs no schema")
	}
	store, err := postgres.Open(c.ctx, c.storeURL, postgres.Options{Schema: c.schema, Partitions: *partitions})
	if err != nil {
		return err
	}
	defer store.Close()
	version, err := store.Migrate(c.ctx)
	if err != nil {
		return err
	}
	if *citus {
		if err := store.Distribute(c.ctx); err != nil {
			return err
		}
	}
	if c.json {
		return c.printJSON(migrateJSON{Schema: store.Schema(), Version: version, Latest: postgres.LatestSchemaVersion()})
	}
	fmt.Fprintf(c.stdout, "schema %s is at version %d (latest %d)\n", store.Schema(), version, postgres.LatestSchemaVersion())
	if store.Distributed() {
		fmt.Fprintf(c.stdout, "schema %s is distributed by Citus: %d partitions\n", store.Schema(), store.Partitions())
	}
	return nil
}

// migrateMongo creates or upgrades the collections and indexes of a
// MongoDB store.
func migrateMongo(c *cli, partitions int) error {
	store, err := mongo.Open(c.ctx, c.storeURL, mongo.Options{Database: c.schema, Logger: quietLogger(), Partitions: partitions})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Migrate(c.ctx); err != nil {
		return err
	}
	version, err := store.SchemaVersion(c.ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(migrateJSON{Schema: store.Database(), Version: version, Latest: mongo.LatestSchemaVersion()})
	}
	fmt.Fprintf(c.stdout, "database %s is at version %d (latest %d)\n", store.Database(), version, mongo.LatestSchemaVersion())
	return nil
}

// migrateOracle creates or upgrades the tables, sequence and AQ queue of
// an Oracle store.
func migrateOracle(c *cli) error {
	store, err := oracle.Open(c.ctx, c.storeURL, oracle.Options{Schema: strings.ToUpper(c.schema), MigrateOnStart: true, Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer store.Close()
	version, err := store.SchemaVersion(c.ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(migrateJSON{Schema: store.Schema() + "." + store.Prefix(), Version: version, Latest: oracle.LatestSchemaVersion()})
	}
	fmt.Fprintf(c.stdout, "schema %s (prefix %s) is at version %d (latest %d)\n", store.Schema(), store.Prefix(), version, oracle.LatestSchemaVersion())
	return nil
}
