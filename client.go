package chronicle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
)

// ReusePolicy says what Start does when the instance id is taken.
type ReusePolicy int

const (
	// ReuseError fails with ErrInstanceExists when an instance with the id
	// exists, whatever its status, or its start is pending. Ids are
	// business references (a claim number): starting one twice is a bug.
	ReuseError ReusePolicy = iota
	// ReuseReturnExisting returns the existing instance's id without
	// starting anything.
	ReuseReturnExisting
	// ReuseTerminateAndRestart terminates a running execution and starts a
	// new one with the same id; an ended instance simply starts again. The
	// history keeps both executions.
	ReuseTerminateAndRestart
)

// StartOptions configure Start; a nil *StartOptions, like the zero value,
// starts an instance with a new id, no business key, tags or version,
// failing if the id is taken, as "system".
type StartOptions struct {
	// InstanceID names the instance; default a new UUIDv7.
	InstanceID string
	// BusinessKey and BusinessParts are the product's reference of the
	// instance, indexed for queries.
	BusinessKey   string
	BusinessParts map[string]string
	// Tags are free-form labels.
	Tags map[string]string
	// Version is recorded with the start.
	Version string
	// Reuse says what to do when InstanceID is taken.
	Reuse ReusePolicy
	// Actor is the user who starts the instance, recorded as "user:<Actor>";
	// default "system".
	Actor string
	// Trace carries the caller's W3C traceparent.
	Trace string
	// SearchAttributes are the instance's first search attributes, by
	// declared name ([Options.SearchAttributes]); each value must be of
	// its declared type (ErrInvalidArgument otherwise). They are recorded
	// in the start event.
	SearchAttributes map[string]any
	// Priority orders the instance's work in the queues: higher first,
	// equal in arrival order, a lower one never waiting for ever (see
	// docs/operations.md, "Priority"). Its activities, timers and children
	// inherit it. Between provider.MinPriority and MaxPriority.
	Priority int
	// Concurrency, when set, bounds how many instances of its key run at
	// once: the instance starts when it gets a slot, waiting in arrival
	// order behind the others of its key, and gives it back when it ends
	// (see docs/operations.md, "Flow control").
	Concurrency *Concurrency
	// Subject names the data subject whose personal data the instance
	// carries (a customer or patient id, not a name). Its payloads —
	// input, result, activity inputs and results, signals, task data,
	// custom status, projection states — are stored sealed with the
	// subject's key from Options.Keys, and [Engine.Erase] makes them
	// unreadable for good. Recorded in plaintext in the start event and
	// as the search attribute [SubjectAttribute]; sub-workflows and
	// continue-as-new keep it. Requires Options.Keys.
	Subject string
}

// Start starts a workflow instance and returns its id. The instance runs
// when a worker picks up its start message, which is at once when an
// engine is running on the store. opts may be nil.
//
// The workflow must be registered on the engine (ErrUnknownWorkflow
// otherwise; a [Client] starts workflows it does not know), and input
// must be of the type its function takes: a value assignable to it, a
// pointer to one, nil for a type that has nil, a [RawPayload] (taken as
// it is), or a generic value (a map[string]any or []any) that decodes to
// it strictly, as encoding/json would. Anything else is refused with
// ErrInvalidArgument before anything is written. A typed [Workflow]
// checks the input when the program compiles.
func (e *Engine) Start(ctx context.Context, workflow string, input any, opts *StartOptions) (string, error) {
	if starter, ok := e.store.(provider.InstanceStarter); ok && opts != nil && opts.InstanceID != "" {
		// A new named id is started in one write; one the store knows
		// takes the look-up below, which applies the reuse policy.
		id, msgs, err := e.newStartMessages(workflow, input, opts)
		if err != nil {
			return id, err
		}
		created, err := starter.EnqueueStart(ctx, &provider.EnqueueStartParams{InstanceID: id, Messages: msgs, Now: e.now()})
		if err != nil || created {
			return id, err
		}
	}
	id, msgs, wait, err := e.startMessages(ctx, workflow, input, opts)
	if err != nil || len(msgs) == 0 {
		return id, err
	}
	if wait != nil {
		return id, e.enqueueWaiting(ctx, msgs, []provider.SlotWait{*wait})
	}
	return id, e.enqueue(ctx, msgs...)
}

