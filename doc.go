// Package chronicle runs durable, event-sourced workflows on the database
// you already run.
//
// A workflow is a plain Go function. Chronicle records every step it takes
// — each activity it calls, timer it sets, signal it receives, child it
// starts — in an append-only, hash-chained history, and resumes it after a
// crash or a restart by replaying that history through the same code. Each
// resume is one round: the instance's messages are dequeued, history is
// appended, follow-on work is enqueued and the messages are acked, all
// together, so a crash loses nothing and duplicates nothing.
//
// # A first workflow
//
// Workflow code gets a [*Context] instead of a context.Context and calls
// the outside world only through it:
//
//	func Approve(ctx *chronicle.Context, app Application) (Decision, error) {
//		score, err := chronicle.CallActivity[int](ctx, "credit-check", app, nil)
//		if err != nil {
//			return Decision{}, err
//		}
//		docs, err := chronicle.WaitEvent[Documents](ctx, "documents-uploaded",
//			&chronicle.WaitOptions{Timeout: 14 * 24 * time.Hour})
//		if errors.Is(err, chronicle.ErrTimeout) {
//			return Decision{Reason: "no documents"}, nil
//		}
//		...
//	}
//
// Activities are ordinary functions that do the I/O; they run at least once
// and are retried with capped exponential backoff:
//
//	func CreditCheck(ctx context.Context, app Application) (int, error) {
//		return bureau.Score(ctx, app.Applicant)
//	}
//
// # Running it
//
// An [Engine] holds the registrations and runs the workers on a store: the
// embedded memory store here, PostgreSQL in production.
//
//	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{})
//	chronicle.RegisterWorkflow(engine, "approve", Approve)
//	chronicle.RegisterActivity(engine, "credit-check", CreditCheck)
//	go engine.Run(ctx)
//
//	id, err := engine.Start(ctx, "approve", app, &chronicle.StartOptions{InstanceID: "APP-1001"})
//	err = engine.RaiseEvent(ctx, id, "documents-uploaded", docs,
//		&chronicle.RaiseOptions{IdempotencyKey: "upload-7781"})
//	inst, err := engine.Wait(ctx, id)
//	var d Decision
//	err = inst.Result(&d)
//
// Any number of engines may share one store; each instance runs on one of
// them at a time.
//
// # Typed handles and clients
//
// A [Workflow], [Signal] or [HumanTask] is a name with types attached,
// declared once and used by workers and clients alike, so that the
// compiler checks what they exchange:
//
//	var Approvals = chronicle.Workflow[Application, Decision]("approve")
//
//	Approvals.Register(engine, Approve)
//	run, err := Approvals.Start(ctx, engine, app, nil)
//	decision, err := run.Wait(ctx)
//
// A process that starts and operates instances without their code uses a
// [Client] from [NewClient]; an [*Engine] is a Client too.
//
// Optional settings of a call are an options struct passed by pointer as
// its last argument ([StartOptions], [RaiseOptions], [ControlOptions],
// [ActivityOptions], [WaitOptions], ...); nil means the defaults, which are
// those of the zero value.
//
// # Determinism
//
// Replay works because workflow code does the same thing every time it
// sees the same history. Inside workflows, use [Context.Now] instead of
// time.Now, [Context.NewID] or [Context.SideEffect] instead of random
// numbers, [Context.Go] instead of the go statement, and iterate maps in
// sorted order. When code changes while instances are running, guard the
// change with [Context.Version]; a change that breaks an old history is
// reported as a [*NondeterminismError] naming the seq where code and
// history part, and the instance's message is dead-lettered after its
// retries, with history untouched. Find such a change before it is
// deployed: [Engine.ReplayHistories] replays exported histories
// ([HistoryDir]) or a store's ([StoreHistories]) against the registered
// code, and chronicletest.Replay makes that a test.
//
// # What else is there
//
// Timers ([Context.Timer], [Context.Sleep]), child workflows
// ([Context.CallSubWorkflow]), instances started to run on their own
// ([Context.StartWorkflow]), signals to other instances
// ([Context.SignalWorkflow]), continue-as-new ([Context.ContinueAsNew]),
// human tasks ([Context.CreateTask] in workflow code; [Engine.ListTasks],
// [Engine.ClaimTask], [Engine.CompleteTask] and the other Engine methods
// ending in Task for people, [Engine.CompleteTaskJSON] for a result they
// typed), coroutines with [Context.WhenAll],
// [Context.WhenAny] and [Context.Select], compensation with
// [Context.NewSaga], custom status shown to users
// ([Context.SetCustomStatus]). Operators terminate, suspend and resume
// instances, and list, redrive and discard dead letters. The docs folder
// of the repository explains the guarantees, the providers and the
// operations in depth.
package chronicle
