package chronicle

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
	_ "time/tzdata" // schedules name IANA time zones; the binary carries the database

	"github.com/robfig/cron/v3"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// A schedule is an instance of the built-in workflow [ScheduleWorkflow]
// with the id "schedule:<id>": its definition and state live in its
// history, its changes arrive as signals that carry their actor, its
// firings wait on durable timers and start the target workflow, each at
// most once (the instance id of a firing is "<id>@<nominal time, RFC 3339,
// UTC>"): from the schedule's own round (a detached start,
// [Context.StartWorkflow]) when no overlap policy needs the previous
// firing's status, else through an activity whose start is idempotent.
// See docs/operations.md, "Schedules".

const (
	// ScheduleWorkflow is the name of the built-in workflow that runs
	// schedules; every engine registers it.
	ScheduleWorkflow = "chronicle.schedule"
	// SchedulePrefix prefixes a schedule's id to make the id of its
	// instance.
	SchedulePrefix = "schedule:"
	// ScheduleCancelEvent is the signal a firing raises on the previous
	// firing's instance under [OverlapCancelPrevious]: workflow code that
	// waits for it can wind down and end.
	ScheduleCancelEvent = "chronicle.schedule.cancel"

	scheduleChangeEvent  = "chronicle.schedule.change"
	scheduleFireActivity = "chronicle.schedule.fire"
	// scheduleDirectChange is the version change of the schedule
	// workflow that starts firings from its round (version 1) and keeps
	// its executions short (version 2: it continues as new every
	// scheduleShortEvery wake-ups, without setting its status just before);
	// older executions replay the activity path, or 50 wake-ups.
	scheduleDirectChange = "chronicle.schedule.direct-start"
	// scheduleContinueEvery is how many wake-ups an execution of a
	// schedule recorded before version 2 handles before it continues as
	// new.
	scheduleContinueEvery = 50
	// scheduleShortEvery is how many wake-ups an execution of version 2
	// handles before it continues as new: a round that finds no cached
	// executor replays the execution, so a short one keeps each cold
	// wake-up to a few events, where continuing costs a wake-up four
	// events (the end, the start of the next, its turn and version marker).
	scheduleShortEvery = 10
	// scheduleBufferPoll is how often a schedule with a buffered firing
	// checks whether the previous firing has ended.
	scheduleBufferPoll = time.Minute
	// scheduleKeep bounds the recent firings and changes a schedule keeps.
	scheduleKeep = 20
	// maxBackfill bounds the firings one backfill may start.
	maxBackfill = 1000
	// maxMissed bounds the missed firings a schedule walks one by one
	// after a downtime; past it, it skips to the catch-up window at once.
	maxMissed = 10000
	// DefaultCatchupWindow is the catch-up window of a schedule that
	// sets none.
	DefaultCatchupWindow = time.Hour
)

// scheduleVersion is the version of scheduleDirectChange new executions
// record; a test sets it lower to record an execution as older code did.
var scheduleVersion = 2

var (
	// ErrScheduleNotFound: no schedule has this id, or it was deleted.
	ErrScheduleNotFound = errors.New("chronicle: schedule not found")
	// ErrScheduleExists: CreateSchedule named the id of a live schedule.
	ErrScheduleExists = errors.New("chronicle: schedule exists")
)

// OverlapPolicy says what a firing does while the instance the previous
// firing started is still running.
type OverlapPolicy string

const (
	// OverlapSkip (the default) skips the firing; it is recorded as
	// skipped.
	OverlapSkip OverlapPolicy = "skip"
	// OverlapBufferOne keeps one firing and starts it when the previous
	// instance ends; further firings while one is buffered are skipped.
	OverlapBufferOne OverlapPolicy = "buffer-one"
	// OverlapAllowAll starts every firing, whatever runs.
	OverlapAllowAll OverlapPolicy = "allow-all"
	// OverlapCancelPrevious raises [ScheduleCancelEvent] on the previous
	// instance and buffers the firing (as OverlapBufferOne) until it ends.
	OverlapCancelPrevious OverlapPolicy = "cancel-previous"
	// OverlapTerminatePrevious terminates the previous instance and starts
	// the firing at once.
	OverlapTerminatePrevious OverlapPolicy = "terminate-previous"
)

func (p OverlapPolicy) valid() bool {
	switch p {
	case OverlapSkip, OverlapBufferOne, OverlapAllowAll, OverlapCancelPrevious, OverlapTerminatePrevious:
		return true
	}
	return false
}

