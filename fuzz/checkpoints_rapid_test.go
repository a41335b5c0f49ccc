package fuzz_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/round"
)

// TestRapidCheckpointAdversary runs workflows with signed checkpoints on
// the memory store (starts, ids purged and started again, checkpoints,
// sweeps), publishes the latest checkpoint's number and hash as an
// operator would, and lets an adversary with full write access to the
// store and no key edit, delete and insert rows of every table: events,
// instance records, tombstones, checkpoint leaves and checkpoints. Then
// the engine sweeps (as a restarted node does) and may sign what it
// finds. Before and after that sweep, verification with the keyring and
// the published checkpoint must either report the change or find it
// harmless: every history a signature covered before the attack still
// holds, up to the covered seq, and nothing covered is gone unless a
// signed tombstone explains it (VerifyCheckpoints reporting it Purged).
func TestRapidCheckpointAdversary(t *testing.T) {
	printSeed(t)
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, "adversary")
	signer, err := chronicle.NewEd25519Signer("k1", ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	keys := &chronicle.Keyring{}
	if err := keys.Add(signer.KeyID(), signer.Public()); err != nil {
		t.Fatal(err)
	}
	var reported, harmless int
	rapid.Check(t, func(rt *rapid.T) {
		a := newCpAdversary(rt, signer)
		defer a.close()
		a.honest(rt)
		truth := a.verify(rt, keys)
		if !truth.OK() {
			rt.Fatalf("the honest run does not verify: %s", describeReport(truth))
		}
		published := a.latest(rt)
		covered := a.coveredHeads(rt, truth)
		a.attack(rt)
		for _, when := range []string{"after the attack", "after a sweep over it"} {
			if when != "after the attack" {
				e := a.newEngine(rt)
				_, _ = e.SweepCheckpoint(a.ctx) // it may refuse; what it signs is judged below
				_, _ = e.Checkpoint(a.ctx)
			}
			rep := a.verify(rt, keys)
			if !rep.OK() || !a.holds(rt, published) {
				reported++
				continue
			}
			if problem := a.harmed(rt, covered); problem != "" {
				rt.Fatalf("%s, verification passed but %s; report: %s", when, problem, describeReport(rep))
			}
			harmless++
		}
	})
	t.Logf("verifications that reported the attack: %d; that passed an attack found harmless: %d", reported, harmless)
	if reported == 0 {
		t.Fatal("no attack was ever reported: the adversary is toothless")
	}
}

// cpAdversary is one check: an engine on a memory store, and what it ran.
type cpAdversary struct {
	ctx    context.Context
	mem    *memory.Store
	clock  *round.ManualClock
	signer chronicle.Signer
	engine *chronicle.Engine
	engs   []*chronicle.Engine
	ids    []string
}

func newCpAdversary(rt *rapid.T, signer chronicle.Signer) *cpAdversary {
	a := &cpAdversary{
		ctx:    context.Background(),
		mem:    memory.New(memory.Options{}),
		clock:  round.NewManualClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)),
		signer: signer,
		ids:    []string{"a", "b", "c", "d"},
	}
	a.engine = a.newEngine(rt)
	return a
}

func (a *cpAdversary) close() {
	for _, e := range a.engs {
		e.Close()
	}
}

// newEngine returns an engine on the store: a node (re)started.
func (a *cpAdversary) newEngine(rt *rapid.T) *chronicle.Engine {
	e, err := chronicle.New(a.mem, chronicle.Options{
		NodeID: fmt.Sprintf("n%d", len(a.engs)), Clock: a.clock, MaxDeliveries: 3,
		Checkpoints: &chronicle.CheckpointOptions{Signer: a.signer},
	})
	if err != nil {
		rt.Fatal(err)
	}
	if err := chronicle.RegisterWorkflow(e, "quick", func(_ *chronicle.Context, s string) (string, error) { return s, nil }); err != nil {
		rt.Fatal(err)
	}
	if err := chronicle.RegisterWorkflow(e, "sleeper", func(c *chronicle.Context, s string) (string, error) {
		return s, c.Sleep(time.Minute)
	}); err != nil {
		rt.Fatal(err)
	}
	a.engs = append(a.engs, e)
	return e
}