// StartRequest is one workflow for StartMany to start.
type StartRequest struct {
	Workflow string
	Input    any
	// Options may be nil, as Start's.
	Options *StartOptions
}

// maxStartWrite bounds the messages of one store write of StartMany.
const maxStartWrite = 1000

// StartMany starts several workflow instances with as few writes to the
// store as it can (one per thousand starts) and returns their ids in the
// order of reqs. Each request is checked as Start checks it, before
// anything is written: when one fails, or two name the same instance id,
// StartMany returns its error, naming its index, and starts nothing.
// Instances with generated ids need no look-up, so a batch of them costs
// one write.
func (e *Engine) StartMany(ctx context.Context, reqs []StartRequest) ([]string, error) {
	ids := make([]string, len(reqs))
	seen := make(map[string]int, len(reqs))
	// writes are the store writes: a request's messages (a restart's
	// terminate and start) and its wait stay in one.
	type write struct {
		msgs  []provider.Message
		waits []provider.SlotWait
	}
	var writes []write
	for i, r := range reqs {
		id, ms, wait, err := e.startMessages(ctx, r.Workflow, r.Input, r.Options)
		if err != nil {
			return nil, fmt.Errorf("start %d (%s): %w", i, r.Workflow, err)
		}
		if j, dup := seen[id]; dup {
			return nil, fmt.Errorf("%w: starts %d and %d both name instance %s", ErrInvalidArgument, j, i, id)
		}
		seen[id], ids[i] = i, id
		if len(writes) == 0 || len(writes[len(writes)-1].msgs) >= maxStartWrite {
			writes = append(writes, write{})
		}
		w := &writes[len(writes)-1]
		w.msgs = append(w.msgs, ms...)
		if wait != nil {
			w.waits = append(w.waits, *wait)
		}
	}
	for _, w := range writes {
		if len(w.msgs) == 0 {
			continue
		}
		if err := e.enqueueWaiting(ctx, w.msgs, w.waits); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// startMessages checks a start and returns the instance id and the
// messages that start it; none when the instance exists and opts say to
// return it. The wait is the start's place among the waiters of its
// concurrency key, to take as it is enqueued (see provider.StartWaiter):
// only for a generated id, which no instance has.
func (e *Engine) startMessages(ctx context.Context, workflow string, input any, opts *StartOptions) (string, []provider.Message, *provider.SlotWait, error) {
	c, err := e.checkStart(workflow, input, opts)
	if err != nil {
		return "", nil, nil, err
	}
	o := &c.opts
	var msgs []provider.Message
	var (
		rec     *provider.InstanceRecord
		pending bool
	)
	if !c.generated {
		// A purge of the id that stopped half-way keeps every round off
		// it: finish it, or the new run would never start.
		ts, err := e.resumePurge(ctx, o.InstanceID, c.actor)
		if err != nil {
			return "", nil, nil, err
		}
		if ts != nil {
			e.runner.ForgetInstance(o.InstanceID)
		}
		var start *provider.Message
		if rec, start, err = e.find(ctx, o.InstanceID, true, nil); err != nil {
			return "", nil, nil, err
		}
		pending = start != nil
	}
	if rec != nil || pending {
		switch o.Reuse {
		case ReuseReturnExisting:
			return o.InstanceID, nil, nil, nil
		case ReuseTerminateAndRestart:
			if rec == nil || !rec.Status.Terminal() {
				m, err := e.control(o.InstanceID, c.actor, &history.ExecutionTerminated{Reason: "restarted by " + c.actor})
				if err != nil {
					return "", nil, nil, err
				}
				msgs = append(msgs, m)
			}
		default:
			return "", nil, nil, fmt.Errorf("%w: %s", ErrInstanceExists, o.InstanceID)
		}
	}
	start, err := e.startMessage(c, workflow)
	if err != nil {
		return "", nil, nil, err
	}
	var wait *provider.SlotWait
	if c.generated && c.conc != nil {
		wait = &provider.SlotWait{InstanceID: o.InstanceID, Key: c.conc.Key, Limit: c.conc.Limit}
	}
	return o.InstanceID, append(msgs, start), wait, nil
}

// newStartMessages checks a start and returns the instance id and the
// messages that start it when the instance is new: no look-up.
func (e *Engine) newStartMessages(workflow string, input any, opts *StartOptions) (string, []provider.Message, error) {
	c, err := e.checkStart(workflow, input, opts)
	if err != nil {
		return "", nil, err
	}
	start, err := e.startMessage(c, workflow)
	if err != nil {
		return "", nil, err
	}
	return c.opts.InstanceID, []provider.Message{start}, nil
}

// checkedStart is a start whose options were checked.
type checkedStart struct {
	opts StartOptions
	// generated is true when the instance id was generated: it is new.
	generated bool
	actor     string
	payload   []byte
	attrs     history.SearchAttributeMap
	conc      *history.Concurrency
}

// checkStart checks a start's workflow, options and input, generating the
// instance id when opts name none.
func (e *Engine) checkStart(workflow string, input any, opts *StartOptions) (*checkedStart, error) {
	c := &checkedStart{}
	if opts != nil {
		c.opts = *opts
	}
	o := &c.opts
	input, err := e.startInput(workflow, input)
	if err != nil {
		return nil, err
	}
	// A generated id is new: it needs no look-up.
	c.generated = o.InstanceID == ""
	if c.generated {
		o.InstanceID = e.opts.NewID()
	}
	if err := e.validateID("instance id", o.InstanceID); err != nil {
		return nil, err
	}
	if c.actor, err = e.actor(o.Actor); err != nil {
		return nil, err
	}
	for _, f := range []struct{ name, text string }{
		{"business key", o.BusinessKey}, {"version", o.Version}, {"trace", o.Trace},
	} {
		if err := checkText(f.name, f.text); err != nil {
			return nil, err
		}
	}
	if err := checkTextMap("business part", o.BusinessParts); err != nil {
		return nil, err
	}
	if err := checkTextMap("tag", o.Tags); err != nil {
		return nil, err
	}
	if c.attrs, err = e.startAttributes(o.SearchAttributes); err != nil {
		return nil, err
	}
	if err := e.startSubject(c); err != nil {
		return nil, err
	}
	if err := provider.ValidatePriority(o.Priority); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if o.Concurrency != nil {
		if err := provider.ValidateLimit(o.Concurrency.Key, o.Concurrency.Limit); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
		if o.Concurrency.Key != "" {
			if _, err := e.flowStore(); err != nil {
				return nil, err
			}
			c.conc = &history.Concurrency{Key: o.Concurrency.Key, Limit: o.Concurrency.Limit}
		}
	}
	if c.payload, err = e.encode("workflow input", input); err != nil {
		return nil, err
	}
	if c.payload != nil {
		if c.payload, err = e.sealFor(o.Subject, o.InstanceID, c.payload); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// startMessage returns the message that starts a new execution of a
// checked start.
func (e *Engine) startMessage(c *checkedStart, workflow string) (provider.Message, error) {
	o := &c.opts
	exec := e.opts.NewID()
	start, err := provider.NewMessage(history.DeterministicID(o.InstanceID, 0, "start:"+exec), o.InstanceID, exec, exec,
		&history.ExecutionStarted{
			Name: workflow, Version: o.Version, Input: c.payload, BusinessKey: o.BusinessKey,
			BusinessParts: o.BusinessParts, Tags: o.Tags, Trace: o.Trace, SearchAttributes: c.attrs,
			Priority: o.Priority, Concurrency: c.conc, Subject: o.Subject,
		})
	if err != nil {
		return provider.Message{}, err
	}
	start.Actor = c.actor
	start.Priority = o.Priority
	return start, nil
}

// RaiseOptions configure RaiseEvent; a nil *RaiseOptions, like the zero
// value, records every call as a new signal from "system".
type RaiseOptions struct {
	// IdempotencyKey deduplicates the signal: the instance records at most
	// one signal per key. Default: a new key, so every call is recorded.
	IdempotencyKey string
	// Sender identifies the sender in history.
	Sender string
	// Actor is the user raising the signal, recorded as "user:<Actor>".
	Actor string
}

// RaiseEvent sends a signal to an instance. Workflow code receives it with
// WaitEvent; signals that arrive before the code waits are buffered. opts
// may be nil.
func (e *Engine) RaiseEvent(ctx context.Context, instanceID, name string, payload any, opts *RaiseOptions) error {
	var o RaiseOptions
	if opts != nil {
		o = *opts
	}
	if err := e.validateID("instance id", instanceID); err != nil {
		return err
	}
	if err := e.validateID("event name", name); err != nil {
		return err
	}
	key := o.IdempotencyKey
	if key == "" {
		key = e.opts.NewID()
	} else if err := e.validateID("idempotency key", key); err != nil {
		return err
	}
	actor, err := e.actor(o.Actor)
	if err != nil {
		return err
	}
	if err := checkText("sender", o.Sender); err != nil {
		return err
	}
	data, err := e.encode("event payload", payload)
	if err != nil {
		return err
	}
	if err := e.mustBeRunning(ctx, instanceID, false); err != nil {
		if errors.Is(err, ErrInstanceNotRunning) && o.IdempotencyKey != "" && e.recorded(ctx, instanceID, key) {
			// A retry of a signal the instance recorded before it ended.
			return nil
		}
		return err
	}
	if data, err = e.sealForInstance(ctx, instanceID, data); err != nil {
		return err
	}
	m, err := provider.NewMessage(history.DeterministicID(instanceID, 0, "signal:"+key), instanceID, "", key,
		&history.EventRaised{Name: name, Payload: data, IdempotencyKey: key, Sender: o.Sender})
	if err != nil {
		return err
	}
	m.Actor = actor
	return e.enqueue(ctx, m)
}

// recorded reports whether the instance's last execution recorded a signal
// with this idempotency key.
func (e *Engine) recorded(ctx context.Context, instanceID, key string) bool {
	events, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: instanceID, FromSeq: 1})
	if err != nil || len(events) == 0 {
		return false
	}
	exec := events[len(events)-1].ExecutionID
	for i := len(events) - 1; i >= 0 && events[i].ExecutionID == exec; i-- {
		if events[i].Kind == history.KindEventRaised && events[i].CorrelationID == key {
			return true
		}
	}
	return false
}

// ControlOptions configure Terminate, Suspend and Resume; a nil
// *ControlOptions, like the zero value, records the action as "system".
type ControlOptions struct {
	// Actor is the user who acts, recorded as "user:<Actor>".
	Actor string
	// Ticket is an optional reference (a ticket or change number) recorded
	// with the action in the instance's history: at most
	// [MaxTicketLength] bytes of valid UTF-8 without control characters.
	Ticket string
}

// actor returns the Actor of opts, "" when opts is nil.
func (o *ControlOptions) actor() string {
	if o == nil {
		return ""
	}
	return o.Actor
}

// ticket returns the Ticket of opts, "" when opts is nil.
func (o *ControlOptions) ticket() string {
	if o == nil {
		return ""
	}
	return o.Ticket
}

// checkControl checks the reason and the options of a control request.
func checkControl(reason string, opts *ControlOptions) error {
	if err := checkText("reason", reason); err != nil {
		return err
	}
	return checkTicket(opts.ticket())
}

// Terminate ends a running instance; its pending activities are cancelled
// and its parent, if any, sees the child fail. opts may be nil.
func (e *Engine) Terminate(ctx context.Context, instanceID, reason string, opts *ControlOptions) error {
	if err := checkControl(reason, opts); err != nil {
		return err
	}
	if err := e.controlRequest(ctx, instanceID, false, opts.actor(), &history.ExecutionTerminated{Reason: reason, Ticket: opts.ticket()}); err != nil {
		return err
	}
	// An instance that waits for a concurrency slot is parked: wake it so
	// that its round sees the terminate (see docs/operations.md).
	if fs, ok := e.store.(provider.FlowStore); ok {
		return fs.WakeInstances(ctx, &provider.WakeInstancesParams{InstanceIDs: []string{instanceID}})
	}
	return nil
}

// Suspend pauses a running instance: signals and results are recorded but
// its code does not run until Resume. opts may be nil.
func (e *Engine) Suspend(ctx context.Context, instanceID, reason string, opts *ControlOptions) error {
	if err := checkControl(reason, opts); err != nil {
		return err
	}
	return e.controlRequest(ctx, instanceID, false, opts.actor(), &history.ExecutionSuspended{Reason: reason, Ticket: opts.ticket()})
}

// Resume continues a suspended instance. opts may be nil.
func (e *Engine) Resume(ctx context.Context, instanceID, reason string, opts *ControlOptions) error {
	if err := checkControl(reason, opts); err != nil {
		return err
	}
	return e.controlRequest(ctx, instanceID, true, opts.actor(), &history.ExecutionResumed{Reason: reason, Ticket: opts.ticket()})
}

func (e *Engine) controlRequest(ctx context.Context, instanceID string, suspended bool, user string, attrs history.Attributes) error {
	if err := e.validateID("instance id", instanceID); err != nil {
		return err
	}
	actor, err := e.actor(user)
	if err != nil {
		return err
	}
	if err := e.mustBeRunning(ctx, instanceID, suspended); err != nil {
		return err
	}
	m, err := e.control(instanceID, actor, attrs)
	if err != nil {
		return err
	}
	return e.enqueue(ctx, m)
}

func (e *Engine) control(instanceID, actor string, attrs history.Attributes) (provider.Message, error) {
	id := e.opts.NewID()
	m, err := provider.NewMessage(id, instanceID, "", id, attrs)
	m.Actor = actor
	return m, err
}

// mustBeRunning checks that the instance exists (or its start is pending)
// and has not ended; with suspended, that it is suspended.
func (e *Engine) mustBeRunning(ctx context.Context, instanceID string, suspended bool) error {
	rec, pending, err := e.lookup(ctx, instanceID)
	switch {
	case err != nil:
		return err
	case rec == nil && !pending:
		return fmt.Errorf("%w: %s", ErrInstanceNotFound, instanceID)
	case rec != nil && rec.Status.Terminal():
		return fmt.Errorf("%w: %s is %s", ErrInstanceNotRunning, instanceID, rec.Status)
	case suspended && (rec == nil || rec.Status != provider.StatusSuspended):
		return fmt.Errorf("%w: %s is not suspended", ErrInstanceNotRunning, instanceID)
	}
	return nil
}

// lookup returns the instance record, if any, and whether a start message
// is queued for the instance.
func (e *Engine) lookup(ctx context.Context, instanceID string) (*provider.InstanceRecord, bool, error) {
	rec, start, err := e.find(ctx, instanceID, false, nil)
	return rec, start != nil, err
}

// holdRead is the legal hold find read with the record, when the store
// reads both in one call (provider.InstanceHoldReader): read says it did.
type holdRead struct {
	hold *provider.Hold
	read bool
}

// find returns the instance record, if any, and the queued start message
// of the instance, if any. A round stores the record before (peek-lock) or
// atomically with (transactional) acking the start, so reading the queue
// and then the record tells every case. It reads the record first, and
// stops there when the instance is running (one read for a signal or a
// control request), unless queueFirst says the instance is likely new (a
// start: two reads instead of three). With hold, on a store that reads
// an instance's record and hold together, it fills hold with the hold
// read with the record it returns.
func (e *Engine) find(ctx context.Context, instanceID string, queueFirst bool, hold *holdRead) (*provider.InstanceRecord, *provider.Message, error) {
	reader, _ := e.store.(provider.InstanceHoldReader)
	get := func() (*provider.InstanceRecord, error) {
		var (
			rec *provider.InstanceRecord
			err error
		)
		if hold != nil && reader != nil {
			var h *provider.Hold
			rec, h, err = reader.GetInstanceHold(ctx, instanceID)
			*hold = holdRead{hold: h, read: err == nil}
		} else {
			rec, err = e.store.GetInstance(ctx, instanceID)
		}
		if errors.Is(err, provider.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("look up instance %s: %w", instanceID, err)
		}
		return rec, nil
	}
	var (
		rec *provider.InstanceRecord
		err error
	)
	if !queueFirst {
		if rec, err = get(); err != nil || (rec != nil && !rec.Status.Terminal()) {
			return rec, nil, err
		}
	}
	queued, err := e.store.ListMessages(ctx, &provider.ListMessagesParams{InstanceID: instanceID, Limit: 100})
	if err != nil {
		return nil, nil, fmt.Errorf("look up instance %s: %w", instanceID, err)
	}
	if queueFirst || rec == nil {
		// The first round may have taken the start before the queue read.
		if rec, err = get(); err != nil {
			return nil, nil, err
		}
	}
	for i := range queued {
		if queued[i].Kind == history.KindExecutionStarted {
			return rec, &queued[i], nil
		}
	}
	return rec, nil, nil
}

// deadStart returns the newest unresolved dead letter of a start message
// of an instance, or nil: the start of an instance whose first turn
// panicked, say, which left no record.
func (e *Engine) deadStart(ctx context.Context, instanceID string) (*provider.DeadLetter, error) {
	if _, err := e.deadLetterStore(); err != nil {
		return nil, nil // a store without dead-letter reads cannot tell
	}
	var found *provider.DeadLetter
	after := ""
	for {
		letters, err := e.listDeadLetters(ctx, &provider.ListDeadLettersParams{InstanceID: instanceID, Status: provider.DeadLetterDead, AfterID: after, Limit: 100})
		if err != nil {
			return nil, fmt.Errorf("look up instance %s: %w", instanceID, err)
		}
		for i := range letters {
			l := &letters[i]
			if l.Message != nil && l.Message.Kind == history.KindExecutionStarted && (found == nil || l.At.After(found.At)) {
				found = l
			}
		}
		if len(letters) < 100 {
			return found, nil
		}
		after = letters[len(letters)-1].ID
	}
}

func (e *Engine) now() time.Time { return e.opts.Clock.Now().UTC().Truncate(time.Microsecond) }

func (e *Engine) validateID(what, id string) error {
	return validateID(what, id)
}

// validateID checks an id, wrapping the reason in ErrInvalidArgument
// without repeating the history package's prefix.
func validateID(what, id string) error {
	if err := history.ValidateID(what, id); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidArgument, strings.TrimPrefix(err.Error(), history.ErrInvalid.Error()+": "))
	}
	return nil
}