// ScheduleSpec says when a schedule fires: a cron expression or a fixed
// interval, in a time zone, between optional start and end times.
type ScheduleSpec struct {
	// Cron is a standard five-field cron expression ("30 9 * * 1-5") or a
	// descriptor ("@daily", "@every 90m"), read in TimeZone. Exactly one
	// of Cron and Every is set.
	Cron string
	// Every fires at Start + k×Every (from the Unix epoch when Start is
	// zero).
	Every time.Duration
	// TimeZone is an IANA name ("Europe/Paris"); default UTC.
	TimeZone string
	// Start and End, when set, bound the nominal times (both inclusive).
	Start, End time.Time
	// Jitter delays each firing by whole seconds in [0, Jitter) drawn from
	// the schedule id and the nominal time: the same on every node and
	// replay.
	// The nominal time, not the delayed one, names the instance.
	Jitter time.Duration
}

// ScheduleOptions define a schedule for CreateSchedule and UpdateSchedule.
type ScheduleOptions struct {
	// Spec says when it fires.
	Spec ScheduleSpec
	// Workflow is started at each firing with Input; a [Client] encodes
	// Input with its codec as it is.
	Workflow string
	Input    any
	// Overlap says what a firing does while the previous one runs;
	// default OverlapSkip.
	Overlap OverlapPolicy
	// CatchupWindow is how late a firing may still start after a downtime
	// of every node; older missed firings are recorded as skipped.
	// Default DefaultCatchupWindow.
	CatchupWindow time.Duration
	// Priority and Concurrency are the start options of the instances the
	// schedule starts, as [StartOptions] has them: their priority in the
	// queues, and a concurrency key and limit (Concurrency needs a store
	// with flow control).
	Priority    int
	Concurrency *Concurrency
	// Paused creates the schedule paused (CreateSchedule only).
	Paused bool
	// Note is recorded with the change (the pause note when Paused).
	Note string
	// Actor is the user making the change, recorded with it; default
	// "system".
	Actor string
}

// ScheduleFiring is one nominal time of a schedule and what became of it.
type ScheduleFiring struct {
	// Nominal is the time the spec named (UTC).
	Nominal time.Time `json:"nominal"`
	// InstanceID is the instance it starts: "<id>@<nominal RFC 3339>".
	InstanceID string `json:"instance_id"`
	// Outcome is "started", "already-started" (an earlier firing, a
	// backfill or another node started it), "skipped" (overlap),
	// "missed" (outside the catch-up window), or "buffered". A firing
	// started from the schedule's round (see docs/operations.md,
	// "Schedules") is "started" once its start is written: when a
	// backfill had started the id before, the instance keeps that start.
	Outcome string `json:"outcome"`
	// Actor is "schedule" for a firing of the spec, or who triggered or
	// backfilled it.
	Actor string `json:"actor"`
	// At is when the schedule recorded it (workflow time).
	At time.Time `json:"at"`
}

// ScheduleChange is one change of a schedule, as recorded.
type ScheduleChange struct {
	// Kind is create, update, pause, resume, trigger, backfill or delete.
	Kind string `json:"kind"`
	// Actor is who made it ("user:<name>" or "system").
	Actor string `json:"actor"`
	// Note is the reason or pause note given with it.
	Note string `json:"note,omitempty"`
	// At is when the schedule recorded it (workflow time).
	At time.Time `json:"at"`
}

// ScheduleDescription is a schedule as of its last turn.
type ScheduleDescription struct {
	ID            string
	Spec          ScheduleSpec
	Workflow      string
	Overlap       OverlapPolicy
	CatchupWindow time.Duration
	// Priority and Concurrency are the start options of its firings.
	Priority    int
	Concurrency *Concurrency
	// Paused and Note: a paused schedule does not fire; Note says why.
	Paused bool
	Note   string
	// Next are the next nominal times (up to five), none when paused.
	Next []time.Time
	// Recent are the newest firings, oldest first; Changes the newest
	// changes.
	Recent  []ScheduleFiring
	Changes []ScheduleChange
	// Buffered is the firing waiting for the previous one to end.
	Buffered *ScheduleFiring
	// Started and Skipped count firings over the schedule's life.
	Started, Skipped int64
	// Running is the instance the newest firing started.
	Running string
}

// scheduleState is the input and custom status of a schedule instance.
type scheduleState struct {
	ID            string
	Spec          ScheduleSpec
	Workflow      string
	Input         []byte
	Overlap       OverlapPolicy
	CatchupWindow time.Duration
	Priority      int          `json:",omitempty"`
	Concurrency   *Concurrency `json:",omitempty"`
	Paused        bool
	Note          string
	// Last is the newest nominal time handled; firings come after it.
	Last     time.Time
	Running  string
	Buffered *ScheduleFiring
	Recent   []ScheduleFiring
	Changes  []ScheduleChange
	Started  int64
	Skipped  int64
	Deleted  bool
	// direct: this execution starts firings from its round when it can
	// (see fire); set by the workflow, never stored.
	direct bool
}

