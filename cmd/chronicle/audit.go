package main

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/tlog"
)

// auditVerifyJSON is audit verify's JSON output.
type auditVerifyJSON struct {
	OK          bool                `json:"ok"`
	File        string              `json:"file"`
	Error       string              `json:"error,omitempty"`
	Line        int                 `json:"line,omitempty"`
	InstanceID  string              `json:"instance_id,omitempty"`
	Checkpoints []int64             `json:"checkpoints,omitempty"`
	KeyIDs      []string            `json:"key_ids,omitempty"`
	Instances   []auditInstanceJSON `json:"instances,omitempty"`
	Published   *auditPublishedJSON `json:"published,omitempty"`
}

type auditPublishedJSON struct {
	Origin    string   `json:"origin"`
	Size      uint64   `json:"size"`
	Root      string   `json:"root"`
	Cosigners []string `json:"cosigners,omitempty"`
	Included  []int64  `json:"included"`
}

type auditInstanceJSON struct {
	InstanceID  string  `json:"instance_id"`
	Events      int     `json:"events"`
	LastSeq     int64   `json:"last_seq,omitempty"`
	CoveredSeq  int64   `json:"covered_seq"`
	Checkpoint  int64   `json:"checkpoint"`
	Checkpoints []int64 `json:"checkpoints"`
	Purged      bool    `json:"purged,omitempty"`
	Status      string  `json:"status,omitempty"`
	Workflow    string  `json:"workflow,omitempty"`
	Tasks       int     `json:"tasks,omitempty"`
}