func (e *Engine) actor(user string) (string, error) {
	if user == "" {
		return history.ActorSystem, nil
	}
	if err := e.validateID("actor", user); err != nil {
		return "", err
	}
	return history.UserActor(user), nil
}

func (e *Engine) encode(what string, v any) ([]byte, error) {
	return e.encodeWith(e.opts.Codec, what, v)
}

// encodeWith encodes v with codec, checking the payload limit.
func (e *Engine) encodeWith(codec Codec, what string, v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	if raw, ok := v.(RawPayload); ok {
		v = []byte(raw)
		if len(raw) > e.opts.MaxPayloadSize {
			return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrPayloadTooLarge, what, len(raw), e.opts.MaxPayloadSize)
		}
		return raw, nil
	}
	b, err := codec.Encode(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode %s: %w", ErrInvalidArgument, what, err)
	}
	if len(b) > e.opts.MaxPayloadSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrPayloadTooLarge, what, len(b), e.opts.MaxPayloadSize)
	}
	return b, nil
}

// Decode decodes a payload encoded with the engine's codec (a task's
// payload or result, an event's input) into out.
// A payload sealed for a data subject is opened first: an erased
// subject's is an *[ErasedError].
func (e *Engine) Decode(data []byte, out any) error { return e.payloads.Decode(data, out) }