// scheduleSignal is a change sent to a schedule instance.
type scheduleSignal struct {
	Kind  string
	Actor string
	Note  string
	// Def is the new definition of an update.
	Def *scheduleState
	// From and To bound a backfill.
	From, To time.Time
}

type scheduleFireInput struct {
	ScheduleID string
	InstanceID string
	Workflow   string
	Input      []byte
	Overlap    OverlapPolicy
	Previous   string
	Actor      string
	// Priority and Concurrency are the schedule's start options.
	Priority    int          `json:",omitempty"`
	Concurrency *Concurrency `json:",omitempty"`
}

type scheduleFireResult struct {
	// Outcome is "started", "already-started" or "busy".
	Outcome string
}

// ScheduleInstanceID returns the instance id of a firing.
func ScheduleInstanceID(scheduleID string, nominal time.Time) string {
	return scheduleID + "@" + nominal.UTC().Format(time.RFC3339Nano)
}

// compiled is a validated spec ready to compute nominal times.
type compiled struct {
	spec  ScheduleSpec
	loc   *time.Location
	sched cron.Schedule
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func compileSpec(s ScheduleSpec) (*compiled, error) {
	c := &compiled{spec: s, loc: time.UTC}
	switch {
	case s.Cron != "" && s.Every != 0:
		return nil, invalid("schedule spec sets both Cron and Every")
	case s.Cron == "" && s.Every == 0:
		return nil, invalid("schedule spec sets neither Cron nor Every")
	case s.Every < 0:
		return nil, invalid("schedule interval %s is negative", s.Every)
	case s.Every != 0 && s.Every < time.Second:
		return nil, invalid("schedule interval %s is under a second", s.Every)
	case s.Jitter < 0:
		return nil, invalid("schedule jitter %s is negative", s.Jitter)
	case !s.Start.IsZero() && !s.End.IsZero() && s.End.Before(s.Start):
		return nil, invalid("schedule ends (%s) before it starts (%s)", s.End, s.Start)
	}
	if s.TimeZone != "" {
		loc, err := time.LoadLocation(s.TimeZone)
		if err != nil || s.TimeZone == "Local" {
			return nil, invalid("schedule time zone %q: not an IANA time zone", s.TimeZone)
		}
		c.loc = loc
	}
	if s.Cron != "" {
		if strings.Contains(s.Cron, "TZ=") {
			return nil, invalid("schedule cron %q: set the time zone in TimeZone", s.Cron)
		}
		sched, err := cronParser.Parse(s.Cron)
		if err != nil {
			return nil, invalid("schedule cron %q: %v", s.Cron, err)
		}
		c.sched = sched
	}
	return c, nil
}

// next returns the first nominal time after t, and false when there is
// none (past End).
func (c *compiled) next(t time.Time) (time.Time, bool) {
	s := c.spec
	if !s.Start.IsZero() && t.Before(s.Start) {
		t = s.Start.Add(-time.Nanosecond)
	}
	var n time.Time
	if c.sched != nil {
		for n = c.sched.Next(t.In(c.loc)); !n.IsZero() && c.repeated(n); {
			n = c.sched.Next(n)
		}
		if n.IsZero() {
			return time.Time{}, false
		}
	} else {
		anchor := s.Start
		if anchor.IsZero() {
			anchor = time.Unix(0, 0)
		}
		if t.Before(anchor) {
			n = anchor
		} else {
			k := t.Sub(anchor)/s.Every + 1
			n = anchor.Add(k * s.Every)
		}
	}
	if !s.End.IsZero() && n.After(s.End) {
		return time.Time{}, false
	}
	return n.UTC(), true
}

// repeated reports whether the wall-clock time of n in the schedule's
// zone occurred before, less than two hours earlier: the second pass of
// an hour a DST change repeats, which a cron time fires in once.
func (c *compiled) repeated(n time.Time) bool {
	wall := n.In(c.loc)
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		e := n.Add(-back).In(c.loc)
		if e.Year() == wall.Year() && e.YearDay() == wall.YearDay() && e.Hour() == wall.Hour() && e.Minute() == wall.Minute() && e.Second() == wall.Second() {
			return true
		}
	}
	return false
}

// jitter returns the deterministic delay of a firing.
func jitter(id string, nominal time.Time, max time.Duration) time.Duration {
	secs := uint64(max / time.Second)
	if secs == 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(ScheduleInstanceID(id, nominal)))
	return time.Duration(h.Sum64()%secs) * time.Second
}

