package main

import (
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/chronicleflow/chronicle"
)

// tombstoneJSON is a purged instance in JSON output.
type tombstoneJSON struct {
	InstanceID string    `json:"instance_id"`
	LastSeq    int64     `json:"last_seq"`
	LastHash   string    `json:"last_hash"`
	PurgedAt   time.Time `json:"purged_at"`
	PurgedBy   string    `json:"purged_by"`
	Archive    string    `json:"archive,omitempty"`
}

// purgeJSON is purge's JSON output.
type purgeJSON struct {
	Purged  []tombstoneJSON   `json:"purged"`
	Skipped map[string]string `json:"skipped"`
}

func runPurge(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var age ageFlag
	var by, archive string
	fs.Var(&age, "older-than", "purge every ended instance unchanged for this long (36h, 30d)")
	fs.StringVar(&by, "by", "", "the operator, recorded on the tombstones (required)")
	fs.StringVar(&archive, "archive", "", "first write each history to DIR/<id>.jsonl; an instance whose archive fails is kept")
	ids, err := c.parse(cmd, fs, args, 0, -1)
	if err != nil {
		return err
	}
	if len(ids) == 0 && age.d == 0 {
		return usagef(cmd, "give instance ids or --older-than")
	}
	if by == "" {
		return usagef(cmd, "--by is required")
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	o := chronicle.PurgeOptions{InstanceIDs: ids, By: by}
	if age.d > 0 {
		o.CompletedBefore = c.now().Add(-age.d)
	}
	if archive != "" {
		o.Archive = chronicle.ArchiveJSONL(archive)
	}
	rep, err := e.Purge(c.ctx, o)
	if errors.Is(err, chronicle.ErrPurgeUnsigned) {
		return usagef(cmd, "the store keeps signed checkpoints: give --sign-key FILE, so that the purge signs its tombstones")
	}
	if he := (*chronicle.HeldError)(nil); errors.As(err, &he) && err == error(he) {
		err = nil // the report names each held instance among the skipped
	}
	if err != nil {
		return err
	}
	out := purgeJSON{Purged: []tombstoneJSON{}, Skipped: rep.Skipped}
	for _, ts := range rep.Purged {
		t := tombstoneJSON{InstanceID: ts.InstanceID, LastSeq: ts.LastSeq, LastHash: hex.EncodeToString(ts.LastHash),
			PurgedAt: ts.PurgedAt.UTC(), PurgedBy: ts.PurgedBy}
		if archive != "" {
			t.Archive = chronicle.ArchivePath(archive, ts.InstanceID)
		}
		out.Purged = append(out.Purged, t)
	}
	if c.json {
		if err := c.printJSON(out); err != nil {
			return err
		}
	} else {
		for _, t := range out.Purged {
			c.printf("purged %s: tombstone at seq %d, last hash %s, by %s at %s\n", t.InstanceID, t.LastSeq, t.LastHash, t.PurgedBy, when(t.PurgedAt))
			if t.Archive != "" {
				c.printf("  archived to %s\n", t.Archive)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(rep.Skipped)) {
			c.printf("skipped %s: %s\n", id, rep.Skipped[id])
		}
		c.printf("%d purged, %d skipped\n", len(out.Purged), len(rep.Skipped))
	}
	if len(rep.Skipped) > 0 {
		return errReported
	}
	return nil
}
