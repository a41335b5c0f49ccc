package main

import (
	"errors"
	"fmt"

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
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if !isPostgres(c.storeURL) {
		return errors.New("migrate needs a postgres:// store; the memory store needs no schema")
	}
	store, err := postgres.Open(c.ctx, c.storeURL, postgres.Options{Schema: c.schema})
	if err != nil {
		return err
	}
	defer store.Close()
	version, err := store.Migrate(c.ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(migrateJSON{Schema: store.Schema(), Version: version, Latest: postgres.LatestSchemaVersion()})
	}
	fmt.Fprintf(c.stdout, "schema %s is at version %d (latest %d)\n", store.Schema(), version, postgres.LatestSchemaVersion())
	return nil
}