func (a *cpAdversary) drain(rt *rapid.T) {
	for range 1000 {
		worked, err := a.engine.RunOnce(a.ctx)
		if err != nil {
			rt.Fatal(err)
		}
		if !worked {
			return
		}
	}
	rt.Fatal("work left after 1000 steps")
}

// honest runs workflows: starts (ids reused after a purge), time passing,
// checkpoints, purges, sweeps and nodes that die with heads pending.
func (a *cpAdversary) honest(rt *rapid.T) {
	steps := rapid.IntRange(3, 16).Draw(rt, "honest steps")
	for range steps {
		id := rapid.SampledFrom(a.ids).Draw(rt, "id")
		switch rapid.IntRange(0, 6).Draw(rt, "honest action") {
		case 0, 1:
			wf := rapid.SampledFrom([]string{"quick", "sleeper"}).Draw(rt, "workflow")
			_, _ = a.engine.Start(a.ctx, wf, "in-"+id, &chronicle.StartOptions{InstanceID: id}) // a taken id is fine
			a.drain(rt)
		case 2:
			a.clock.Advance(time.Minute)
			a.drain(rt)
		case 3:
			if _, err := a.engine.Checkpoint(a.ctx); err != nil {
				rt.Fatal(err)
			}
		case 4:
			if _, err := a.engine.Purge(a.ctx, chronicle.PurgeOptions{InstanceIDs: []string{id}, By: "records-officer"}); err != nil {
				rt.Fatal(err)
			}
		case 5:
			if _, err := a.engine.SweepCheckpoint(a.ctx); err != nil {
				rt.Fatal(err)
			}
		case 6:
			a.engine = a.newEngine(rt) // the node dies with its pending heads
		}
	}
	if rapid.Bool().Draw(rt, "final checkpoint") {
		if _, err := a.engine.Checkpoint(a.ctx); err != nil {
			rt.Fatal(err)
		}
	}
}

func (a *cpAdversary) verify(rt *rapid.T, keys *chronicle.Keyring) *chronicle.CheckpointReport {
	rep, err := a.engine.VerifyCheckpoints(a.ctx, keys)
	if err != nil {
		rt.Fatal(err)
	}
	return rep
}

// latest is the checkpoint an operator publishes outside the database.
func (a *cpAdversary) latest(rt *rapid.T) *chronicle.Checkpoint {
	cs, err := a.engine.ListCheckpoints(a.ctx, 0, 1000)
	if err != nil {
		rt.Fatal(err)
	}
	if len(cs) == 0 {
		return nil
	}
	return &cs[len(cs)-1]
}

// holds reports whether the published checkpoint is still stored as it
// was published.
func (a *cpAdversary) holds(rt *rapid.T, published *chronicle.Checkpoint) bool {
	if published == nil {
		return true
	}
	cs, err := a.engine.ListCheckpoints(a.ctx, published.Number-1, 1)
	if err != nil {
		rt.Fatal(err)
	}
	return len(cs) == 1 && cs[0].Number == published.Number && bytes.Equal(cs[0].Hash, published.Hash)
}

// coveredHeads returns, by instance, the seq and hash of the head the
// checkpoints cover in the stored history (purged ones left out).
func (a *cpAdversary) coveredHeads(rt *rapid.T, truth *chronicle.CheckpointReport) map[string]history.CheckpointLeaf {
	out := map[string]history.CheckpointLeaf{}
	for _, r := range truth.Instances {
		if r.CoveredSeq == 0 || r.Purged {
			continue // nothing of the stored history is covered
		}
		events, err := a.mem.LoadHistory(a.ctx, &provider.LoadHistoryParams{InstanceID: r.InstanceID, FromSeq: r.CoveredSeq})
		if err != nil || len(events) == 0 {
			rt.Fatalf("covered history of %s: %v", r.InstanceID, err)
		}
		out[r.InstanceID] = history.CheckpointLeaf{InstanceID: r.InstanceID, Seq: r.CoveredSeq, Hash: events[0].Hash}
	}
	return out
}

