package chronicle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/history"
)

// Retention is durable background work: the built-in workflow
// [RetentionWorkflow], one instance per store ([RetentionInstanceID])
// that every engine with Options.Retention starts if it is not running,
// calls an activity that applies the policies ([Engine.RunRetention]),
// records what it did in its custom status and waits for a durable timer.
// A crash at any point loses nothing: the activity is retried, a purge
// that stopped half-way is finished by the next, and a held instance is
// never purged. See docs/audit.md, "Legal hold and retention".

const (
	// RetentionWorkflow is the name of the built-in workflow that applies
	// retention policies; every engine registers it.
	RetentionWorkflow = "chronicle.retention"
	// RetentionInstanceID is the id of its one instance.
	RetentionInstanceID = "chronicle.retention"

	retentionActivity = "chronicle.retention.run"
	// retentionPerRun bounds the instances one run purges per policy;
	// a run that reaches it is followed by another at once.
	retentionPerRun = 1000
	// retentionContinueEvery is how many runs an execution makes before
	// it continues as new.
	retentionContinueEvery = 50
)

// RetentionPolicy says how long the ended instances of a workflow are
// kept.
type RetentionPolicy struct {
	// After is how long after its end (its CompletedAt) an instance is
	// purged; required, at least a minute.
	After time.Duration
	// Archive receives each history before it is purged; when it fails
	// the instance is kept and tried again at the next run. Nil uses
	// Options.PurgeArchive (and, without one, keeps only the tombstone).
	Archive ArchiveFunc
}