// Instance describes an instance as its projections show it.
type Instance struct {
	ID            string
	ExecutionID   string
	Workflow      string
	Version       string
	Status        Status
	BusinessKey   string
	BusinessParts map[string]string
	ParentID      string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	CompletedAt   time.Time
	// LastError is the most recent error in history (a failed activity).
	LastError string
	// Incident is the reason of the instance's newest unresolved dead
	// letter, if any.
	Incident string
	// LastSeq is the last event the description reflects.
	LastSeq int64
	// Failure is set for failed and terminated instances.
	Failure *Failure
	// SearchAttributes are the instance's search attributes: string,
	// int64, float64, bool, time.Time or []string by declared type.
	SearchAttributes map[string]any
	// CustomStatusText is the custom status when it was set as a string.
	CustomStatusText string
	// Waiting is set while the instance's start waits for a slot of its
	// concurrency key (StartOptions.Concurrency): why it has not started,
	// and behind what.
	Waiting *Waiting
	// Hold is the instance's legal hold, if any (set by Describe).
	Hold *LegalHold

	output       []byte
	customStatus []byte
	codec        Codec
}

// Result decodes the output of a completed instance into out. For a failed
// or terminated instance it returns a *WorkflowError, and for one still
// running an error saying it has no result yet.
func (i *Instance) Result(out any) error {
	switch i.Status {
	case StatusCompleted:
		if out == nil {
			return nil
		}
		return i.codec.Decode(i.output, out)
	case StatusFailed, StatusTerminated:
		f := Failure{Message: string(i.Status)}
		if i.Failure != nil {
			f = *i.Failure
		}
		return &WorkflowError{InstanceID: i.ID, Status: i.Status, Failure: f}
	}
	return fmt.Errorf("chronicle: instance %s is %s and has no result yet", i.ID, i.Status)
}

