package chronicle_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
)

type Application struct {
	Applicant string
	Amount    int
}

type Decision struct {
	Approved bool
	Reason   string
}

// An application is scored by an activity, then waits for the applicant's
// documents (a signal) before it is decided.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example"})
	if err != nil {
		panic(err)
	}
	_ = chronicle.RegisterActivity(engine, "score", func(ctx context.Context, app Application) (int, error) {
		return 700 + len(app.Applicant), nil
	})
	_ = chronicle.RegisterWorkflow(engine, "approve", func(ctx *chronicle.Context, app Application) (Decision, error) {
		score, err := chronicle.CallActivity[int](ctx, "score", app, nil)
		if err != nil {
			return Decision{}, err
		}
		docs, err := chronicle.WaitEvent[string](ctx, "documents", &chronicle.WaitOptions{Timeout: 7 * 24 * time.Hour})
		if err != nil {
			return Decision{Reason: "no documents"}, nil
		}
		return Decision{Approved: score > 700, Reason: fmt.Sprintf("score %d, %s", score, docs)}, nil
	})

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = engine.Run(ctx)
	}()

	id, err := engine.Start(ctx, "approve", Application{Applicant: "Ada", Amount: 12000},
		&chronicle.StartOptions{InstanceID: "application-42", BusinessKey: "APP-42"})
	if err != nil {
		panic(err)
	}
	if err := engine.RaiseEvent(ctx, id, "documents", "payslips",
		&chronicle.RaiseOptions{IdempotencyKey: "upload-1"}); err != nil {
		panic(err)
	}
	inst, err := engine.Wait(ctx, id)
	if err != nil {
		panic(err)
	}
	var d Decision
	if err := inst.Result(&d); err != nil {
		panic(err)
	}
	fmt.Println(inst.ID, inst.Status, d.Approved, d.Reason)

	events, _ := engine.History(ctx, id)
	fmt.Println("first event:", events[0].Kind, "last event:", events[len(events)-1].Kind)
	cancel()
	<-done
	// Output:
	// application-42 completed true score 703, payslips
	// first event: ExecutionStarted last event: ExecutionCompleted
}

// A human task: the workflow opens it and waits; a user holding one of its
// roles claims and completes it through the client API. RunOnce drives the
// engine step by step, as tests do.
func ExampleEngine_CompleteTask() {
	ctx := context.Background()
	engine, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example"})
	defer engine.Close()
	_ = chronicle.RegisterWorkflow(engine, "review", func(ctx *chronicle.Context, claim string) (string, error) {
		task := ctx.CreateTask("review-claim", claim, &chronicle.TaskOptions{TaskID: "review-" + claim, Roles: []string{"adjuster"}})
		return chronicle.WaitTask[string](ctx, task)
	})
	drain := func() {
		for worked, _ := engine.RunOnce(ctx); worked; worked, _ = engine.RunOnce(ctx) {
		}
	}
	_, _ = engine.Start(ctx, "review", "C-17", &chronicle.StartOptions{InstanceID: "claim-17"})
	drain()

	ana := chronicle.User{ID: "ana", Roles: []string{"adjuster"}}
	inbox, _ := engine.ListTasks(ctx, chronicle.TaskFilter{Roles: ana.Roles, Unassigned: true})
	fmt.Println("inbox:", inbox[0].TaskID)
	fmt.Println("eve may not:", engine.ClaimTask(ctx, "review-C-17", chronicle.User{ID: "eve"}))
	_ = engine.ClaimTask(ctx, "review-C-17", ana)
	drain()
	_ = engine.CompleteTask(ctx, "review-C-17", "approved", ana)
	drain()

	inst, _ := engine.Describe(ctx, "claim-17")
	var decision string
	_ = inst.Result(&decision)
	fmt.Println(inst.Status, decision)
	trail, _ := engine.TaskEvents(ctx, "review-C-17")
	for _, e := range trail {
		fmt.Println(e.Kind, e.Actor)
	}
	// Output:
	// inbox: review-C-17
	// eve may not: chronicle: forbidden: eve holds none of the roles [adjuster] of task review-C-17
	// completed approved
	// TaskCreated worker:example
	// TaskAssigned user:ana
	// TaskCompleted user:ana
}