// harmed returns what the attack changed that a signature covered, or "".
func (a *cpAdversary) harmed(rt *rapid.T, covered map[string]history.CheckpointLeaf) string {
	for _, id := range a.ids {
		c, ok := covered[id]
		if !ok {
			continue
		}
		events, err := a.mem.LoadHistory(a.ctx, &provider.LoadHistoryParams{InstanceID: id, FromSeq: 1})
		if err != nil {
			return fmt.Sprintf("the covered history of %s does not load: %v", id, err)
		}
		if err := history.Verify(events); err != nil {
			return fmt.Sprintf("the covered history of %s is broken: %v", id, err)
		}
		if int64(len(events)) < c.Seq || !bytes.Equal(events[c.Seq-1].Hash, c.Hash) {
			return fmt.Sprintf("the history of %s covered up to seq %d changed", id, c.Seq)
		}
	}
	return ""
}

// attack edits, deletes and inserts rows of every table, without the key.
func (a *cpAdversary) attack(rt *rapid.T) {
	ops := rapid.IntRange(1, 4).Draw(rt, "attacks")
	for range ops {
		a.mem.Tamper(func(rows *memory.TamperRows) { a.tamper(rt, rows) })
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (a *cpAdversary) tamper(rt *rapid.T, rows *memory.TamperRows) {
	hist := sortedKeys(rows.Histories)
	pickHistory := func() (string, []history.Event, bool) {
		if len(hist) == 0 {
			return "", nil, false
		}
		id := rapid.SampledFrom(hist).Draw(rt, "history")
		return id, rows.Histories[id], true
	}
	var leaves []history.CheckpointLeaf
	for _, c := range rows.Checkpoints {
		leaves = append(leaves, c.Leaves...)
	}
	switch rapid.IntRange(0, 11).Draw(rt, "attack") {
	case 0: // rewrite an event, resealed or not
		id, ev, ok := pickHistory()
		if !ok {
			return
		}
		i := rapid.IntRange(0, len(ev)-1).Draw(rt, "event")
		ev[i].Actor = "user:forger"
		if rapid.Bool().Draw(rt, "reseal") {
			history.Seal(nil, ev)
		}
		rows.Histories[id] = ev
	case 1: // truncate a history
		id, ev, ok := pickHistory()
		if !ok {
			return
		}
		n := rapid.IntRange(0, len(ev)-1).Draw(rt, "keep")
		rows.Histories[id] = ev[:n]
		if r := rows.Records[id]; r != nil && rapid.Bool().Draw(rt, "fix record") {
			r.LastSeq = int64(n)
		}
		if n == 0 {
			delete(rows.Histories, id)
		}
	case 2: // delete an instance, maybe with a tombstone row matching a leaf
		id, _, ok := pickHistory()
		if !ok {
			return
		}
		delete(rows.Histories, id)
		delete(rows.Records, id)
		if rapid.Bool().Draw(rt, "forge tombstone") {
			for _, l := range leaves {
				if l.InstanceID == id {
					rows.Tombstones[id] = append(rows.Tombstones[id], provider.Tombstone{InstanceID: id, LastSeq: l.Seq, LastHash: l.Hash, PurgedBy: "dba"})
				}
			}
		}
	case 3: // append a forged event, chained
		id, ev, ok := pickHistory()
		if !ok {
			return
		}
		extra := ev[len(ev)-1]
		extra.Seq++
		extra.Actor = "user:forger"
		history.Seal(ev[len(ev)-1].Hash, []history.Event{extra})
		rows.Histories[id] = append(ev, extra)
		if r := rows.Records[id]; r != nil {
			r.LastSeq = extra.Seq
		}
	case 4: // a forged history under another id (a purged one, say)
		src, ev, ok := pickHistory()
		if !ok {
			return
		}
		id := rapid.SampledFrom(a.ids).Draw(rt, "forged id")
		if id == src {
			return
		}
		for i := range ev {
			ev[i].InstanceID = id
		}
		history.Seal(nil, ev)
		rows.Histories[id] = ev
		if r := rows.Records[src]; r != nil {
			copied := *r
			copied.InstanceID = id
			rows.Records[id] = &copied
		}
	case 5: // forge, delete or edit tombstone rows
		if len(leaves) == 0 {
			return
		}
		l := rapid.SampledFrom(leaves).Draw(rt, "leaf")
		switch rapid.IntRange(0, 2).Draw(rt, "tombstone attack") {
		case 0:
			rows.Tombstones[l.InstanceID] = append(rows.Tombstones[l.InstanceID], provider.Tombstone{InstanceID: l.InstanceID, LastSeq: l.Seq, LastHash: l.Hash, PurgedBy: "dba"})
		case 1:
			delete(rows.Tombstones, l.InstanceID)
		case 2:
			for i := range rows.Tombstones[l.InstanceID] {
				rows.Tombstones[l.InstanceID][i].LastSeq++
			}
		}
	case 6, 7: // delete, edit or flip a leaf
		if len(rows.Checkpoints) == 0 {
			return
		}
		c := &rows.Checkpoints[rapid.IntRange(0, len(rows.Checkpoints)-1).Draw(rt, "checkpoint")]
		if len(c.Leaves) == 0 {
			return
		}
		i := rapid.IntRange(0, len(c.Leaves)-1).Draw(rt, "leaf index")
		switch rapid.IntRange(0, 3).Draw(rt, "leaf attack") {
		case 0:
			c.Leaves = slices.Delete(c.Leaves, i, i+1)
		case 1:
			c.Leaves[i].Seq++
		case 2:
			c.Leaves[i].Purged = !c.Leaves[i].Purged
		case 3:
			c.Leaves = nil
		}
	case 8: // delete a checkpoint, or the newest ones
		n := len(rows.Checkpoints)
		if n == 0 {
			return
		}
		if rapid.Bool().Draw(rt, "truncate") {
			rows.Checkpoints = rows.Checkpoints[:rapid.IntRange(0, n-1).Draw(rt, "keep checkpoints")]
		} else {
			rows.Checkpoints[rapid.IntRange(0, n-1).Draw(rt, "delete checkpoint")].Number = 0
		}
	case 9: // edit a checkpoint's fields
		n := len(rows.Checkpoints)
		if n == 0 {
			return
		}
		c := &rows.Checkpoints[rapid.IntRange(0, n-1).Draw(rt, "edit checkpoint")]
		c.At = c.At.Add(time.Hour)
	case 10: // edit an instance record
		recs := sortedKeys(rows.Records)
		if len(recs) == 0 {
			return
		}
		r := rows.Records[rapid.SampledFrom(recs).Draw(rt, "record")]
		if rapid.Bool().Draw(rt, "status") {
			r.Status = provider.StatusCompleted
		} else {
			r.LastSeq = max(r.LastSeq-1, 0)
		}
	case 11: // delete a record, keeping the history
		recs := sortedKeys(rows.Records)
		if len(recs) == 0 {
			return
		}
		delete(rows.Records, rapid.SampledFrom(recs).Draw(rt, "record"))
	}
}

func describeReport(rep *chronicle.CheckpointReport) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d checkpoints (latest %d)", rep.Checkpoints, rep.Latest)
	for _, g := range rep.Gaps {
		fmt.Fprintf(&b, "; gap: %v", g)
	}
	for _, r := range rep.Instances {
		fmt.Fprintf(&b, "; %s: events %d covered %d purged %v err %v", r.InstanceID, r.Events, r.CoveredSeq, r.Purged, r.Err)
	}
	return b.String()
}