// CustomStatus decodes the instance's custom status into out; it reports
// false when none was set.
func (i *Instance) CustomStatus(out any) (bool, error) {
	if len(i.customStatus) == 0 {
		return false, nil
	}
	return true, i.codec.Decode(i.customStatus, out)
}

func (e *Engine) instance(rec *provider.InstanceRecord) *Instance {
	return &Instance{
		ID: rec.InstanceID, ExecutionID: rec.ExecutionID, Workflow: rec.Name, Version: rec.Version, Status: rec.Status,
		BusinessKey: rec.BusinessKey, BusinessParts: rec.BusinessParts, ParentID: rec.ParentID,
		CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, CompletedAt: rec.CompletedAt,
		LastError: rec.LastError, Incident: rec.Incident, LastSeq: rec.LastSeq, Failure: rec.Failure,
		SearchAttributes: goValues(rec.Attributes), CustomStatusText: rec.CustomStatusText,
		output: rec.Output, customStatus: rec.CustomStatus, codec: e.payloads,
	}
}

// Describe returns the instance as its projections show it. An instance
// whose first round has not run yet is found from its queued start
// message: its status is StatusPending and it shows the workflow, version,
// business reference and creation time the start gave. An instance whose
// start was dead-lettered (its first turn panicked, say) is pending too,
// with the dead letter as its Incident and LastError; redriving the dead
// letter runs it. It returns ErrInstanceNotFound only for an id that was
// never started (or was purged).
func (e *Engine) Describe(ctx context.Context, instanceID string) (*Instance, error) {
	if err := e.validateID("instance id", instanceID); err != nil {
		return nil, err
	}
	var hold holdRead
	rec, start, err := e.find(ctx, instanceID, false, &hold)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", instanceID, err)
	}
	switch {
	case rec != nil:
		inst := e.instance(rec)
		if hold.read {
			inst.Hold = hold.hold
		} else if inst.Hold, err = e.GetHold(ctx, instanceID); err != nil {
			return nil, fmt.Errorf("describe %s: %w", instanceID, err)
		}
		return inst, nil
	case start != nil:
		inst := e.pending(start)
		if err := e.fillWaiting(ctx, inst, start); err != nil {
			return nil, fmt.Errorf("describe %s: %w", instanceID, err)
		}
		return inst, nil
	}
	letter, err := e.deadStart(ctx, instanceID)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", instanceID, err)
	}
	if letter != nil {
		return e.deadPending(letter), nil
	}
	return nil, fmt.Errorf("%w: %s", ErrInstanceNotFound, instanceID)
}

