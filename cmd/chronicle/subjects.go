package main

import (
	"strings"

	"github.com/chronicleflow/chronicle"
)

// keyProvider returns the provider of data subjects' keys that --keys and
// --kek name, or nil when --keys is not given.
func (c *cli) keyProvider() (chronicle.KeyProvider, error) {
	if c.keysDir == "" {
		if len(c.keks) > 0 {
			return nil, usagef(nil, "--kek needs --keys DIR")
		}
		return nil, nil
	}
	if len(c.keks) == 0 {
		return nil, usagef(nil, "--keys needs --kek FILE")
	}
	return chronicle.NewFileKeyProvider(c.keysDir, c.keks...)
}

// eraseJSON is the output of subject erase.
type eraseJSON struct {
	Subject    string   `json:"subject"`
	Reason     string   `json:"reason"`
	By         string   `json:"by"`
	Ticket     string   `json:"ticket,omitempty"`
	Instances  []string `json:"instances"`
	Terminated []string `json:"terminated"`
	RecordID   string   `json:"record_id"`
}

func runSubjectErase(c *cli, cmd *command, args []string) error {
	pos, reason, by, ticket, err := c.operatorArgs(cmd, args, operatorUsage{
		reason: "why, recorded with the erasure (required)",
		by:     "who erases, recorded as the erasure's actor (required)",
		ticket: "the request's reference, recorded with the reason"})
	if err != nil {
		return err
	}
	if c.keysDir == "" {
		return usagef(cmd, "subject erase needs the deployment's keys: --keys DIR --kek FILE")
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	rep, err := e.Erase(c.ctx, pos[0], chronicle.EraseOptions{Reason: reason, Actor: by, Ticket: ticket})
	if err != nil {
		return err
	}
	if _, err := c.settle(); err != nil {
		return err
	}
	out := eraseJSON{Subject: rep.Subject, Reason: reason, By: by, Ticket: ticket, Instances: rep.Instances, Terminated: rep.Terminated, RecordID: rep.RecordID}
	if out.Instances == nil {
		out.Instances = []string{}
	}
	if out.Terminated == nil {
		out.Terminated = []string{}
	}
	if c.json {
		return c.printJSON(out)
	}
	c.printf("subject %s erased: its key is destroyed\n", out.Subject)
	c.printf("instances: %d (%s)\n", len(out.Instances), strings.Join(out.Instances, ", "))
	if len(out.Terminated) > 0 {
		c.printf("terminated: %s\n", strings.Join(out.Terminated, ", "))
	}
	c.printf("recorded as instance %s (workflow %s)\n", out.RecordID, chronicle.ErasureWorkflow)
	return nil
}

func runKeysKEK(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var id, out string
	fs.StringVar(&id, "id", "", "the KEK id recorded with every key it wraps (required), e.g. kek-2026-11")
	fs.StringVar(&out, "out", "", "write the KEK to FILE, mode 0600 (required)")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if id == "" || out == "" {
		return usagef(cmd, "--id and --out are required")
	}
	if err := chronicle.GenerateKEK(out, id); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(map[string]string{"kek_id": id, "file": out})
	}
	c.printf("KEK %s written to %s (keep it secret)\n", id, out)
	return nil
}

func runKeysRotate(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	keys, err := c.keyProvider()
	if err != nil {
		return err
	}
	if keys == nil {
		return usagef(cmd, "keys rotate needs --keys DIR and --kek NEW [--kek OLD]...")
	}
	n, err := keys.Rotate(c.ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(map[string]any{"rewrapped": n, "kek": c.keks[0]})
	}
	c.printf("%d data keys re-wrapped under the KEK of %s; older KEK files can now be destroyed\n", n, c.keks[0])
	return nil
}
