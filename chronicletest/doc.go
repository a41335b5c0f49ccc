// Package chronicletest tests Chronicle workflows in milliseconds: an
// environment runs a real engine on the memory store (or any store) with a
// virtual clock that jumps to the next due timer, retry or deadline when
// nothing else can run, so a workflow that waits 14 days finishes at once.
//
//	func TestOrderShipsAfterApproval(t *testing.T) {
//		t.Parallel()
//		env := chronicletest.New(t)
//		chronicle.RegisterWorkflow(env.Engine(), "order", orderWorkflow)
//		chronicletest.MockActivity[Payment, Receipt](env, "charge").Return(Receipt{ID: "R-1"})
//		chronicletest.MockActivity[Order, string](env, "ship").Return("TRACK-1").Once()
//
//		id := env.Start("order", Order{ID: "ORD-1"}, nil)
//		env.CompleteTaskAt(2*time.Hour, id, "approve-order", Approval{OK: true}, chronicle.User{ID: "ops", Roles: []string{"ops"}})
//		env.RunUntilIdle()
//
//		env.AssertStatus(id, chronicle.StatusCompleted)
//		res := chronicletest.Result[OrderResult](env, id)
//		...
//	}
//
// # The environment
//
// [New] returns an [Env] tied to a test: the engine it builds is closed and
// the mocks' expectations are checked when the test ends (t.Cleanup). Each
// Env has its own store, clock and ids, so tests that call t.Parallel do
// not share anything, and the package works under go test -race.
//
// Nothing runs in the background: [Env.RunUntilIdle], [Env.RunFor],
// [Env.RunUntil] and [Env.Wait] run rounds and activity attempts one at a
// time with [chronicle.Engine.RunOnce] on the test's goroutine, so
// activities (and mocks) run there too, in a fixed order.
//
// # Time skipping
//
// The clock starts at [DefaultStart] (or [StartAt]) and moves only when
// the environment moves it. The run loop is:
//
//  1. run the actions scheduled with [Env.At] (and the helpers ending in
//     At) that are due;
//  2. run rounds and activity attempts until none is due;
//  3. move the clock to the earliest of the next scheduled action and the
//     next work the store holds (a timer's fire time, an activity retry, an
//     instance held after a failed round), as [chronicle.Engine.QueueStats]
//     reports it, and go to 1.
//
// The loop stops when nothing is queued and no action is left (idle), when
// the limit of RunFor or RunUntil is reached (the clock then reads the
// limit), or when the instance Wait waits for has ended. An action due at
// the same time as queued work runs first. Activities take no virtual time.
//
// # Determinism
//
// Two runs of a test produce the same histories, byte for byte, hashes
// included: the clock starts at a fixed time, the engine's ids
// ([chronicle.Options.NewID]) come from a counter ("id-1", "id-2", ...),
// the node is "test", and retry jitter is fixed at 1, so every activity
// retry waits exactly its policy's nominal delay: InitialInterval ×
// Multiplier^(attempt-1), capped at MaxInterval (the engine takes a random
// half of each delay off in production; a jitter of 0 would halve every
// delay). [Env.Timeline] renders a history as text for golden files, and
// [Env.AssertGolden] compares it with one.
//
// # Mocks
//
// [MockActivity] registers a mock under an activity's name, with typed
// inputs and results, expectations in the style of testify and Temporal's
// test suite (Return, ReturnError, Do, With, WithInput, Times, Once,
// Maybe), call counts and the inputs it received. A mock takes the place
// of the activity: register either the mock or the real activity under a
// name, not both.
//
// docs/testing.md in the repository covers the kit, golden histories,
// replay tests and running the same tests on PostgreSQL.
package chronicletest
