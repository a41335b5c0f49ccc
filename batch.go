package chronicle

import (
	"context"
	"errors"
	"fmt"
	"github.com/chronicleflow/chronicle/history"
	"math"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

// A batch job is an instance of the built-in workflow [BatchWorkflow] with
// the id "batch:<id>": it pages through the instances a query selects
// (its cursor recorded in its history, so that a crash resumes where it
// left off), applies one action to each through an idempotent activity,
// reports its progress in its custom status, takes pause, resume and
// cancel as signals that carry their operator, and continues as new to
// keep its history bounded. The operator and reason of the batch are
// recorded in each instance it touches. See docs/operations.md, "Bulk
// actions".

const (
	// BatchWorkflow is the name of the built-in workflow that runs batch
	// jobs; every engine registers it. A batch never selects instances of
	// this workflow.
	BatchWorkflow = "chronicle.batch"
	// BatchPrefix prefixes a batch's id to make the id of its instance.
	BatchPrefix = "batch:"
	// CancelEvent is the signal the [BatchCancel] action raises on each
	// instance it selects, with a [CancelRequest] payload: a graceful
	// request that workflow code waiting for it can honour by winding
	// down and ending. Chronicle has no other notion of cancellation.
	CancelEvent = "chronicle.cancel"

	batchControlEvent  = "chronicle.batch.control"
	batchListActivity  = "chronicle.batch.list"
	batchApplyActivity = "chronicle.batch.apply"
	// batchPage is the most instances one page selects.
	batchPage = 100
	// batchContinueEvery is how many pages an execution of a batch
	// handles before it continues as new.
	batchContinueEvery = 10
	// batchContinueTurns bounds the turns (pages, signals, rate waits)
	// an execution takes, for a batch paused and resumed many times.
	batchContinueTurns = 50
	// batchKeep bounds the failures and changes a batch keeps.
	batchKeep = 100
)

var (
	// ErrBatchNotFound: no batch has this id.
	ErrBatchNotFound = errors.New("chronicle: batch not found")
	// ErrBatchExists: StartBatch named the id of an existing batch.
	ErrBatchExists = errors.New("chronicle: batch exists")
)

// BatchAction is what a batch does to each instance it selects.
type BatchAction string

const (
	// BatchTerminate terminates each running instance.
	BatchTerminate BatchAction = "terminate"
	// BatchCancel raises [CancelEvent] on each running instance.
	BatchCancel BatchAction = "cancel"
	// BatchSuspend suspends each running instance.
	BatchSuspend BatchAction = "suspend"
	// BatchResume resumes each suspended instance.
	BatchResume BatchAction = "resume"
	// BatchRedrive redrives each open dead letter of each instance.
	BatchRedrive BatchAction = "redrive"
	// BatchDiscard discards each open dead letter of each instance.
	BatchDiscard BatchAction = "discard"
	// BatchPurge purges each ended instance (see [Engine.Purge]).
	BatchPurge BatchAction = "purge"
	// BatchSignal raises the signal BatchOptions.Signal on each running
	// instance.
	BatchSignal BatchAction = "signal"
	// BatchHold places a legal hold on each instance (see [Engine.Hold]),
	// with the batch's actor, reason and ticket; a held instance is
	// skipped.
	BatchHold BatchAction = "hold"
	// BatchRelease releases the legal hold of each held instance.
	BatchRelease BatchAction = "release"
)

// BatchActions lists the actions, in the order the documentation gives
// them.
var BatchActions = []BatchAction{BatchTerminate, BatchCancel, BatchSuspend, BatchResume, BatchRedrive, BatchDiscard, BatchPurge, BatchSignal, BatchHold, BatchRelease}

func (a BatchAction) valid() bool {
	for _, b := range BatchActions {
		if a == b {
			return true
		}
	}
	return false
}

// BatchState is where a batch stands.
type BatchState string

const (
	// BatchRunning: the batch is working through its selection.
	BatchRunning BatchState = "running"
	// BatchPaused: the batch waits for ResumeBatch.
	BatchPaused BatchState = "paused"
	// BatchCompleted: every selected instance was handled.
	BatchCompleted BatchState = "completed"
	// BatchCancelled: CancelBatch stopped the batch; the instances it had
	// handled stay handled.
	BatchCancelled BatchState = "cancelled"
	// BatchFailed: the selection could not be listed (its query no longer
	// parses, say); Error says why.
	BatchFailed BatchState = "failed"
)

// BatchOptions define a batch job for StartBatch.
type BatchOptions struct {
	// ID names the batch; default a new id. Its instance is
	// "batch:<ID>".
	ID string
	// Action is what the batch does to each selected instance.
	Action BatchAction
	// Workflow, when set, selects only instances of this workflow.
	Workflow string
	// Where selects instances in the query language (docs/search.md),
	// for example "status = 'running' AND region = 'uk'". Empty selects
	// every instance (of Workflow). Batches never select batches.
	Where string
	// Reason says why; required. It is recorded with the action in each
	// touched instance.
	Reason string
	// Ticket is an optional reference (a ticket or change number),
	// recorded with the reason and, for terminate, suspend and resume, as
	// the Ticket of each touched instance's event. See [ControlOptions].
	Ticket string
	// Actor is the operator; required. Each action is recorded as done by
	// "user:<Actor>".
	Actor string
	// Signal is the name of the signal BatchSignal raises (required for
	// it), and Payload its payload, encoded with the engine's codec.
	Signal  string
	Payload any
	// Rate bounds the instances handled per second; zero means as fast as
	// the batch goes.
	Rate float64
}

// CancelRequest is the payload of [CancelEvent].
type CancelRequest struct {
	// Batch is the id of the batch that asked.
	Batch string `json:"batch"`
	// Actor is the operator ("user:<name>").
	Actor string `json:"actor"`
	// Reason and Ticket are the batch's.
	Reason string `json:"reason"`
	Ticket string `json:"ticket,omitempty"`
}

// BatchFailure is an instance a batch failed to act on, and why.
type BatchFailure struct {
	InstanceID string `json:"instance_id"`
	Error      string `json:"error"`
}

// BatchChange is one pause, resume or cancel of a batch, as recorded.
type BatchChange struct {
	// Kind is start, pause, resume or cancel.
	Kind string `json:"kind"`
	// Actor is who made it ("user:<name>" or "system").
	Actor string `json:"actor"`
	// Note is the reason given with it.
	Note string `json:"note,omitempty"`
	// At is when the batch recorded it (workflow time).
	At time.Time `json:"at"`
}

// BatchDescription is a batch as of its last turn.
type BatchDescription struct {
	ID       string
	Action   BatchAction
	Workflow string
	Where    string
	Reason   string
	Ticket   string
	// Actor is the operator who started it ("user:<name>").
	Actor  string
	Signal string
	Rate   float64
	State  BatchState
	// Error says why a failed batch failed.
	Error string
	// Matched counts the instances selected so far; Done those acted on,
	// Skipped those the action did not apply to (ended meanwhile, already
	// in the state, no dead letters), Failed those it failed on.
	Matched, Done, Skipped, Failed int64
	// Cursor is the id of the last instance handled: the batch goes on
	// after it.
	Cursor string
	// Failures are the newest failures (at most 100).
	Failures []BatchFailure
	// Changes are the start and the newest pauses, resumes and cancels.
	Changes []BatchChange
}

// batchState is the input, custom status and result of a batch instance.
type batchState struct {
	ID       string
	Action   BatchAction
	Workflow string
	Where    string
	Reason   string
	Ticket   string
	Actor    string
	Signal   string
	Payload  []byte
	Rate     float64
	State    BatchState
	Error    string
	Matched  int64
	Done     int64
	Skipped  int64
	Failed   int64
	Cursor   string
	Failures []BatchFailure
	Changes  []BatchChange
}

// batchSignal is a pause, resume or cancel sent to a batch instance.
type batchSignal struct {
	Kind  string
	Actor string
	Note  string
}

type batchListInput struct {
	Workflow string
	Where    string
	After    string
	Limit    int
}

type batchListResult struct {
	IDs []string
	// Next is the cursor after the page; More says whether the page was
	// full.
	Next string
	More bool
}

type batchApplyInput struct {
	Batch   string
	Action  BatchAction
	Reason  string
	Ticket  string
	Actor   string
	Signal  string
	Payload []byte
	IDs     []string
}

// batchOutcome is what an action did to one instance: "done", "skipped"
// or "failed", with a note.
type batchOutcome struct {
	ID      string
	Outcome string
	Note    string
}

// BatchInstanceID returns the instance id of a batch.
func BatchInstanceID(batchID string) string { return BatchPrefix + batchID }

// checkBatch validates options and returns the state they define.
func (e *Engine) checkBatch(o *BatchOptions) (*batchState, error) {
	if o.ID == "" {
		o.ID = e.opts.NewID()
	}
	if err := e.validateID("batch id", BatchPrefix+o.ID); err != nil {
		return nil, err
	}
	if !o.Action.valid() {
		return nil, invalid("batch action %q (one of %s)", o.Action, joinActions())
	}
	if o.Workflow != "" {
		if err := e.validateID("workflow name", o.Workflow); err != nil {
			return nil, err
		}
		if o.Workflow == BatchWorkflow {
			return nil, invalid("a batch never selects batches")
		}
	}
	if _, err := e.parseWhere(o.Where); err != nil {
		return nil, err
	}
	if strings.TrimSpace(o.Reason) == "" {
		return nil, invalid("a batch needs a reason")
	}
	if err := checkText("reason", o.Reason); err != nil {
		return nil, err
	}
	if err := checkTicket(o.Ticket); err != nil {
		return nil, err
	}
	if o.Actor == "" {
		return nil, invalid("a batch needs an actor (the operator)")
	}
	actor, err := e.actor(o.Actor)
	if err != nil {
		return nil, err
	}
	if o.Action == BatchSignal {
		if o.Signal == "" {
			return nil, invalid("a signal batch needs a signal name")
		}
		if err := e.validateID("event name", o.Signal); err != nil {
			return nil, err
		}
	} else if o.Signal != "" || o.Payload != nil {
		return nil, invalid("a %s batch takes no signal", o.Action)
	}
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		return nil, invalid("batch rate %v is not a positive number", o.Rate)
	}
	payload, err := e.encode("signal payload", o.Payload)
	if err != nil {
		return nil, err
	}
	return &batchState{
		ID: o.ID, Action: o.Action, Workflow: o.Workflow, Where: o.Where, Reason: o.Reason, Ticket: o.Ticket,
		Actor: actor, Signal: o.Signal, Payload: payload, Rate: o.Rate, State: BatchRunning,
	}, nil
}