// deadPending describes an instance whose start was dead-lettered before
// its first round could store anything: pending, with the dead letter as
// its incident and last error.
func (e *Engine) deadPending(l *provider.DeadLetter) *Instance {
	inst := e.pending(l.Message)
	inst.UpdatedAt = l.At
	inst.Incident = string(l.Reason) + ": " + l.Error
	inst.LastError = l.Error
	return inst
}

// StatusPending is the status Describe and Wait report for an instance
// whose start is queued and whose first round has not run yet.
const StatusPending Status = "pending"

// pending describes an instance from its queued start message.
func (e *Engine) pending(start *provider.Message) *Instance {
	inst := &Instance{ID: start.InstanceID, ExecutionID: start.ExecutionID, Status: StatusPending,
		CreatedAt: start.EnqueuedAt, UpdatedAt: start.EnqueuedAt, codec: e.opts.Codec}
	if a, err := history.DecodeAttributes(start.Kind, start.Payload); err == nil {
		if s, ok := a.(*history.ExecutionStarted); ok {
			inst.Workflow, inst.Version = s.Name, s.Version
			inst.BusinessKey, inst.BusinessParts = s.BusinessKey, s.BusinessParts
			inst.SearchAttributes = goValues(s.SearchAttributes)
			if s.Parent != nil {
				inst.ParentID = s.Parent.InstanceID
			}
		}
	}
	return inst
}

