package main

import (
	"errors"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/internal/demodata"
)

// demoJSON is demo's JSON output.
type demoJSON struct {
	Clock       time.Time        `json:"clock"`
	Instances   []demoInstance   `json:"instances"`
	OpenTasks   []taskJSON       `json:"open_tasks"`
	DeadLetters []deadLetterJSON `json:"dead_letters"`
}

type demoInstance struct {
	instanceJSON
	Story string `json:"story"`
}

// tryNext are the commands demo suggests.
var tryNext = []string{
	"chronicle instances list --status running",
	"chronicle instance show CLM-1001",
	"chronicle history show LOAN-2001",
	"chronicle history verify --all",
	"chronicle tasks list --role adjuster --unassigned",
	`chronicle task complete review-CLM-1002 --user alice --roles adjuster --result '{"approved":true,"amount":3900}'`,
	"chronicle dlq list",
	"chronicle purge --older-than 20h --by ops --archive ./archive",
}

func runDemo(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	if c.demo == nil {
		return errors.New("the demo data lives in the memory store: run demo without --store")
	}
	stories := map[string]string{}
	for _, s := range demodata.Stories() {
		stories[s.InstanceID] = s.Summary
	}
	list, err := e.ListInstances(c.ctx, chronicle.InstanceFilter{Limit: 1000})
	if err != nil {
		return err
	}
	tasks, err := e.ListTasks(c.ctx, chronicle.TaskFilter{Status: chronicle.TaskOpen, Limit: 1000})
	if err != nil {
		return err
	}
	letters, err := e.ListDeadLetters(c.ctx, chronicle.DeadLetterFilter{Status: "dead", Limit: 1000})
	if err != nil {
		return err
	}
	if c.json {
		out := demoJSON{Clock: c.now().UTC(), Instances: []demoInstance{}, OpenTasks: []taskJSON{}, DeadLetters: []deadLetterJSON{}}
		for _, in := range list {
			out.Instances = append(out.Instances, demoInstance{instanceJSON: toInstanceJSON(in), Story: stories[in.ID]})
		}
		for i := range tasks {
			out.OpenTasks = append(out.OpenTasks, c.toTaskJSON(&tasks[i]))
		}
		for i := range letters {
			out.DeadLetters = append(out.DeadLetters, c.toDeadLetterJSON(&letters[i]))
		}
		return c.printJSON(out)
	}
	c.printf("Demo data: %d instances in a memory store that lives only for one command.\n", len(list))
	c.printf("Every command seeds it afresh, so each starts from this state; the clock\n")
	c.printf("reads %s UTC and moves only when the seeding moves it.\n\n", when(c.now()))
	rows := make([][]string, len(list))
	for i, in := range list {
		rows[i] = []string{in.ID, in.Workflow, string(in.Status), stories[in.ID]}
	}
	table(c.stdout, "", []string{"INSTANCE", "WORKFLOW", "STATUS", "WHAT IT SHOWS"}, rows)
	c.printf("\nOpen tasks\n")
	c.taskTable("  ", tasks, true)
	c.printf("\nDead letters\n")
	c.deadLetterTable("  ", letters, true)
	c.printf("\nTry:\n")
	for _, t := range tryNext {
		c.printf("  %s\n", t)
	}
	return nil
}