func joinActions() string {
	s := make([]string, len(BatchActions))
	for i, a := range BatchActions {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

// StartBatch validates a batch and starts it, returning its id. An
// unknown action, a query that does not parse, a missing reason or actor,
// or a signal batch without a signal name is refused with
// ErrInvalidArgument before anything is written; the id of an existing
// batch with ErrBatchExists.
func (e *Engine) StartBatch(ctx context.Context, opts BatchOptions) (string, error) {
	st, err := e.checkBatch(&opts)
	if err != nil {
		return "", err
	}
	st.Changes = []BatchChange{{Kind: "start", Actor: st.Actor, Note: st.Reason, At: e.now()}}
	_, err = e.Start(ctx, BatchWorkflow, *st, &StartOptions{InstanceID: BatchPrefix + st.ID, Actor: opts.Actor,
		Reuse: ReuseError, Tags: map[string]string{"chronicle.batch": st.ID}})
	if errors.Is(err, ErrInstanceExists) {
		return "", fmt.Errorf("%w: %s", ErrBatchExists, st.ID)
	}
	if err != nil {
		return "", err
	}
	return st.ID, nil
}

// signalBatch sends a change to a running batch.
func (e *Engine) signalBatch(ctx context.Context, id string, s batchSignal, actor string) error {
	if err := e.validateID("batch id", BatchPrefix+id); err != nil {
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
	err = e.RaiseEvent(ctx, BatchPrefix+id, batchControlEvent, s, &RaiseOptions{Actor: actor, Sender: "batch api"})
	if errors.Is(err, ErrInstanceNotFound) {
		return fmt.Errorf("%w: %s", ErrBatchNotFound, id)
	}
	if errors.Is(err, ErrInstanceNotRunning) {
		return fmt.Errorf("%w: batch %s has ended", ErrInstanceNotRunning, id)
	}
	return err
}

// PauseBatch pauses a batch after the page it is working on; note says
// why and is recorded with actor.
func (e *Engine) PauseBatch(ctx context.Context, id, note, actor string) error {
	return e.signalBatch(ctx, id, batchSignal{Kind: "pause", Note: note}, actor)
}

// ResumeBatch resumes a paused batch where it stopped.
func (e *Engine) ResumeBatch(ctx context.Context, id, note, actor string) error {
	return e.signalBatch(ctx, id, batchSignal{Kind: "resume", Note: note}, actor)
}

// CancelBatch stops a batch after the page it is working on; the
// instances it handled stay handled.
func (e *Engine) CancelBatch(ctx context.Context, id, note, actor string) error {
	return e.signalBatch(ctx, id, batchSignal{Kind: "cancel", Note: note}, actor)
}

// DescribeBatch describes a batch as of its last turn.
func (e *Engine) DescribeBatch(ctx context.Context, id string) (*BatchDescription, error) {
	if err := e.validateID("batch id", BatchPrefix+id); err != nil {
		return nil, err
	}
	inst, err := e.Describe(ctx, BatchPrefix+id)
	if errors.Is(err, ErrInstanceNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrBatchNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return e.batchDescription(ctx, inst)
}

func (e *Engine) batchDescription(ctx context.Context, inst *Instance) (*BatchDescription, error) {
	id := strings.TrimPrefix(inst.ID, BatchPrefix)
	var st batchState
	ok, err := inst.CustomStatus(&st)
	if err != nil {
		return nil, fmt.Errorf("batch %s: %w", id, err)
	}
	if !ok {
		// Not run yet: the definition is the input of its start.
		input, err := e.scheduleInput(ctx, inst.ID)
		if err != nil {
			return nil, err
		}
		if err := e.Decode(input, &st); err != nil {
			return nil, fmt.Errorf("batch %s: %w", id, err)
		}
	}
	if inst.Status == StatusFailed || inst.Status == StatusTerminated {
		st.State = BatchFailed
		if st.Error == "" && inst.Failure != nil {
			st.Error = inst.Failure.Message
		}
	}
	return &BatchDescription{
		ID: id, Action: st.Action, Workflow: st.Workflow, Where: st.Where, Reason: st.Reason, Ticket: st.Ticket,
		Actor: st.Actor, Signal: st.Signal, Rate: st.Rate, State: st.State, Error: st.Error,
		Matched: st.Matched, Done: st.Done, Skipped: st.Skipped, Failed: st.Failed, Cursor: st.Cursor,
		Failures: st.Failures, Changes: st.Changes,
	}, nil
}

// ListBatches returns every batch, running or ended, in id order, as of
// their last turns.
func (e *Engine) ListBatches(ctx context.Context) ([]*BatchDescription, error) {
	var out []*BatchDescription
	err := e.eachInstance(ctx, InstanceFilter{Workflow: BatchWorkflow}, func(inst *Instance) error {
		if !strings.HasPrefix(inst.ID, BatchPrefix) {
			return nil
		}
		d, err := e.batchDescription(ctx, inst)
		if err == nil {
			out = append(out, d)
		}
		return err
	})
	return out, err
}

// registerBatches registers the built-in batch workflow and its
// activities.
func (e *Engine) registerBatches() error {
	if err := RegisterWorkflow(e, BatchWorkflow, runBatch); err != nil {
		return err
	}
	if err := RegisterActivity(e, batchListActivity, e.batchList); err != nil {
		return err
	}
	return RegisterActivity(e, batchApplyActivity, e.batchApply)
}

// runBatch is the batch workflow.
func runBatch(ctx *Context, st batchState) (batchState, error) {
	sig := ctx.WaitEvent(batchControlEvent, nil)
	for pages, turns := 0, 0; ; turns++ {
		for sig.Ready() {
			var s batchSignal
			err := sig.Get(&s)
			sig = ctx.WaitEvent(batchControlEvent, nil)
			if err == nil {
				st.change(ctx, s)
			}
		}
		if err := ctx.SetCustomStatus(st); err != nil {
			return st, err
		}
		switch st.State {
		case BatchCompleted, BatchCancelled, BatchFailed:
			return st, nil
		}
		if pages >= batchContinueEvery || turns >= batchContinueTurns {
			return st, ctx.ContinueAsNew(st)
		}
		if st.State == BatchPaused {
			ctx.WhenAny(sig)
			continue
		}
		pages++
		limit := batchPage
		if st.Rate > 0 && st.Rate < batchPage {
			limit = max(1, int(math.Ceil(st.Rate)))
		}
		var page batchListResult
		err := ctx.CallActivity(batchListActivity, batchListInput{Workflow: st.Workflow, Where: st.Where, After: st.Cursor, Limit: limit},
			&ActivityOptions{Retry: untilStoreAnswers}).Get(&page)
		if err != nil {
			st.State, st.Error = BatchFailed, err.Error()
			continue
		}
		if len(page.IDs) > 0 {
			var res []batchOutcome
			err := ctx.CallActivity(batchApplyActivity, batchApplyInput{
				Batch: st.ID, Action: st.Action, Reason: st.Reason, Ticket: st.Ticket, Actor: st.Actor,
				Signal: st.Signal, Payload: st.Payload, IDs: page.IDs,
			}, &ActivityOptions{Retry: untilStoreAnswers}).Get(&res)
			if err != nil {
				res = res[:0]
				for _, id := range page.IDs {
					res = append(res, batchOutcome{ID: id, Outcome: "failed", Note: err.Error()})
				}
			}
			st.tally(res)
		}
		st.Cursor = page.Next
		if !page.More {
			st.State = BatchCompleted
			continue
		}
		if st.Rate > 0 && len(page.IDs) > 0 {
			if err := ctx.SetCustomStatus(st); err != nil { // the progress, while it waits
				return st, err
			}
			wait := time.Duration(float64(len(page.IDs)) / st.Rate * float64(time.Second))
			timer := ctx.Timer(wait, &TimerOptions{Name: "batch rate"})
			ctx.WhenAny(sig, timer)
			if sig.Ready() {
				ctx.CancelTimer(timer)
			}
		}
	}
}

// change applies a pause, resume or cancel.
func (st *batchState) change(ctx *Context, s batchSignal) {
	st.Changes = append(st.Changes, BatchChange{Kind: s.Kind, Actor: s.Actor, Note: s.Note, At: ctx.Now()})
	if len(st.Changes) > batchKeep {
		st.Changes = append(st.Changes[:1:1], st.Changes[len(st.Changes)-batchKeep+1:]...)
	}
	switch s.Kind {
	case "pause":
		if st.State == BatchRunning {
			st.State = BatchPaused
		}
	case "resume":
		if st.State == BatchPaused {
			st.State = BatchRunning
		}
	case "cancel":
		st.State = BatchCancelled
	}
}

// tally counts the outcomes of a page.
func (st *batchState) tally(res []batchOutcome) {
	for _, r := range res {
		st.Matched++
		switch r.Outcome {
		case "done":
			st.Done++
		case "skipped":
			st.Skipped++
		default:
			st.Failed++
			st.Failures = append(st.Failures, BatchFailure{InstanceID: r.ID, Error: r.Note})
		}
	}
	if len(st.Failures) > batchKeep {
		st.Failures = st.Failures[len(st.Failures)-batchKeep:]
	}
}

// batchList is the activity that lists a page of the selection after the
// cursor.
func (e *Engine) batchList(ctx context.Context, in batchListInput) (batchListResult, error) {
	page, err := e.ListInstances(ctx, InstanceFilter{Workflow: in.Workflow, Where: in.Where, AfterID: in.After, Limit: in.Limit})
	if errors.Is(err, ErrInvalidArgument) {
		return batchListResult{}, NonRetryable(err)
	}
	if err != nil {
		return batchListResult{}, err
	}
	res := batchListResult{Next: in.After, More: len(page) == in.Limit}
	for _, inst := range page {
		res.Next = inst.ID
		if inst.Workflow == BatchWorkflow || strings.HasPrefix(inst.ID, BatchPrefix) {
			continue
		}
		res.IDs = append(res.IDs, inst.ID)
	}
	return res, nil
}

// batchApply is the activity that applies the action to a page. It is
// idempotent: a retry finds what the previous attempt did and counts it
// as skipped (a signal is raised at most once per batch and instance).
// A store error fails the attempt, to be retried; an error that a retry
// cannot mend fails the instance.
func (e *Engine) batchApply(ctx context.Context, in batchApplyInput) ([]batchOutcome, error) {
	if in.Action == BatchPurge {
		return e.batchPurge(ctx, in)
	}
	out := make([]batchOutcome, 0, len(in.IDs))
	for _, id := range in.IDs {
		_ = Heartbeat(ctx)
		outcome, note, err := e.batchOne(ctx, in, id)
		if err != nil {
			if ctx.Err() != nil || !permanent(err) {
				return nil, fmt.Errorf("batch %s: %s %s: %w", in.Batch, in.Action, id, err)
			}
			outcome, note = "failed", err.Error()
		}
		out = append(out, batchOutcome{ID: id, Outcome: outcome, Note: note})
	}
	return out, nil
}

// permanent reports whether an error is one a retry cannot mend.
func permanent(err error) bool {
	for _, p := range []error{ErrInvalidArgument, ErrPayloadTooLarge, ErrPurgeUnsigned, ErrUnknownWorkflow, ErrUnsupported} {
		if errors.Is(err, p) {
			return true
		}
	}
	var nr *nonRetryable
	return errors.As(err, &nr)
}

// batchPurge purges a page at once: one signed checkpoint covers its
// tombstones when the engine signs them. A purge that stopped half-way is
// finished by the retry.
func (e *Engine) batchPurge(ctx context.Context, in batchApplyInput) ([]batchOutcome, error) {
	rep, err := e.Purge(ctx, PurgeOptions{InstanceIDs: in.IDs, By: strings.TrimPrefix(in.Actor, history.ActorUserPrefix), Archive: e.opts.PurgeArchive})
	if he := (*HeldError)(nil); errors.As(err, &he) && err == error(he) {
		err = nil // the held instances are skipped, each with its hold
	}
	if err != nil && (ctx.Err() != nil || !permanent(err)) {
		return nil, fmt.Errorf("batch %s: purge: %w", in.Batch, err)
	}
	purged := map[string]bool{}
	if rep != nil {
		for _, ts := range rep.Purged {
			purged[ts.InstanceID] = true
		}
	}
	out := make([]batchOutcome, 0, len(in.IDs))
	for _, id := range in.IDs {
		o := batchOutcome{ID: id, Outcome: "done"}
		why, skipped := "", false
		if rep != nil {
			why, skipped = rep.Skipped[id]
		}
		switch {
		case purged[id]:
		case err != nil:
			o.Outcome, o.Note = "failed", err.Error()
		case strings.HasPrefix(why, "archive failed"):
			o.Outcome, o.Note = "failed", why
		case skipped:
			o.Outcome, o.Note = "skipped", why
		default:
			o.Outcome, o.Note = "skipped", "not purged"
		}
		out = append(out, o)
	}
	return out, nil
}

// batchReason is the reason recorded in a touched instance.
func batchReason(in batchApplyInput) string {
	s := in.Reason + " (batch " + in.Batch
	if in.Ticket != "" {
		s += ", ticket " + in.Ticket
	}
	return s + ")"
}

// batchOne applies the action to one instance.
func (e *Engine) batchOne(ctx context.Context, in batchApplyInput, id string) (outcome, note string, err error) {
	user := strings.TrimPrefix(in.Actor, history.ActorUserPrefix)
	reason := batchReason(in)
	skip := func(err error) (string, string, error) {
		if errors.Is(err, ErrInstanceNotRunning) || errors.Is(err, ErrInstanceNotFound) {
			return "skipped", err.Error(), nil
		}
		if err != nil {
			return "", "", err
		}
		return "done", "", nil
	}
	switch in.Action {
	case BatchTerminate:
		return skip(e.Terminate(ctx, id, reason, &ControlOptions{Actor: user, Ticket: in.Ticket}))
	case BatchSuspend:
		inst, err := e.Describe(ctx, id)
		if err != nil {
			return skip(err)
		}
		if inst.Status == StatusSuspended {
			return "skipped", id + " is suspended", nil
		}
		return skip(e.Suspend(ctx, id, reason, &ControlOptions{Actor: user, Ticket: in.Ticket}))
	case BatchResume:
		return skip(e.Resume(ctx, id, reason, &ControlOptions{Actor: user, Ticket: in.Ticket}))
	case BatchCancel, BatchSignal:
		name, payload := in.Signal, any(RawPayload(in.Payload))
		if in.Action == BatchCancel {
			name, payload = CancelEvent, CancelRequest{Batch: in.Batch, Actor: in.Actor, Reason: in.Reason, Ticket: in.Ticket}
		} else if in.Payload == nil {
			payload = nil
		}
		return skip(e.RaiseEvent(ctx, id, name, payload, &RaiseOptions{
			IdempotencyKey: BatchPrefix + in.Batch, Sender: BatchPrefix + in.Batch + ": " + reason, Actor: user}))
	case BatchHold:
		h, err := e.GetHold(ctx, id)
		if err != nil {
			return "", "", err
		}
		if h != nil {
			return "skipped", "already held by " + h.Actor + ": " + h.Reason, nil
		}
		_, err = e.Hold(ctx, id, HoldOptions{Reason: reason, Actor: user, Ticket: in.Ticket})
		return skip(err)
	case BatchRelease:
		err := e.ReleaseHold(ctx, id, HoldOptions{Reason: reason, Actor: user, Ticket: in.Ticket})
		if errors.Is(err, ErrNotHeld) {
			return "skipped", err.Error(), nil
		}
		return skip(err)
	case BatchRedrive, BatchDiscard:
		n := 0
		for {
			dls, err := e.ListDeadLetters(ctx, DeadLetterFilter{InstanceID: id, Status: provider.DeadLetterDead, Limit: 100})
			if err != nil {
				return "", "", err
			}
			for _, dl := range dls {
				if in.Action == BatchRedrive {
					err = e.RedriveDeadLetter(ctx, dl.ID, user)
				} else {
					err = e.DiscardDeadLetter(ctx, dl.ID, user)
				}
				if err != nil && !errors.Is(err, ErrDeadLetterResolved) && !errors.Is(err, ErrDeadLetterNotFound) {
					return "", "", err
				}
				n++
			}
			if len(dls) < 100 {
				break
			}
		}
		if n == 0 {
			return "skipped", "no open dead letters", nil
		}
		return "done", fmt.Sprintf("%d dead letters", n), nil
	}
	return "", "", NonRetryable(invalid("batch action %q", in.Action))
}
