package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
)

// waitingJSON is why a pending instance has not started, in JSON output:
// the concurrency key it waits for a slot of.
type waitingJSON struct {
	Key   string `json:"key"`
	Limit int    `json:"limit"`
	// Position is the instance's place among the key's waiters, 1 next;
	// 0 until its first round ran.
	Position int       `json:"position"`
	Since    time.Time `json:"since,omitzero"`
	Holders  []string  `json:"holders"`
}

func toWaitingJSON(w *chronicle.Waiting) *waitingJSON {
	if w == nil {
		return nil
	}
	out := &waitingJSON{Key: w.Key, Limit: w.Limit, Position: w.Position, Since: w.Since.UTC(), Holders: w.Holders}
	if w.Since.IsZero() {
		out.Since = time.Time{}
	}
	if out.Holders == nil {
		out.Holders = []string{}
	}
	return out
}

// waitingText says why an instance waits, on one line: "concurrency key
// acme (limit 1), position 2, behind a-1, since 2026-11-23 10:00:00".
func waitingText(w *chronicle.Waiting) string {
	if w == nil {
		return ""
	}
	s := fmt.Sprintf("concurrency key %s (limit %d)", w.Key, w.Limit)
	if w.Position > 0 {
		s += fmt.Sprintf(", position %d", w.Position)
	} else {
		s += ", not queued yet"
	}
	if len(w.Holders) > 0 {
		s += ", behind " + strings.Join(w.Holders, ", ")
	}
	if !w.Since.IsZero() {
		s += ", since " + when(w.Since)
	}
	return s
}

// slotJSON is an instance holding or waiting for a slot.
type slotJSON struct {
	InstanceID string    `json:"instance_id"`
	Since      time.Time `json:"since"`
}

// slotSetJSON is a concurrency key in JSON output.
type slotSetJSON struct {
	Key     string     `json:"key"`
	Limit   int        `json:"limit"`
	Holders []slotJSON `json:"holders"`
	Waiters []slotJSON `json:"waiters"`
	// RunningActivities is how many activity tasks of the key hold a
	// live claim (concurrency show only).
	RunningActivities *int `json:"running_activities,omitempty"`
}

func toSlotSetJSON(s *chronicle.SlotSet) slotSetJSON {
	out := slotSetJSON{Key: s.Key, Limit: s.Limit, Holders: []slotJSON{}, Waiters: []slotJSON{}}
	for _, h := range s.Holders {
		out.Holders = append(out.Holders, slotJSON{InstanceID: h.ID, Since: h.Since.UTC()})
	}
	for _, h := range s.Waiters {
		out.Waiters = append(out.Waiters, slotJSON{InstanceID: h.ID, Since: h.Since.UTC()})
	}
	return out
}

func runConcurrencyList(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var f chronicle.SlotFilter
	fs.BoolVar(&f.OnlyWaiting, "waiting", false, "only keys that instances wait for")
	fs.StringVar(&f.AfterKey, "after", "", "page: only keys after this one")
	fs.IntVar(&f.Limit, "limit", 100, "at most this many keys")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if f.Limit < 1 {
		return usagef(cmd, "invalid value %d for flag --limit: must be at least 1", f.Limit)
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	list, err := e.ListConcurrency(c.ctx, f)
	if err != nil {
		return err
	}
	if c.json {
		out := make([]slotSetJSON, len(list))
		for i := range list {
			out[i] = toSlotSetJSON(&list[i])
		}
		return c.printJSON(out)
	}
	if len(list) == 0 {
		if f.OnlyWaiting {
			c.printf("no instance waits for a concurrency slot\n")
		} else {
			c.printf("no concurrency keys\n")
		}
		return nil
	}
	rows := make([][]string, len(list))
	for i, s := range list {
		next := "-"
		if len(s.Waiters) > 0 {
			next = s.Waiters[0].ID
		}
		rows[i] = []string{s.Key, fmt.Sprint(s.Limit), fmt.Sprint(len(s.Holders)), fmt.Sprint(len(s.Waiters)), next}
	}
	table(c.stdout, "", []string{"KEY", "LIMIT", "HOLDERS", "WAITING", "NEXT"}, rows)
	if len(list) == f.Limit {
		c.printf("more may follow: --after %s\n", list[len(list)-1].Key)
	}
	return nil
}

func runConcurrencyShow(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	pos, err := c.parse(cmd, fs, args, 1, 1)
	if err != nil {
		return err
	}
	key := pos[0]
	e, err := c.open()
	if err != nil {
		return err
	}
	running, err := e.RunningActivities(c.ctx, key)
	if err != nil {
		return err
	}
	set, err := e.Concurrency(c.ctx, key)
	switch {
	case errors.Is(err, chronicle.ErrConcurrencyKeyNotFound) && running > 0:
		// Only activity tasks use the key.
		set = &chronicle.SlotSet{Key: key}
	case err != nil:
		return err
	}
	if c.json {
		out := toSlotSetJSON(set)
		out.RunningActivities = &running
		return c.printJSON(out)
	}
	limit := "-"
	if set.Limit > 0 {
		limit = fmt.Sprint(set.Limit)
	}
	fields(c.stdout, [][2]string{
		{"Key", set.Key},
		{"Limit", limit},
		{"Holders", fmt.Sprint(len(set.Holders))},
		{"Waiting", fmt.Sprint(len(set.Waiters))},
		{"Activities", fmt.Sprintf("%d running with this key", running)},
	})
	c.printf("\ninstances holding a slot:\n")
	if len(set.Holders) == 0 {
		c.printf("  none\n")
	} else {
		rows := make([][]string, len(set.Holders))
		for i, h := range set.Holders {
			rows[i] = []string{h.ID, when(h.Since)}
		}
		table(c.stdout, "  ", []string{"INSTANCE", "SINCE"}, rows)
	}
	c.printf("\ninstances waiting, in order:\n")
	if len(set.Waiters) == 0 {
		c.printf("  none\n")
	} else {
		rows := make([][]string, len(set.Waiters))
		for i, h := range set.Waiters {
			rows[i] = []string{fmt.Sprint(i + 1), h.ID, when(h.Since)}
		}
		table(c.stdout, "  ", []string{"POSITION", "INSTANCE", "SINCE"}, rows)
	}
	return nil
}
