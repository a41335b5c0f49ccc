package chronicle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// Client is the client half of Chronicle: what a process calls to start,
// signal, describe, wait for and operate instances and to work on human
// tasks. An [*Engine] is a Client; [NewClient] returns one that runs no
// workers and needs no registered code, for a process (a web handler, a
// command) that starts workflows other processes run. See docs/client.md.
//
// The methods are those of the same name on [Engine], which documents
// them. Client is sealed (it has an unexported method) so that methods
// can be added to it; test code that needs a Client uses one on the
// memory store.
type Client interface {
	Start(ctx context.Context, workflow string, input any, opts *StartOptions) (string, error)
	StartMany(ctx context.Context, reqs []StartRequest) ([]string, error)
	RaiseEvent(ctx context.Context, instanceID, name string, payload any, opts *RaiseOptions) error
	Describe(ctx context.Context, instanceID string) (*Instance, error)
	Wait(ctx context.Context, instanceID string) (*Instance, error)
	History(ctx context.Context, instanceID string) ([]Event, error)
	ListInstances(ctx context.Context, f InstanceFilter) ([]*Instance, error)
	CountInstances(ctx context.Context, f CountFilter) ([]Count, error)
	Terminate(ctx context.Context, instanceID, reason string, opts *ControlOptions) error
	Suspend(ctx context.Context, instanceID, reason string, opts *ControlOptions) error
	Resume(ctx context.Context, instanceID, reason string, opts *ControlOptions) error
	Rerun(ctx context.Context, instanceID string, opts RerunOptions) (string, error)
	Hold(ctx context.Context, instanceID string, opts HoldOptions) (*LegalHold, error)
	ReleaseHold(ctx context.Context, instanceID string, opts HoldOptions) error
	GetHold(ctx context.Context, instanceID string) (*LegalHold, error)
	ListHolds(ctx context.Context) ([]LegalHold, error)

	ListTasks(ctx context.Context, f TaskFilter) ([]TaskInfo, error)
	GetTask(ctx context.Context, taskID string) (*TaskInfo, error)
	TaskEvents(ctx context.Context, taskID string) ([]TaskEvent, error)
	ClaimTask(ctx context.Context, taskID string, user User) error
	AssignTask(ctx context.Context, taskID, assignee string, user User) error
	ReleaseTask(ctx context.Context, taskID string, user User) error
	ReassignTask(ctx context.Context, taskID, to string, user User) error
	CompleteTask(ctx context.Context, taskID string, result any, user User) error
	CompleteTaskJSON(ctx context.Context, taskID string, result []byte, user User) error

	ListDeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error)
	GetDeadLetter(ctx context.Context, id string) (*DeadLetter, error)
	RedriveDeadLetter(ctx context.Context, id, by string) error
	DiscardDeadLetter(ctx context.Context, id, by string) error

	CreateSchedule(ctx context.Context, id string, opts ScheduleOptions) error
	UpdateSchedule(ctx context.Context, id string, opts ScheduleOptions) error
	PauseSchedule(ctx context.Context, id, note, actor string) error
	ResumeSchedule(ctx context.Context, id, note, actor string) error
	TriggerSchedule(ctx context.Context, id, actor string) error
	BackfillSchedule(ctx context.Context, id string, from, to time.Time, actor string) error
	DeleteSchedule(ctx context.Context, id, note, actor string) error
	DescribeSchedule(ctx context.Context, id string) (*ScheduleDescription, error)
	ListSchedules(ctx context.Context) ([]*ScheduleDescription, error)

	StartBatch(ctx context.Context, opts BatchOptions) (string, error)
	PauseBatch(ctx context.Context, id, note, actor string) error
	ResumeBatch(ctx context.Context, id, note, actor string) error
	CancelBatch(ctx context.Context, id, note, actor string) error
	DescribeBatch(ctx context.Context, id string) (*BatchDescription, error)
	ListBatches(ctx context.Context) ([]*BatchDescription, error)

	// Decode decodes a payload encoded with the client's codec (an
	// instance's input in its history, a task's payload).
	Decode(data []byte, out any) error

	// engine seals the interface: the engine that carries out the calls.
	engine() *Engine
}

var _ Client = (*Engine)(nil)

func (e *Engine) engine() *Engine { return e }