// checkSchedule validates options and returns the state they define.
func (e *Engine) checkSchedule(id string, o *ScheduleOptions) (*scheduleState, error) {
	if err := e.validateID("schedule id", id); err != nil {
		return nil, err
	}
	if strings.Contains(id, "@") {
		return nil, invalid("schedule id %q holds '@'", id)
	}
	// The longest id of a firing must be a valid instance id too.
	longest := ScheduleInstanceID(SchedulePrefix+id, time.Date(2000, 1, 1, 0, 0, 0, 999999999, time.UTC))
	if err := e.validateID("schedule id (with the prefix and a firing's time)", longest); err != nil {
		return nil, err
	}
	if _, err := compileSpec(o.Spec); err != nil {
		return nil, err
	}
	if err := e.validateID("workflow name", o.Workflow); err != nil {
		return nil, err
	}
	if o.Overlap == "" {
		o.Overlap = OverlapSkip
	}
	if !o.Overlap.valid() {
		return nil, invalid("overlap policy %q", o.Overlap)
	}
	if o.CatchupWindow < 0 {
		return nil, invalid("catch-up window %s is negative", o.CatchupWindow)
	}
	if o.CatchupWindow == 0 {
		o.CatchupWindow = DefaultCatchupWindow
	}
	if err := provider.ValidatePriority(o.Priority); err != nil {
		return nil, fmt.Errorf("%w: schedule %w", ErrInvalidArgument, err)
	}
	var conc *Concurrency
	if c := o.Concurrency; c != nil {
		if err := provider.ValidateLimit(c.Key, c.Limit); err != nil {
			return nil, fmt.Errorf("%w: schedule %w", ErrInvalidArgument, err)
		}
		if c.Key != "" {
			if _, err := e.flowStore(); err != nil {
				return nil, err
			}
			conc = &Concurrency{Key: c.Key, Limit: c.Limit}
		}
	}
	if err := checkText("note", o.Note); err != nil {
		return nil, err
	}
	if _, err := e.actor(o.Actor); err != nil {
		return nil, err
	}
	in, err := e.startInput(o.Workflow, o.Input)
	if err != nil && !errors.Is(err, ErrUnknownWorkflow) {
		return nil, err
	}
	if err != nil {
		in = o.Input // a worker elsewhere runs it
	}
	input, err := e.encode("schedule input", in)
	if err != nil {
		return nil, err
	}
	spec := o.Spec
	spec.Start, spec.End = utc(spec.Start), utc(spec.End)
	return &scheduleState{
		ID: id, Spec: spec, Workflow: o.Workflow, Input: input, Overlap: o.Overlap,
		CatchupWindow: o.CatchupWindow, Priority: o.Priority, Concurrency: conc,
	}, nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// CreateSchedule creates a schedule with the id and starts running it:
// its first firing is the first nominal time after now. A bad spec, time
// zone, overlap policy or negative duration is refused with
// ErrInvalidArgument before anything is written; the id of a live
// schedule with ErrScheduleExists (a deleted one's id may be reused).
func (e *Engine) CreateSchedule(ctx context.Context, id string, opts ScheduleOptions) error {
	st, err := e.checkSchedule(id, &opts)
	if err != nil {
		return err
	}
	actor, _ := e.actor(opts.Actor)
	now := e.now()
	st.Last = now
	st.Paused = opts.Paused
	if opts.Paused {
		st.Note = opts.Note
	}
	st.Changes = []ScheduleChange{{Kind: "create", Actor: actor, Note: opts.Note, At: now}}
	reuse := ReuseError
	rec, start, err := e.find(ctx, SchedulePrefix+id, true, nil)
	if err != nil {
		return err
	}
	if start != nil || (rec != nil && !rec.Status.Terminal()) {
		return fmt.Errorf("%w: %s", ErrScheduleExists, id)
	}
	if rec != nil {
		reuse = ReuseTerminateAndRestart // deleted: its id starts again
	}
	_, err = e.Start(ctx, ScheduleWorkflow, *st, &StartOptions{InstanceID: SchedulePrefix + id, Actor: opts.Actor, Reuse: reuse,
		Tags: map[string]string{"chronicle.schedule": id}})
	if errors.Is(err, ErrInstanceExists) {
		return fmt.Errorf("%w: %s", ErrScheduleExists, id)
	}
	return err
}

// signalSchedule sends a change to a live schedule.
func (e *Engine) signalSchedule(ctx context.Context, id string, s scheduleSignal, actor string) error {
	if err := e.validateID("schedule id", id); err != nil {
		return err
	}
	if err := checkText("note", s.Note); err != nil {
		return err
	}
	a, err := e.actor(actor)
	if err != nil {
		return err
	}
	s.Actor = a
	err = e.RaiseEvent(ctx, SchedulePrefix+id, scheduleChangeEvent, s, &RaiseOptions{Actor: actor, Sender: "schedule api"})
	if errors.Is(err, ErrInstanceNotFound) || errors.Is(err, ErrInstanceNotRunning) {
		return fmt.Errorf("%w: %s", ErrScheduleNotFound, id)
	}
	return err
}

// UpdateSchedule replaces the definition of a schedule (spec, workflow,
// input, overlap policy, catch-up window); Paused is ignored, Note is
// recorded as the reason. Firings come after the update's time.
func (e *Engine) UpdateSchedule(ctx context.Context, id string, opts ScheduleOptions) error {
	st, err := e.checkSchedule(id, &opts)
	if err != nil {
		return err
	}
	return e.signalSchedule(ctx, id, scheduleSignal{Kind: "update", Note: opts.Note, Def: st}, opts.Actor)
}

// PauseSchedule pauses a schedule with a note saying why; nothing fires
// until ResumeSchedule, and the firings of the pause are not caught up.
func (e *Engine) PauseSchedule(ctx context.Context, id, note, actor string) error {
	return e.signalSchedule(ctx, id, scheduleSignal{Kind: "pause", Note: note}, actor)
}

// ResumeSchedule resumes a paused schedule; its next firing is the first
// nominal time after the resume.
func (e *Engine) ResumeSchedule(ctx context.Context, id, note, actor string) error {
	return e.signalSchedule(ctx, id, scheduleSignal{Kind: "resume", Note: note}, actor)
}

// TriggerSchedule fires a schedule now, under its overlap policy, with
// the time the schedule handles the trigger as the nominal time.
func (e *Engine) TriggerSchedule(ctx context.Context, id, actor string) error {
	return e.signalSchedule(ctx, id, scheduleSignal{Kind: "trigger"}, actor)
}

// BackfillSchedule starts the firings of the spec whose nominal times lie
// in [from, to] (at most 1000) that were never started, each at most
// once: firings already started are recorded as already-started. Overlap
// policies do not apply to a backfill.
func (e *Engine) BackfillSchedule(ctx context.Context, id string, from, to time.Time, actor string) error {
	if from.IsZero() || to.IsZero() {
		return invalid("backfill of %s needs a from and a to time", id)
	}
	if to.Before(from) {
		return invalid("backfill ends (%s) before it starts (%s)", to, from)
	}
	d, err := e.DescribeSchedule(ctx, id)
	if err != nil {
		return err
	}
	c, err := compileSpec(d.Spec)
	if err != nil {
		return err
	}
	n := 0
	for t, ok := c.next(from.Add(-time.Nanosecond)); ok && !t.After(to); t, ok = c.next(t) {
		if n++; n > maxBackfill {
			return invalid("backfill of %s holds more than %d firings", id, maxBackfill)
		}
	}
	return e.signalSchedule(ctx, id, scheduleSignal{Kind: "backfill", From: from.UTC(), To: to.UTC()}, actor)
}

// DeleteSchedule deletes a schedule: its instance completes and nothing
// fires any more; instances it started keep running.
func (e *Engine) DeleteSchedule(ctx context.Context, id, note, actor string) error {
	return e.signalSchedule(ctx, id, scheduleSignal{Kind: "delete", Note: note}, actor)
}

// DescribeSchedule describes a schedule as of its last turn.
func (e *Engine) DescribeSchedule(ctx context.Context, id string) (*ScheduleDescription, error) {
	if err := e.validateID("schedule id", id); err != nil {
		return nil, err
	}
	inst, err := e.Describe(ctx, SchedulePrefix+id)
	if errors.Is(err, ErrInstanceNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrScheduleNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return e.scheduleDescription(ctx, inst)
}

func (e *Engine) scheduleDescription(ctx context.Context, inst *Instance) (*ScheduleDescription, error) {
	id := strings.TrimPrefix(inst.ID, SchedulePrefix)
	if inst.Status.Terminal() {
		return nil, fmt.Errorf("%w: %s (%s)", ErrScheduleNotFound, id, inst.Status)
	}
	var st scheduleState
	ok, err := inst.CustomStatus(&st)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: %w", id, err)
	}
	if !ok {
		// Not run yet: the definition is the input of its start, queued
		// or in history.
		input, err := e.scheduleInput(ctx, inst.ID)
		if err != nil {
			return nil, err
		}
		if err := e.Decode(input, &st); err != nil {
			return nil, fmt.Errorf("schedule %s: %w", id, err)
		}
	}
	d := &ScheduleDescription{
		ID: id, Spec: st.Spec, Workflow: st.Workflow, Overlap: st.Overlap, CatchupWindow: st.CatchupWindow,
		Priority: st.Priority, Concurrency: st.Concurrency,
		Paused: st.Paused, Note: st.Note, Recent: st.Recent, Changes: st.Changes, Buffered: st.Buffered,
		Started: st.Started, Skipped: st.Skipped, Running: st.Running,
	}
	if c, err := compileSpec(st.Spec); err == nil && !st.Paused {
		for t, ok := c.next(st.Last); ok && len(d.Next) < 5; t, ok = c.next(t) {
			d.Next = append(d.Next, t)
		}
	}
	return d, nil
}

// scheduleInput returns the input of the newest start of a schedule
// instance that has not set its status yet.
func (e *Engine) scheduleInput(ctx context.Context, instanceID string) ([]byte, error) {
	_, start, err := e.find(ctx, instanceID, true, nil)
	if err != nil {
		return nil, err
	}
	if start != nil {
		a, err := history.DecodeAttributes(start.Kind, start.Payload)
		if err != nil {
			return nil, err
		}
		if s, ok := a.(*history.ExecutionStarted); ok {
			return s.Input, nil
		}
	}
	events, err := e.History(ctx, instanceID)
	if err != nil {
		return nil, err
	}
	var input []byte
	for _, ev := range events {
		if ev.Kind == history.KindExecutionStarted {
			a, err := ev.Attributes()
			if err != nil {
				return nil, err
			}
			input = a.(*history.ExecutionStarted).Input
		}
	}
	return input, nil
}

// ListSchedules returns the live schedules in id order, as of their last
// turns.
func (e *Engine) ListSchedules(ctx context.Context) ([]*ScheduleDescription, error) {
	var out []*ScheduleDescription
	err := e.eachInstance(ctx, InstanceFilter{Workflow: ScheduleWorkflow}, func(inst *Instance) error {
		if inst.Status.Terminal() || !strings.HasPrefix(inst.ID, SchedulePrefix) {
			return nil
		}
		d, err := e.scheduleDescription(ctx, inst)
		if err == nil {
			out = append(out, d)
		}
		return err
	})
	return out, err
}

// registerSchedules registers the built-in schedule workflow and its
// activity.
func (e *Engine) registerSchedules() error {
	if err := RegisterWorkflow(e, ScheduleWorkflow, runSchedule); err != nil {
		return err
	}
	return RegisterActivity(e, scheduleFireActivity, e.scheduleFire)
}

// runSchedule is the schedule workflow.
func runSchedule(ctx *Context, st scheduleState) (scheduleState, error) {
	c, err := compileSpec(st.Spec)
	if err != nil {
		return st, err
	}
	// Executions recorded before firings started from the round replay
	// the activity path.
	version := ctx.Version(scheduleDirectChange, DefaultVersion, scheduleVersion)
	st.direct = version >= 1
	every := scheduleContinueEvery
	if version >= 2 {
		every = scheduleShortEvery
	}
	sig := ctx.WaitEvent(scheduleChangeEvent, nil)
	for wakes := 0; ; wakes++ {
		// The next execution sets the status in the same round: version
		// 2 does not set it before it continues.
		cont := wakes >= every && !sig.Ready() && !st.Deleted
		if !cont || version < 2 {
			if err := ctx.SetCustomStatus(st); err != nil {
				return st, err
			}
		}
		if st.Deleted {
			return st, nil
		}
		if cont {
			return st, ctx.ContinueAsNew(st)
		}
		now := ctx.Now()
		var wake time.Time
		if st.Buffered != nil {
			wake = now.Add(scheduleBufferPoll)
		}
		if !st.Paused {
			if n, ok := c.next(st.Last); ok {
				if at := n.Add(jitter(st.ID, n, st.Spec.Jitter)); wake.IsZero() || at.Before(wake) {
					wake = at
				}
			}
		}
		var timer Future
		if !wake.IsZero() {
			timer = ctx.Timer(wake.Sub(now), &TimerOptions{Name: "schedule wake-up"})
			ctx.WhenAny(sig, timer)
		} else {
			ctx.WhenAny(sig)
		}
		if sig.Ready() {
			if timer != nil {
				ctx.CancelTimer(timer)
			}
			var s scheduleSignal
			err := sig.Get(&s)
			sig = ctx.WaitEvent(scheduleChangeEvent, nil)
			if err != nil {
				continue
			}
			if c, err = st.change(ctx, c, s); err != nil {
				return st, err
			}
			continue
		}
		if err := st.tick(ctx, c); err != nil {
			return st, err
		}
	}
}

func (st *scheduleState) record(f ScheduleFiring) {
	st.Recent = append(st.Recent, f)
	if len(st.Recent) > scheduleKeep {
		st.Recent = st.Recent[len(st.Recent)-scheduleKeep:]
	}
	switch f.Outcome {
	case "started":
		st.Started++
	case "skipped", "missed":
		st.Skipped++
	}
}

// change applies a signal.
func (st *scheduleState) change(ctx *Context, c *compiled, s scheduleSignal) (*compiled, error) {
	now := ctx.Now()
	st.Changes = append(st.Changes, ScheduleChange{Kind: s.Kind, Actor: s.Actor, Note: s.Note, At: now})
	if len(st.Changes) > scheduleKeep {
		st.Changes = st.Changes[len(st.Changes)-scheduleKeep:]
	}
	switch s.Kind {
	case "update":
		if s.Def == nil {
			return c, nil
		}
		nc, err := compileSpec(s.Def.Spec)
		if err != nil {
			return c, nil // refused by the client API; recorded, not applied
		}
		st.Spec, st.Workflow, st.Input, st.Overlap, st.CatchupWindow = s.Def.Spec, s.Def.Workflow, s.Def.Input, s.Def.Overlap, s.Def.CatchupWindow
		st.Priority, st.Concurrency = s.Def.Priority, s.Def.Concurrency
		st.Last = later(st.Last, now)
		return nc, nil
	case "pause":
		st.Paused, st.Note = true, s.Note
	case "resume":
		if st.Paused {
			st.Paused, st.Note = false, ""
			st.Last = later(st.Last, now)
		}
	case "trigger":
		return c, st.fire(ctx, now, s.Actor, st.Overlap, true)
	case "backfill":
		for t, ok := c.next(s.From.Add(-time.Nanosecond)); ok && !t.After(s.To); t, ok = c.next(t) {
			if err := st.fire(ctx, t, s.Actor, OverlapAllowAll, false); err != nil {
				return c, err
			}
		}
	case "delete":
		st.Deleted = true
	}
	return c, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// tick handles a wake-up: the buffered firing, then the due ones.
func (st *scheduleState) tick(ctx *Context, c *compiled) error {
	now := ctx.Now()
	if b := st.Buffered; b != nil {
		st.Buffered = nil
		if err := st.fire(ctx, b.Nominal, b.Actor, st.Overlap, true); err != nil {
			return err
		}
	}
	if st.Paused {
		return nil
	}
	walked := 0
	for {
		n, ok := c.next(st.Last)
		if !ok || now.Before(n.Add(jitter(st.ID, n, st.Spec.Jitter))) {
			return nil
		}
		st.Last = n
		if now.Sub(n) > st.CatchupWindow {
			st.record(ScheduleFiring{Nominal: n, InstanceID: ScheduleInstanceID(st.ID, n), Outcome: "missed", Actor: "schedule", At: now})
			if walked++; walked >= maxMissed {
				st.Last = now.Add(-st.CatchupWindow)
			}
			continue
		}
		if err := st.fire(ctx, n, "schedule", st.Overlap, true); err != nil {
			return err
		}
	}
}

// fire starts the firing of a nominal time and records its outcome.
//
// track makes the firing the one the next applies its overlap policy to
// (not a backfill's).
//
// A firing of the spec whose overlap policy does not depend on the
// previous firing (OverlapAllowAll, or no previous firing yet) is started
// from this round: a detached start recorded with the firing, which its
// instance drops if the id was started before (a backfill, say). The
// outcome is "started": the start is written, and the instance runs
// once. Triggers, backfills (which record already-started firings and
// their user as the start's actor) and the policies that read the
// previous instance's status start through the fire activity.
func (st *scheduleState) fire(ctx *Context, nominal time.Time, actor string, overlap OverlapPolicy, track bool) error {
	id := ScheduleInstanceID(st.ID, nominal)
	if st.direct && track && actor == "schedule" && (overlap == OverlapAllowAll || st.Running == "") {
		f := ScheduleFiring{Nominal: nominal, InstanceID: id, Actor: actor, At: ctx.Now(), Outcome: "started"}
		err := ctx.StartWorkflow(st.Workflow, RawPayload(st.Input), &StartWorkflowOptions{
			InstanceID: id, Tags: map[string]string{"chronicle.schedule": st.ID},
			Priority: st.Priority, Concurrency: st.Concurrency,
			// Late firings go before the wake-ups due after them.
			Due: nominal.Add(jitter(st.ID, nominal, st.Spec.Jitter)),
		})
		if err != nil {
			f.Outcome = "failed: " + err.Error()
		} else {
			st.Running = id
		}
		st.record(f)
		return nil
	}
	var res scheduleFireResult
	err := ctx.CallActivity(scheduleFireActivity, scheduleFireInput{
		ScheduleID: st.ID, InstanceID: id, Workflow: st.Workflow, Input: st.Input,
		Overlap: overlap, Previous: st.Running, Actor: actor,
		Priority: st.Priority, Concurrency: st.Concurrency,
	}, &ActivityOptions{Retry: untilStoreAnswers}).Get(&res)
	f := ScheduleFiring{Nominal: nominal, InstanceID: id, Actor: actor, At: ctx.Now()}
	if err != nil {
		f.Outcome = "failed: " + err.Error()
		st.record(f)
		return nil
	}
	switch res.Outcome {
	case "busy":
		if (overlap == OverlapBufferOne || overlap == OverlapCancelPrevious) && st.Buffered == nil {
			f.Outcome = "buffered"
			st.Buffered = &f
		} else {
			f.Outcome = "skipped"
		}
	default:
		f.Outcome = res.Outcome
		if track {
			st.Running = id
		}
	}
	st.record(f)
	return nil
}

// untilStoreAnswers retries a built-in workflow's activity (a firing's
// start, a batch's page) until the store answers: a firing
// is lost only when its start is refused for good (an input the workflow
// no longer takes).
var untilStoreAnswers = RetryPolicy{MaxAttempts: 1 << 20, InitialInterval: time.Second, MaxInterval: time.Minute, Multiplier: 2}

// scheduleFire is the activity that starts a firing: it applies the
// overlap policy to the previous firing's instance and starts the firing's
// instance unless its id is taken (ReuseError: an instance or a queued
// start under it is an earlier start of the firing), so that a retry, a
// second node or a backfill never runs one nominal time twice.
func (e *Engine) scheduleFire(ctx context.Context, in scheduleFireInput) (scheduleFireResult, error) {
	if in.Previous != "" && in.Previous != in.InstanceID && in.Overlap != OverlapAllowAll {
		prev, err := e.Describe(ctx, in.Previous)
		if err != nil && !errors.Is(err, ErrInstanceNotFound) {
			return scheduleFireResult{}, err
		}
		if err == nil && !prev.Status.Terminal() {
			switch in.Overlap {
			case OverlapSkip, OverlapBufferOne:
				return scheduleFireResult{Outcome: "busy"}, nil
			case OverlapCancelPrevious:
				err := e.RaiseEvent(ctx, in.Previous, ScheduleCancelEvent, nil, &RaiseOptions{
					IdempotencyKey: "schedule-cancel:" + in.InstanceID, Sender: SchedulePrefix + in.ScheduleID})
				if err != nil && !errors.Is(err, ErrInstanceNotRunning) {
					return scheduleFireResult{}, err
				}
				return scheduleFireResult{Outcome: "busy"}, nil
			case OverlapTerminatePrevious:
				err := e.Terminate(ctx, in.Previous, "terminated by schedule "+in.ScheduleID+" for "+in.InstanceID, nil)
				if err != nil && !errors.Is(err, ErrInstanceNotRunning) {
					return scheduleFireResult{}, err
				}
			}
		}
	}
	starter := e
	if _, ok := e.workflowInput(in.Workflow); !ok {
		c, err := e.scheduleClient()
		if err != nil {
			return scheduleFireResult{}, err
		}
		starter = c
	}
	actor := ""
	if u, ok := strings.CutPrefix(in.Actor, history.ActorUserPrefix); ok {
		actor = u
	}
	// The start looks the id up itself: an instance or a queued start
	// under it means the firing was started before (ErrInstanceExists).
	_, err := starter.Start(ctx, in.Workflow, RawPayload(in.Input), &StartOptions{
		InstanceID: in.InstanceID, Reuse: ReuseError, Actor: actor,
		Tags:     map[string]string{"chronicle.schedule": in.ScheduleID},
		Priority: in.Priority, Concurrency: in.Concurrency,
	})
	if errors.Is(err, ErrInstanceExists) {
		return scheduleFireResult{Outcome: "already-started"}, nil
	}
	if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrPayloadTooLarge) {
		return scheduleFireResult{}, NonRetryable(err)
	}
	if err != nil {
		return scheduleFireResult{}, err
	}
	return scheduleFireResult{Outcome: "started"}, nil
}

// scheduleClient returns an engine that starts workflows this engine has
// not registered, as a Client does.
func (e *Engine) scheduleClient() (*Engine, error) {
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	if e.schedClient != nil {
		return e.schedClient, nil
	}
	o := e.opts
	c, err := New(e.store, Options{NodeID: o.NodeID, Logger: o.Logger, Clock: o.Clock, Codec: o.Codec, MaxPayloadSize: o.MaxPayloadSize, NewID: o.NewID})
	if err != nil {
		return nil, err
	}
	c.clientOnly = true
	e.schedClient = c
	return c, nil
}
