package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/timeline"
	"github.com/chronicleflow/chronicle/provider"
)

// timelineRow is an event of history show's JSON output.
type timelineRow struct {
	Seq           int64        `json:"seq"`
	At            time.Time    `json:"at"`
	Kind          history.Kind `json:"kind"`
	Actor         string       `json:"actor"`
	ExecutionID   string       `json:"execution_id"`
	CorrelationID string       `json:"correlation_id,omitempty"`
	Detail        string       `json:"detail,omitempty"`
}

// decoder renders payloads in timelines with the engine's codec.
// A payload sealed for a data subject is opened first, and shown as
// erased when its subject's key is destroyed.
func (c *cli) decoder() func([]byte) string {
	decode := timeline.DecodeMsgpack
	if c.engine.Options().Codec.Name() == "json" {
		decode = timeline.DecodeJSON
	}
	e := c.engine
	return func(b []byte) string {
		b, err := e.Unseal(b)
		if err != nil {
			return chronicle.ErasedText(err)
		}
		return decode(b)
	}
}

func runHistoryShow(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	events, err := e.History(c.ctx, pos[0])
	if err != nil {
		return c.notFound(pos[0], err)
	}
	if c.json {
		rows := make([]timelineRow, len(events))
		for i := range events {
			ev := &events[i]
			rows[i] = timelineRow{Seq: ev.Seq, At: ev.At.UTC(), Kind: ev.Kind, Actor: ev.Actor, ExecutionID: ev.ExecutionID,
				CorrelationID: ev.CorrelationID, Detail: timeline.Detail(ev, c.decoder())}
		}
		return c.printJSON(rows)
	}
	return timeline.Write(c.stdout, events, timeline.Options{Decode: c.decoder()})
}

// exportReport is history export's JSON output when it writes a file.
type exportReport struct {
	InstanceID string `json:"instance_id"`
	Events     int    `json:"events"`
	LastHash   string `json:"last_hash"`
	File       string `json:"file"`
	// Checkpoints counts the checkpoint proofs written after the events.
	Checkpoints int `json:"checkpoints"`
}

func runHistoryExport(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var out string
	fs.StringVar(&out, "out", "", "write to this file instead of standard output")
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	events, err := e.History(c.ctx, pos[0])
	if err != nil {
		return c.notFound(pos[0], err)
	}
	// The checkpoints covering the history make the export verify
	// offline; a store without them exports the events alone.
	proofs, err := e.CheckpointProofs(c.ctx, pos[0])
	if err != nil && !errors.Is(err, chronicle.ErrUnsupported) {
		return err
	}
	var buf bytes.Buffer
	if err := history.WriteJSONL(&buf, events); err != nil {
		return err
	}
	if err := history.WriteCheckpointsJSONL(&buf, proofs); err != nil {
		return err
	}
	if out == "" {
		_, err := c.stdout.Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o640); err != nil {
		return err
	}
	rep := exportReport{InstanceID: pos[0], Events: len(events), LastHash: lastHash(events), File: out, Checkpoints: len(proofs)}
	if c.json {
		return c.printJSON(rep)
	}
	c.printf("exported %d events of %s to %s, last hash %s\n", rep.Events, rep.InstanceID, rep.File, rep.LastHash)
	if len(proofs) > 0 {
		c.printf("with %d signed checkpoints covering it\n", len(proofs))
	}
	return nil
}

func lastHash(events []history.Event) string {
	if len(events) == 0 {
		return ""
	}
	return hex.EncodeToString(events[len(events)-1].Hash)
}