// ClientOptions configure a [Client]. The zero value of every field takes
// the default of the [Options] field of the same name. Codec and
// MaxPayloadSize must agree with the engines that run the workflows.
type ClientOptions struct {
	// Logger receives the client's logs.
	Logger *slog.Logger
	// Clock tells the time.
	Clock Clock
	// Codec encodes inputs, signal payloads and task results, and decodes
	// results. Default: MsgpackCodec.
	Codec Codec
	// MaxPayloadSize bounds every payload the client encodes.
	MaxPayloadSize int
	// NewID makes the ids the client draws: instance ids left empty,
	// execution ids, message ids and default idempotency keys.
	NewID func() string
	// SearchAttributes declares the search attributes, as
	// [Options.SearchAttributes]: a client checks the values it starts
	// instances with, and parses queries, against them.
	SearchAttributes map[string]query.Type
	// Keys keeps the data keys of data subjects, as [Options.Keys].
	Keys KeyProvider
}

// client is the engine behind NewClient, seen through the Client
// interface only: it has no Run and no registration.
type client struct{ Client }

// NewClient returns a Client on store that runs no workers. It starts
// workflows by name without their code: the input of a workflow it does
// not know is encoded with the codec as it is, unchecked (a typed
// [Workflow] checks it when the program compiles). Everything else
// behaves as on an [Engine].
func NewClient(store provider.Store, opts ClientOptions) (Client, error) {
	e, err := New(store, Options{
		Logger: opts.Logger, Clock: opts.Clock, Codec: opts.Codec, MaxPayloadSize: opts.MaxPayloadSize, NewID: opts.NewID,
		SearchAttributes: opts.SearchAttributes, Keys: opts.Keys,
	})
	if err != nil {
		return nil, err
	}
	e.clientOnly = true
	return client{Client: e}, nil
}

// workflowInput returns the input type of a registered workflow.
func (e *Engine) workflowInput(name string) (reflect.Type, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	t, ok := e.inputs[name]
	return t, ok
}

// startInput checks the input of a start against the input type of its
// workflow and returns the value to encode. A workflow the engine has not
// registered is ErrUnknownWorkflow, except on a Client, which takes the
// input as it is.
func (e *Engine) startInput(workflow string, input any) (any, error) {
	in, ok := e.workflowInput(workflow)
	if !ok {
		if !e.clientOnly {
			return nil, fmt.Errorf("%w: %q", ErrUnknownWorkflow, workflow)
		}
		if err := e.validateID("workflow name", workflow); err != nil {
			return nil, err
		}
		return input, nil
	}
	return checkInput(workflow, in, input)
}

// checkInput checks a workflow input against the type the workflow
// decodes it into and returns the value to encode. It takes a value
// assignable to the type or a non-nil pointer to one, nil for a type that
// has nil (a pointer, interface, map or slice), a RawPayload as it is,
// and a generic value (a map[string]any or []any) that decodes strictly,
// as encoding/json would, into the type, which it returns decoded.
func checkInput(workflow string, in reflect.Type, input any) (any, error) {
	if _, raw := input.(RawPayload); raw {
		return input, nil
	}
	mismatch := func(got string) error {
		return fmt.Errorf("%w: workflow %s takes input of type %s, not %s", ErrInvalidArgument, workflow, in, got)
	}
	if input == nil {
		switch in.Kind() {
		case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
			return nil, nil
		}
		return nil, mismatch("nil")
	}
	t := reflect.TypeOf(input)
	switch {
	case t.AssignableTo(in):
		return input, nil
	case t.Kind() == reflect.Pointer && t.Elem().AssignableTo(in):
		if reflect.ValueOf(input).IsNil() {
			return nil, mismatch("a nil " + t.String())
		}
		return input, nil
	case generic(input):
		b, err := json.Marshal(input)
		if err != nil {
			return nil, fmt.Errorf("%w: encode input of workflow %s: %w", ErrInvalidArgument, workflow, err)
		}
		v := reflect.New(in)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v.Interface()); err != nil {
			return nil, fmt.Errorf("%w: the input of workflow %s does not decode to %s: %w", ErrInvalidArgument, workflow, in, err)
		}
		return v.Elem().Interface(), nil
	}
	return nil, mismatch(t.String())
}
