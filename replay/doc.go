// Package replay runs workflow code deterministically against history.
//
// Workflow functions are ordinary Go taking a [*Context]; the root package
// exposes it as chronicle.Context. The executor runs the code as
// coroutines handed control one at a time, so a workflow's goroutines
// ([Context.Go]) never run in parallel. Each turn of a round
// ([Replayer.Turn], a round.TurnFunc) feeds the code the events the round
// appended and collects the commands it issues (activities, timers, child
// workflows, human tasks, markers) as new events.
//
// # Replay
//
// When an executor is not cached (a cold round, a restarted node), the
// current execution's history is replayed first: every command the code
// issues is matched with the recorded one by kind and identity, and a
// mismatch stops the round with a [*NondeterminismError] naming the seq,
// what history holds and what the code asked for. History is not touched
// and the message is retried, then dead-lettered.
//
// # Debugging
//
// [Replayer.Check] replays a stored or exported history against the
// current code and reports the first divergence; [Replayer.Debug] also
// returns the commands each turn produced and the result. Golden histories
// under testdata/ use them to prove that code changes still replay old
// instances.
package replay