// Wait blocks until the instance has ended (completed, failed or
// terminated) or ctx ends, and returns it. An instance whose start is
// still queued is waited for, and so is one whose start was dead-lettered
// (redriving it runs the instance); an unknown one is ErrInstanceNotFound.
func (e *Engine) Wait(ctx context.Context, instanceID string) (*Instance, error) {
	if err := e.validateID("instance id", instanceID); err != nil {
		return nil, err
	}
	poll := 5 * time.Millisecond
	for {
		var hint <-chan struct{}
		if n, ok := e.store.(provider.Notifier); ok {
			hint = n.WorkHint(provider.QueueOrchestration)
		}
		rec, pending, err := e.lookup(ctx, instanceID)
		if err != nil {
			return nil, err
		}
		if rec != nil && rec.Status.Terminal() && !pending {
			return e.instance(rec), nil
		}
		if rec == nil && !pending {
			letter, err := e.deadStart(ctx, instanceID)
			if err != nil {
				return nil, err
			}
			if letter == nil {
				return nil, fmt.Errorf("%w: %s", ErrInstanceNotFound, instanceID)
			}
		}
		timer := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-hint:
		case <-timer.C:
			poll = min(poll*2, time.Second)
		}
		timer.Stop()
	}
}

// History returns the whole history of an instance, every execution, in
// order.
func (e *Engine) History(ctx context.Context, instanceID string) ([]Event, error) {
	if err := e.validateID("instance id", instanceID); err != nil {
		return nil, err
	}
	events, err := e.store.LoadHistory(ctx, &provider.LoadHistoryParams{InstanceID: instanceID, FromSeq: 1})
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", instanceID, err)
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrInstanceNotFound, instanceID)
	}
	return events, nil
}