func runAuditBundle(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var all bool
	var out string
	fs.BoolVar(&all, "all", false, "bundle every instance of the store")
	fs.StringVar(&out, "out", "", "write the bundle to `FILE` (required; never overwritten)")
	var published string
	fs.StringVar(&published, "published", "", "carry the checkpoint note of `FILE` (a published directory's newest file, a witness's cosigned note) and prove the bundle's checkpoints in its log")
	pos, err := c.parse(cmd, fs, args, 0, -1)
	if err != nil {
		return err
	}
	if all == (len(pos) > 0) {
		return usagef(cmd, "give instance ids or --all")
	}
	if out == "" {
		return usagef(cmd, "--out FILE is required")
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	ids := pos
	if all {
		for after := ""; ; {
			page, err := e.ListInstances(c.ctx, chronicle.InstanceFilter{AfterID: after, Limit: 500})
			if err != nil {
				return err
			}
			for _, in := range page {
				ids = append(ids, in.ID)
			}
			if len(page) < 500 {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	o := chronicle.AuditBundleOptions{InstanceIDs: ids}
	if published != "" {
		if o.Published, err = os.ReadFile(published); err != nil {
			_ = f.Close()
			_ = os.Remove(out)
			return err
		}
	}
	err = e.WriteAuditBundle(c.ctx, w, o)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(out) // a partial bundle proves nothing
		return err
	}
	if c.json {
		return c.printJSON(map[string]any{"file": out, "instances": len(ids)})
	}
	c.printf("wrote the audit bundle of %d instances to %s\n", len(ids), out)
	c.printf("check it offline: chronicle audit verify %s --key KEYRING\n", out)
	return nil
}

func runAuditVerify(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var keyFiles listFlag
	fs.Var(&keyFiles, "key", "keyring `FILE` of public keys (\"KEYID BASE64-KEY\" lines; repeatable; required)")
	var witnessFlags listFlag
	fs.Var(&witnessFlags, "witness", "`NAME=FILE`: a witness's name and the keyring file of its public key, to check its cosignature on the published note (repeatable)")
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	if len(keyFiles) == 0 {
		return usagef(cmd, "--key KEYRING is required: a bundle proves nothing without the public keys")
	}
	keys, err := chronicle.ReadKeyring(keyFiles...)
	if err != nil {
		return err
	}
	var witnesses []note.Verifier
	for _, w := range witnessFlags {
		name, file, ok := strings.Cut(w, "=")
		if !ok || name == "" {
			return usagef(cmd, "--witness %q: give NAME=FILE", w)
		}
		ring, err := chronicle.ReadKeyring(file)
		if err != nil {
			return err
		}
		for _, id := range ring.KeyIDs() {
			pub, _ := ring.Key(id)
			v, err := tlog.NewCosignatureVerifier(name, pub)
			if err != nil {
				return err
			}
			witnesses = append(witnesses, v)
		}
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return err
	}
	rep, verr := chronicle.VerifyAuditBundle(f, keys, witnesses...)
	_ = f.Close() // read-only
	out := auditVerifyJSON{OK: verr == nil, File: pos[0]}
	var be *chronicle.AuditBundleError
	switch {
	case errors.As(verr, &be):
		out.Error, out.Line, out.InstanceID = be.Err.Error(), be.Line, be.InstanceID
	case verr != nil:
		return verr
	default:
		out.Checkpoints, out.KeyIDs = rep.Checkpoints, rep.KeyIDs
		if p := rep.Published; p != nil {
			out.Published = &auditPublishedJSON{Origin: p.Origin, Size: p.Size, Root: base64.StdEncoding.EncodeToString(p.Root), Cosigners: p.Cosigners, Included: p.Included}
		}
		for _, in := range rep.Instances {
			out.Instances = append(out.Instances, auditInstanceJSON{InstanceID: in.InstanceID, Events: in.Events, LastSeq: in.LastSeq,
				CoveredSeq: in.CoveredSeq, Checkpoint: in.Checkpoint, Checkpoints: in.Checkpoints, Purged: in.Purged,
				Status: string(in.Status), Workflow: in.Workflow, Tasks: in.Tasks})
		}
	}
	if c.json {
		if err := c.printJSON(out); err != nil {
			return err
		}
	} else {
		c.printAuditReport(&out)
	}
	if !out.OK {
		return errReported
	}
	return nil
}

// printAuditReport prints what a bundle proves, or where it fails.
func (c *cli) printAuditReport(out *auditVerifyJSON) {
	if !out.OK {
		where := fmt.Sprintf("line %d", out.Line)
		if out.InstanceID != "" {
			where += ", instance " + out.InstanceID
		}
		c.printf("FAILED: %s does not verify (%s): %s\n", out.File, where, out.Error)
		return
	}
	c.printf("%s verifies offline with the keyring alone: %d instances, checkpoints %s signed by %s.\n",
		out.File, len(out.Instances), numbers(out.Checkpoints), strings.Join(out.KeyIDs, ", "))
	for _, in := range out.Instances {
		switch {
		case in.Purged:
			c.printf("  %s: purged; its signed tombstone (seq %d, checkpoint %d) proves the purge ended a history the checkpoints covered\n",
				in.InstanceID, in.CoveredSeq, in.Checkpoint)
		case in.CoveredSeq == in.LastSeq:
			c.printf("  %s: %s %s, %d events, all covered by checkpoint %d; %s re-derived from them\n",
				in.InstanceID, in.Workflow, in.Status, in.Events, in.Checkpoint, plural(in.Tasks, "human task"))
		default:
			c.printf("  %s: %s %s, %d events, seq 1-%d covered by checkpoint %d, seq %d-%d not signed yet; %s re-derived\n",
				in.InstanceID, in.Workflow, in.Status, in.Events, in.CoveredSeq, in.Checkpoint, in.CoveredSeq+1, in.LastSeq, plural(in.Tasks, "human task"))
		}
	}
	if p := out.Published; p != nil {
		cos := "no witness cosignature checked"
		if len(p.Cosigners) > 0 {
			cos = "cosigned by " + strings.Join(p.Cosigners, ", ")
		}
		c.printf("The published note of %s (size %d, root %s, %s) holds checkpoints %s of the bundle.\n",
			p.Origin, p.Size, p.Root, cos, numbers(p.Included))
	}
	c.printf("It proves: each covered history is byte for byte what the engine holding the key recorded (hash chains\n")
	c.printf("and inclusion proofs in signed checkpoints), each purge was signed before the history was deleted, and\n")
	c.printf("the status and human tasks shown are those the histories fold into. It does not prove that nothing\n")
	if out.Published == nil {
		c.printf("newer than these checkpoints exists: compare them with the checkpoints published outside the database.\n")
	} else {
		c.printf("newer than these checkpoints exists; that these checkpoints are in the published log, which the\n")
		c.printf("database administrator cannot rewrite, it does.\n")
	}
}

// plural says "1 human task", "2 human tasks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// numbers prints 1-3, 5 style ranges.
func numbers(ns []int64) string {
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(ns[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ns[i], ns[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