func validateRetention(policies map[string]RetentionPolicy, every time.Duration) error {
	var errs []string
	for _, name := range slices.Sorted(maps.Keys(policies)) {
		p := policies[name]
		switch {
		case history.ValidateID("workflow name", name) != nil:
			errs = append(errs, fmt.Sprintf("Retention names invalid workflow %q", name))
		case name == RetentionWorkflow || name == BatchWorkflow || name == ScheduleWorkflow:
			errs = append(errs, fmt.Sprintf("Retention names the built-in workflow %q", name))
		case p.After < time.Minute:
			errs = append(errs, fmt.Sprintf("Retention[%q].After is %s, at least 1m allowed", name, p.After))
		}
	}
	if every < 0 {
		errs = append(errs, fmt.Sprintf("RetentionEvery is %s, must not be negative", every))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// RetentionReport is what one run of the retention policies did.
type RetentionReport struct {
	// Purged are the tombstones of the instances purged, by workflow.
	Purged map[string][]Tombstone
	// Held are the instances a policy selected and left alone because
	// they are under a legal hold.
	Held []string
	// Skipped maps the other instances a policy selected and did not
	// purge to why (the archive failed, a round was running).
	Skipped map[string]string
	// More is set when a policy reached the most one run purges: the next
	// run goes on at once.
	More bool
}

// Count returns how many instances the run purged.
func (r *RetentionReport) Count() int {
	n := 0
	for _, ts := range r.Purged {
		n += len(ts)
	}
	return n
}

// RunRetention applies the engine's retention policies once, now: for
// each workflow of Options.Retention, it purges (see [Engine.Purge]) the
// ended instances whose CompletedAt is older than the policy's After,
// archiving each first, with "system:retention" as the actor of their
// tombstones (signed like any purge's when the engine signs checkpoints).
// Instances under a legal hold are listed in Held and left alone. The
// built-in retention workflow calls it every Options.RetentionEvery; it
// is safe to call at any time, from any node.
func (e *Engine) RunRetention(ctx context.Context) (*RetentionReport, error) {
	rep := &RetentionReport{Purged: map[string][]Tombstone{}, Skipped: map[string]string{}}
	now := e.now()
	for _, name := range slices.Sorted(maps.Keys(e.opts.Retention)) {
		p := e.opts.Retention[name]
		archive := p.Archive
		if archive == nil {
			archive = e.opts.PurgeArchive
		}
		cutoff := now.Add(-p.After).UTC().Truncate(time.Microsecond)
		where := fmt.Sprintf("status IN ('completed', 'failed', 'terminated') AND completed_at < '%s'", cutoff.Format(time.RFC3339Nano))
		purged, after := 0, ""
		for {
			page, err := e.ListInstances(ctx, InstanceFilter{Workflow: name, Where: where, AfterID: after, Limit: 100})
			if err != nil {
				return rep, fmt.Errorf("retention of %s: %w", name, err)
			}
			if len(page) == 0 {
				break
			}
			after = page[len(page)-1].ID
			ids := make([]string, 0, len(page))
			for _, in := range page {
				if in.Status.Terminal() && !in.CompletedAt.IsZero() && in.CompletedAt.Before(cutoff) {
					ids = append(ids, in.ID)
				}
			}
			_ = Heartbeat(ctx)
			r, err := e.purge(ctx, PurgeOptions{InstanceIDs: ids, Archive: archive}, history.ActorRetention)
			var held *HeldError
			if errors.As(err, &held) && err == error(held) {
				for _, h := range held.Holds {
					rep.Held = append(rep.Held, h.InstanceID)
				}
				err = nil
			}
			if r != nil {
				rep.Purged[name] = append(rep.Purged[name], r.Purged...)
				purged += len(r.Purged)
				for id, why := range r.Skipped {
					if !slices.Contains(rep.Held, id) {
						rep.Skipped[id] = why
					}
				}
			}
			if err != nil {
				return rep, fmt.Errorf("retention of %s: %w", name, err)
			}
			if purged >= retentionPerRun {
				rep.More = true
				break
			}
			if len(page) < 100 {
				break
			}
		}
		if len(rep.Purged[name]) == 0 {
			delete(rep.Purged, name)
		}
	}
	return rep, nil
}

// retentionState is the input and custom status of the retention
// workflow.
type retentionState struct {
	Runs    int64     `json:"runs"`
	LastRun time.Time `json:"last_run,omitempty"`
	// Purged and Held count the last run's; Total every run's purges.
	Purged int    `json:"purged"`
	Held   int    `json:"held"`
	Total  int64  `json:"total"`
	Error  string `json:"error,omitempty"`
}

type retentionResult struct {
	Purged int
	Held   int
	More   bool
	Every  time.Duration
	Error  string
}

// registerRetention registers the built-in retention workflow and its
// activity.
func (e *Engine) registerRetention() error {
	if err := RegisterWorkflow(e, RetentionWorkflow, runRetention); err != nil {
		return err
	}
	return RegisterActivity(e, retentionActivity, e.retentionRun)
}

// runRetention is the retention workflow.
func runRetention(ctx *Context, st retentionState) (retentionState, error) {
	for runs := 0; runs < retentionContinueEvery; runs++ {
		var res retentionResult
		err := ctx.CallActivity(retentionActivity, st.Runs, &ActivityOptions{Retry: untilStoreAnswers}).Get(&res)
		st.Runs++
		st.LastRun = ctx.Now()
		st.Purged, st.Held, st.Error = res.Purged, res.Held, res.Error
		if err != nil {
			st.Error = err.Error()
		}
		st.Total += int64(res.Purged)
		if err := ctx.SetCustomStatus(st); err != nil {
			return st, err
		}
		if res.More && res.Error == "" && err == nil {
			continue
		}
		every := res.Every
		if every <= 0 {
			every = time.Hour
		}
		if err := ctx.Timer(every, &TimerOptions{Name: "retention"}).Get(nil); err != nil {
			return st, err
		}
	}
	return st, ctx.ContinueAsNew(st)
}

// retentionRun is the activity of the retention workflow: one run of
// this engine's policies. A failure is reported in the result, for the
// workflow to record, and tried again at the next run.
func (e *Engine) retentionRun(ctx context.Context, _ int64) (retentionResult, error) {
	res := retentionResult{Every: e.opts.RetentionEvery}
	if res.Every <= 0 {
		res.Every = time.Hour
	}
	rep, err := e.RunRetention(ctx)
	if rep != nil {
		res.Purged, res.Held, res.More = rep.Count(), len(rep.Held), rep.More
	}
	if err != nil {
		if ctx.Err() != nil || !permanent(err) && !errors.Is(err, ErrUnsupported) {
			return res, err // the store did not answer: retried
		}
		res.Error = err.Error()
	}
	return res, nil
}

// startRetention starts the retention workflow unless it runs, when the
// engine has retention policies.
func (e *Engine) startRetention(ctx context.Context) error {
	if len(e.opts.Retention) == 0 {
		return nil
	}
	rec, pending, err := e.lookup(ctx, RetentionInstanceID)
	if err != nil {
		return err
	}
	if pending || rec != nil && !rec.Status.Terminal() {
		return nil
	}
	reuse := ReuseError
	if rec != nil {
		reuse = ReuseTerminateAndRestart // it ended (an operator terminated it): start it again
	}
	_, err = e.Start(ctx, RetentionWorkflow, retentionState{}, &StartOptions{InstanceID: RetentionInstanceID, Reuse: reuse})
	if errors.Is(err, ErrInstanceExists) {
		return nil // another node started it
	}
	if err != nil {
		e.log.WarnContext(ctx, "retention workflow not started", slog.Any("error", err))
	}
	return err
}