// DeadLetterFilter selects dead letters.
type DeadLetterFilter struct {
	InstanceID string
	// Status filters by status; empty means any.
	Status provider.DeadLetterStatus
	// AfterID pages: only ids greater than it.
	AfterID string
	// Limit bounds the result; zero means 100.
	Limit int
}

// ListDeadLetters returns dead letters in id order.
func (e *Engine) ListDeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	return e.listDeadLetters(ctx, &provider.ListDeadLettersParams{InstanceID: f.InstanceID, Status: f.Status, AfterID: f.AfterID, Limit: f.Limit})
}

// GetDeadLetter returns one dead letter.
func (e *Engine) GetDeadLetter(ctx context.Context, id string) (*DeadLetter, error) {
	dl, err := e.getDeadLetter(ctx, id)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrDeadLetterNotFound, id)
	}
	return dl, err
}

// RedriveDeadLetter puts a dead letter's message or activity task back in
// its queue with its attempts reset, recording who did it.
func (e *Engine) RedriveDeadLetter(ctx context.Context, id, by string) error {
	return e.resolve(ctx, id, by, provider.DeadLetterRedriven)
}

// DiscardDeadLetter closes a dead letter without processing it, recording
// who did it.
func (e *Engine) DiscardDeadLetter(ctx context.Context, id, by string) error {
	return e.resolve(ctx, id, by, provider.DeadLetterDiscarded)
}

func (e *Engine) resolve(ctx context.Context, id, by string, status provider.DeadLetterStatus) error {
	actor, err := e.actor(by)
	if err != nil {
		return err
	}
	err = e.resolveDeadLetter(ctx, &provider.ResolveDeadLetterParams{ID: id, Status: status, By: actor, Now: e.now()})
	switch {
	case errors.Is(err, provider.ErrNotFound):
		return fmt.Errorf("%w: %s", ErrDeadLetterNotFound, id)
	case errors.Is(err, provider.ErrInvalidState):
		return fmt.Errorf("%w: %s", ErrDeadLetterResolved, id)
	}
	return err
}