// verifyJSON is the verification of one history in JSON output.
type verifyJSON struct {
	InstanceID string `json:"instance_id"`
	OK         bool   `json:"ok"`
	Events     int    `json:"events"`
	LastHash   string `json:"last_hash,omitempty"`
	// BrokenSeq and Reason say where and why a chain is broken.
	BrokenSeq int64  `json:"broken_seq,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Archive fields: the file, and what the store says about it.
	File  string `json:"file,omitempty"`
	Check string `json:"check,omitempty"`
	// Skipped says why --all found no history to verify (an instance
	// whose start was dead-lettered).
	Skipped string `json:"skipped,omitempty"`
}

// verify checks a history's chain.
func verify(id string, events []history.Event) verifyJSON {
	v := verifyJSON{InstanceID: id, OK: true, Events: len(events), LastHash: lastHash(events)}
	if err := history.Verify(events); err != nil {
		v.OK, v.LastHash = false, ""
		var ce *history.ChainError
		if errors.As(err, &ce) {
			v.BrokenSeq, v.Reason = ce.Seq, ce.Reason
		} else {
			v.Reason = err.Error()
		}
	}
	return v
}

// verdict renders a verification for people.
func (v *verifyJSON) verdict() string {
	switch {
	case v.Skipped != "":
		return "skipped: " + v.Skipped
	case v.OK:
		return fmt.Sprintf("ok: %d events, last hash %s", v.Events, v.LastHash)
	case v.BrokenSeq > 0:
		return fmt.Sprintf("BROKEN at seq %d: %s", v.BrokenSeq, v.Reason)
	}
	return "BROKEN: " + v.Reason
}

func runHistoryVerify(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var all bool
	var archive string
	var keyFiles listFlag
	fs.BoolVar(&all, "all", false, "verify every instance of the store")
	fs.StringVar(&archive, "archive", "", "verify an exported or archived JSON Lines file, and check it against the store")
	fs.Var(&keyFiles, "key", "keyring `FILE` of public keys (\"KEYID BASE64-KEY\" lines; repeatable): verify against signed checkpoints; with --archive, offline")
	pos, err := c.parse(cmd, fs, args, 0, 1)
	if err != nil {
		return err
	}
	modes := len(pos)
	if all {
		modes++
	}
	if archive != "" {
		modes++
	}
	if modes != 1 {
		return usagef(cmd, "give exactly one of ID, --all and --archive FILE")
	}
	if len(keyFiles) > 0 {
		keys, err := chronicle.ReadKeyring(keyFiles...)
		if err != nil {
			return err
		}
		if archive != "" {
			return c.verifyExportOffline(keys, archive)
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		only := ""
		if len(pos) == 1 {
			only = pos[0]
		}
		return c.verifyCheckpoints(e, keys, only)
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	switch {
	case all:
		return c.verifyAll(e)
	case archive != "":
		return c.verifyArchive(e, archive)
	}
	events, err := e.History(c.ctx, pos[0])
	if err != nil {
		return c.notFound(pos[0], err)
	}
	v := verify(pos[0], events)
	if c.json {
		if err := c.printJSON(v); err != nil {
			return err
		}
	} else {
		c.printf("%s\n", v.verdict())
	}
	if !v.OK {
		return errReported
	}
	return nil
}

func (c *cli) verifyAll(e *chronicle.Engine) error {
	targets, err := c.allInstances(e)
	if err != nil {
		return err
	}
	var results []verifyJSON
	for _, t := range targets {
		if t.skipped == "" {
			events, err := e.History(c.ctx, t.id)
			switch {
			case errors.Is(err, chronicle.ErrInstanceNotFound):
				t.skipped = gone
			case err != nil:
				return err
			default:
				results = append(results, verify(t.id, events))
				continue
			}
		}
		results = append(results, verifyJSON{InstanceID: t.id, OK: true, Skipped: t.skipped})
	}
	broken, skipped := 0, 0
	for _, r := range results {
		switch {
		case !r.OK:
			broken++
		case r.Skipped != "":
			skipped++
		}
	}
	if c.json {
		if results == nil {
			results = []verifyJSON{}
		}
		if err := c.printJSON(results); err != nil {
			return err
		}
	} else {
		rows := make([][]string, len(results))
		for i, r := range results {
			rows[i] = []string{r.InstanceID, r.verdict()}
		}
		table(c.stdout, "", []string{"INSTANCE", "CHAIN"}, rows)
		if skipped == 0 {
			c.printf("%d histories verified: %d ok, %d broken\n", len(results), len(results)-broken, broken)
		} else {
			c.printf("%d histories verified: %d ok, %d broken; %d instances without history skipped\n", len(results)-skipped, len(results)-broken-skipped, broken, skipped)
		}
	}
	if broken > 0 {
		return errReported
	}
	return nil
}

// verifyArchive verifies the chain of an exported history and then checks
// it against the store: against the tombstone of a purged instance, or
// against the stored history of one still there.
func (c *cli) verifyArchive(e *chronicle.Engine, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	events, err := history.ReadJSONL(f)
	_ = f.Close() // opened read-only: Close cannot lose data, and ReadJSONL reported any read error
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if len(events) == 0 {
		return fmt.Errorf("read %s: no events", file)
	}
	id := events[0].InstanceID
	v := verify(id, events)
	v.File = file
	if v.OK {
		v.OK, v.Check = c.checkArchive(e, events)
	}
	if c.json {
		if err := c.printJSON(v); err != nil {
			return err
		}
	} else {
		c.printf("archive %s of %s\n%s\n", file, id, v.verdict())
		if v.Check != "" {
			c.printf("%s\n", v.Check)
		}
	}
	if !v.OK {
		return errReported
	}
	return nil
}

// checkArchive compares a sound archived chain with what the store holds
// and says what it found; ok is false on a mismatch.
func (c *cli) checkArchive(e *chronicle.Engine, events []history.Event) (ok bool, check string) {
	last := events[len(events)-1]
	id := last.InstanceID
	ts, err := e.GetTombstone(c.ctx, id)
	if err == nil {
		if err := chronicle.VerifyArchive(events, ts); err != nil {
			return false, "MISMATCH with the tombstone: " + err.Error()
		}
		return true, fmt.Sprintf("matches the tombstone of %s: purged %s by %s at seq %d", id, when(ts.PurgedAt), ts.PurgedBy, ts.LastSeq)
	}
	stored, err := e.Store().LoadHistory(c.ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: last.Seq})
	switch {
	case err != nil:
		return false, "cannot read the stored history: " + err.Error()
	case len(stored) == 0:
		return true, fmt.Sprintf("%s has no history and no tombstone in the store: only the chain was checked", id)
	case !bytes.Equal(stored[0].Hash, last.Hash):
		return false, fmt.Sprintf("MISMATCH with the store: the stored event %d of %s has another hash", last.Seq, id)
	case len(stored) > 1:
		return true, fmt.Sprintf("matches the store: %s holds the same hash at seq %d and continues to seq %d", id, last.Seq, stored[len(stored)-1].Seq)
	}
	return true, fmt.Sprintf("matches the store: %s holds the same hash at seq %d", id, last.Seq)
}
