package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/tlog"
)

// Key files: keygen writes them in the format chronicle.ReadSigningKey
// and chronicle.ReadKeyring read (keyfile.go of package chronicle).

// keygenJSON is keygen's JSON output.
type keygenJSON struct {
	KeyID   string `json:"key_id"`
	Private string `json:"private_file"`
	Public  string `json:"public_file"`
	Line    string `json:"keyring_line"`
	// VerifierKey and VerifierFile are set with --origin: the signed-note
	// verifier key of the checkpoint log's notes.
	VerifierKey  string `json:"verifier_key,omitempty"`
	VerifierFile string `json:"verifier_file,omitempty"`
}

func runKeygen(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var id, out, origin string
	fs.StringVar(&id, "id", "", "the key id recorded in checkpoints (required), e.g. 2026-11")
	fs.StringVar(&out, "out", "", "write the signing key to FILE and its keyring line to FILE.pub (required)")
	fs.StringVar(&origin, "origin", "", "also write the signed-note verifier key of the checkpoint log `ORIGIN` to FILE.vkey")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if id == "" || out == "" {
		return usagef(cmd, "--id and --out are required")
	}
	if origin != "" {
		if err := tlog.ValidateOrigin(origin); err != nil {
			return usagef(cmd, "%v", err)
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	if _, err := chronicle.NewEd25519Signer(id, priv); err != nil {
		return usagef(cmd, "%v", err)
	}
	// O_EXCL: never overwrite a key.
	f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s\n", id, base64.StdEncoding.EncodeToString(priv.Seed()))
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}
	line := history.KeyringLine(id, pub)
	if err := os.WriteFile(out+".pub", []byte(line+"\n"), 0o644); err != nil {
		return err
	}
	rep := keygenJSON{KeyID: id, Private: out, Public: out + ".pub", Line: line}
	if origin != "" {
		if rep.VerifierKey, err = tlog.VerifierKey(origin, pub); err != nil {
			return err
		}
		rep.VerifierFile = out + ".vkey"
		if err := os.WriteFile(rep.VerifierFile, []byte(rep.VerifierKey+"\n"), 0o644); err != nil {
			return err
		}
	}
	if c.json {
		return c.printJSON(rep)
	}
	c.printf("signing key %s written to %s (keep it secret)\nkeyring line written to %s:\n%s\n", id, out, rep.Public, line)
	if origin != "" {
		c.printf("verifier key of the checkpoint notes of %s written to %s:\n%s\n", origin, rep.VerifierFile, rep.VerifierKey)
	}
	return nil
}

// checkpointJSON is a checkpoint in JSON output.
type checkpointJSON struct {
	Number   int64     `json:"number"`
	At       time.Time `json:"at"`
	KeyID    string    `json:"key_id"`
	Leaves   int       `json:"leaves"`
	Root     string    `json:"root"`
	Hash     string    `json:"hash"`
	PrevHash string    `json:"prev_hash"`
}

func toCheckpointJSON(cp *chronicle.Checkpoint) checkpointJSON {
	return checkpointJSON{Number: cp.Number, At: cp.At.UTC(), KeyID: cp.KeyID, Leaves: cp.Size,
		Root: hex.EncodeToString(cp.Root), Hash: hex.EncodeToString(cp.Hash), PrevHash: hex.EncodeToString(cp.PrevHash)}
}

func runCheckpointWrite(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if c.signKey == "" {
		return usagef(cmd, "--sign-key FILE is required")
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	// A refusal still writes the checkpoint of the heads that passed;
	// it is printed, then the refusal fails the command.
	cp, err := e.SweepCheckpoint(c.ctx)
	var refused *chronicle.CheckpointRefusedError
	if err != nil && !errors.As(err, &refused) {
		return err
	}
	switch {
	case cp == nil && c.json:
		err = c.printJSON(nil)
	case cp == nil:
		c.printf("every committed head is covered already\n")
	case c.json:
		err = c.printJSON(toCheckpointJSON(cp))
	default:
		c.printf("checkpoint %d: %d instances, key %s, hash %s\n", cp.Number, cp.Size, cp.KeyID, hex.EncodeToString(cp.Hash))
	}
	if err != nil {
		return err
	}
	if refused != nil {
		return refused
	}
	return nil
}

func runCheckpointList(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var after int64
	var limit int
	fs.Int64Var(&after, "after", 0, "list checkpoints numbered above N")
	fs.IntVar(&limit, "limit", 100, "list at most N checkpoints")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	cps, err := e.ListCheckpoints(c.ctx, after, limit)
	if err != nil {
		return err
	}
	out := make([]checkpointJSON, len(cps))
	for i := range cps {
		out[i] = toCheckpointJSON(&cps[i])
	}
	if c.json {
		return c.printJSON(out)
	}
	if len(out) == 0 {
		c.printf("no checkpoints\n")
		return nil
	}
	rows := make([][]string, len(out))
	for i, r := range out {
		rows[i] = []string{fmt.Sprint(r.Number), when(r.At), r.KeyID, fmt.Sprint(r.Leaves), r.Hash}
	}
	table(c.stdout, "", []string{"NUMBER", "AT", "KEY", "LEAVES", "HASH"}, rows)
	return nil
}

// checkpointVerifyJSON is history verify --key's JSON output.
type checkpointVerifyJSON struct {
	OK          bool          `json:"ok"`
	Checkpoints int           `json:"checkpoints"`
	Gaps        []gapJSON     `json:"gaps"`
	Instances   []coveredJSON `json:"instances"`
	File        string        `json:"file,omitempty"`
}

type gapJSON struct {
	Number int64  `json:"number"`
	Reason string `json:"reason"`
}

type coveredJSON struct {
	InstanceID string `json:"instance_id"`
	OK         bool   `json:"ok"`
	Events     int    `json:"events"`
	CoveredSeq int64  `json:"covered_seq"`
	Checkpoint int64  `json:"checkpoint,omitempty"`
	Purged     bool   `json:"purged,omitempty"`
	// Seq names the covered seq that does not match, Reason why.
	Seq    int64  `json:"seq,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func coveredRow(r chronicle.CheckpointResult) coveredJSON {
	v := coveredJSON{InstanceID: r.InstanceID, OK: r.Err == nil, Events: r.Events, CoveredSeq: r.CoveredSeq, Checkpoint: r.Checkpoint, Purged: r.Purged}
	var m *chronicle.CheckpointMismatchError
	var ce *history.ChainError
	switch {
	case errors.As(r.Err, &m):
		v.Seq, v.Checkpoint, v.Reason = m.Seq, m.Checkpoint, m.Error()
	case errors.As(r.Err, &ce):
		v.Seq, v.Reason = ce.Seq, ce.Error()
	case r.Err != nil:
		v.Reason = r.Err.Error()
	}
	return v
}

func (v *coveredJSON) verdict() string {
	switch {
	case !v.OK:
		return fmt.Sprintf("FORGED at seq %d: %s", v.Seq, v.Reason)
	case v.Purged:
		return fmt.Sprintf("ok: purged, tombstone at covered seq %d (checkpoint %d)", v.CoveredSeq, v.Checkpoint)
	case v.CoveredSeq == 0:
		return fmt.Sprintf("not yet covered: %d events", v.Events)
	}
	return fmt.Sprintf("ok: %d events, covered to seq %d by checkpoint %d", v.Events, v.CoveredSeq, v.Checkpoint)
}

// verifyCheckpoints checks the store against its signed checkpoints; only
// names the instance to show (all when empty).
func (c *cli) verifyCheckpoints(e *chronicle.Engine, keys *chronicle.Keyring, only string) error {
	rep, err := e.VerifyCheckpoints(c.ctx, keys)
	if err != nil {
		return err
	}
	out := checkpointVerifyJSON{OK: true, Checkpoints: rep.Checkpoints, Gaps: []gapJSON{}, Instances: []coveredJSON{}}
	for _, g := range rep.Gaps {
		out.Gaps = append(out.Gaps, gapJSON{Number: g.Number, Reason: g.Reason})
		out.OK = false
	}
	found := false
	for _, r := range rep.Instances {
		if only != "" && r.InstanceID != only {
			continue
		}
		found = true
		row := coveredRow(r)
		out.OK = out.OK && row.OK
		out.Instances = append(out.Instances, row)
	}
	if only != "" && !found {
		return c.notFound(only, fmt.Errorf("%w: %s", chronicle.ErrInstanceNotFound, only))
	}
	if c.json {
		if err := c.printJSON(out); err != nil {
			return err
		}
	} else {
		for _, g := range out.Gaps {
			c.printf("CHECKPOINT GAP at %d: %s\n", g.Number, g.Reason)
		}
		rows := make([][]string, len(out.Instances))
		for i := range out.Instances {
			rows[i] = []string{out.Instances[i].InstanceID, out.Instances[i].verdict()}
		}
		table(c.stdout, "", []string{"INSTANCE", "CHECKPOINTS"}, rows)
		c.printf("%d checkpoints, %d gaps; %d instances verified against them\n", out.Checkpoints, len(out.Gaps), len(out.Instances))
	}
	if !out.OK {
		return errReported
	}
	return nil
}

// verifyExportOffline checks an export or archive with the keyring only.
func (c *cli) verifyExportOffline(keys *chronicle.Keyring, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	events, proofs, err := history.ReadExport(bufio.NewReader(f))
	_ = f.Close() // read-only
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if len(events) == 0 {
		return fmt.Errorf("read %s: no events", file)
	}
	id := events[0].InstanceID
	row := coveredJSON{InstanceID: id, OK: true, Events: len(events)}
	if err := chronicle.VerifyExport(events, proofs, keys); err != nil {
		row = coveredRow(chronicle.CheckpointResult{InstanceID: id, Events: len(events), Err: err})
	} else {
		// The latest leaf that is an event of the file (the others are
		// heads of earlier incarnations that signed tombstones explain).
		for _, p := range proofs {
			if l := p.Leaf; l.Seq >= 1 && l.Seq <= int64(len(events)) && bytes.Equal(events[l.Seq-1].Hash, l.Hash) && p.Checkpoint.Number > row.Checkpoint {
				row.CoveredSeq, row.Checkpoint = l.Seq, p.Checkpoint.Number
			}
		}
	}
	out := checkpointVerifyJSON{OK: row.OK, Checkpoints: len(proofs), Gaps: []gapJSON{}, Instances: []coveredJSON{row}, File: file}
	if c.json {
		if err := c.printJSON(out); err != nil {
			return err
		}
	} else {
		c.printf("archive %s of %s, %d checkpoints, verified offline\n%s\n", file, id, len(proofs), row.verdict())
	}
	if !row.OK {
		return errReported
	}
	return nil
}