// Every history is hash-chained: Verify names the first event whose chain
// does not hold.
func ExampleEngine_Verify() {
	ctx := context.Background()
	engine, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example"})
	defer engine.Close()
	_ = chronicle.RegisterWorkflow(engine, "hello", func(ctx *chronicle.Context, name string) (string, error) {
		return "hello " + name, nil
	})
	_, _ = engine.Start(ctx, "hello", "auditor", &chronicle.StartOptions{InstanceID: "greeting-1"})
	for worked, _ := engine.RunOnce(ctx); worked; worked, _ = engine.RunOnce(ctx) {
	}
	events, _ := engine.History(ctx, "greeting-1")
	var prev []byte
	for _, e := range events {
		fmt.Printf("%d %s, chained to the previous event: %v\n", e.Seq, e.Kind, bytes.Equal(e.PrevHash, prev))
		prev = e.Hash
	}
	fmt.Println("verify:", engine.Verify(ctx, "greeting-1"))
	// Output:
	// 1 ExecutionStarted, chained to the previous event: true
	// 2 TurnStarted, chained to the previous event: true
	// 3 ExecutionCompleted, chained to the previous event: true
	// verify: <nil>
}

// StartMany starts a batch of workflows with one write to the store: every
// request is checked first, and nothing starts when one is refused.
func ExampleEngine_StartMany() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example"})
	if err != nil {
		panic(err)
	}
	_ = chronicle.RegisterWorkflow(engine, "greet", func(ctx *chronicle.Context, name string) (string, error) {
		return "hello " + name, nil
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = engine.Run(ctx)
	}()

	var reqs []chronicle.StartRequest
	for _, name := range []string{"Ada", "Grace", "Edsger"} {
		reqs = append(reqs, chronicle.StartRequest{Workflow: "greet", Input: name, Options: &chronicle.StartOptions{InstanceID: "greet-" + name}})
	}
	ids, err := engine.StartMany(ctx, reqs)
	if err != nil {
		panic(err)
	}
	for _, id := range ids {
		inst, err := engine.Wait(ctx, id)
		if err != nil {
			panic(err)
		}
		var out string
		_ = inst.Result(&out)
		fmt.Println(id, inst.Status, out)
	}

	// One unknown workflow in a batch, and nothing of it starts.
	_, err = engine.StartMany(ctx, []chronicle.StartRequest{
		{Workflow: "greet", Input: "Barbara", Options: &chronicle.StartOptions{InstanceID: "greet-Barbara"}},
		{Workflow: "farewell", Input: "Barbara"},
	})
	fmt.Println(err)
	_, err = engine.Describe(ctx, "greet-Barbara")
	fmt.Println(err)

	cancel()
	<-done
	// Output:
	// greet-Ada completed hello Ada
	// greet-Grace completed hello Grace
	// greet-Edsger completed hello Edsger
	// start 1 (farewell): chronicle: unknown workflow: "farewell"
	// chronicle: instance not found: greet-Barbara
}

// A task result typed by a person as JSON: keys match the fields of the
// type the workflow waits for without regard to case, and a key the type
// lacks is refused before anything is written.
func ExampleEngine_CompleteTaskJSON() {
	type Approval struct {
		Approved bool
		Amount   int
	}
	ctx := context.Background()
	engine, _ := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example"})
	defer engine.Close()
	_ = chronicle.RegisterWorkflow(engine, "refund", func(ctx *chronicle.Context, order string) (string, error) {
		task := ctx.CreateTask("approve-refund", order, &chronicle.TaskOptions{TaskID: "refund-" + order, Roles: []string{"finance"}})
		a, err := chronicle.WaitTask[Approval](ctx, task)
		if err != nil || !a.Approved {
			return "rejected", err
		}
		return fmt.Sprintf("refunded %d", a.Amount), nil
	})
	drain := func() {
		for worked, _ := engine.RunOnce(ctx); worked; worked, _ = engine.RunOnce(ctx) {
		}
	}
	_, _ = engine.Start(ctx, "refund", "O-7", &chronicle.StartOptions{InstanceID: "order-7"})
	drain()

	fin := chronicle.User{ID: "fin", Roles: []string{"finance"}}
	fmt.Println(engine.CompleteTaskJSON(ctx, "refund-O-7", []byte(`{"aproved": true}`), fin))
	_ = engine.CompleteTaskJSON(ctx, "refund-O-7", []byte(`{"approved": true, "amount": 120}`), fin)
	drain()

	inst, _ := engine.Describe(ctx, "order-7")
	var outcome string
	_ = inst.Result(&outcome)
	fmt.Println(inst.Status, outcome)
	// Output:
	// chronicle: invalid argument: the result of task refund-O-7 does not decode to chronicle_test.Approval: unknown field "aproved"
	// completed refunded 120
}
