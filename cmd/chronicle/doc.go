// Command chronicle inspects and operates a Chronicle store: it lists and
// shows instances, prints, exports and verifies their hash-chained
// histories, works on human tasks, resolves dead letters, rebuilds
// projections and purges ended instances.
//
//	chronicle [--store URL] [--schema NAME] [--codec msgpack|json] [--json] COMMAND [ARGS]
//
// # Global flags
//
//   - --store URL: the store. "memory" (the default) is Chronicle's embedded
//     store; a postgres:// (or postgresql://) URL selects PostgreSQL.
//   - --schema NAME: the PostgreSQL schema holding Chronicle's tables.
//   - --codec msgpack|json: the codec of the deployment's engines
//     (Options.Codec; default msgpack), with which payloads are decoded
//     to be shown. A task result is encoded with the codec its task
//     records, whatever the flag says.
//   - --json: print JSON for machines instead of text for people. It is
//     also accepted after the command: chronicle instances list --json.
//
// Flags of a command may come before or after its arguments; "--" ends
// them. chronicle help lists every command, chronicle help COMMAND or
// chronicle COMMAND -h shows one command's flags.
//
// # The memory store and the demo data
//
// The memory store lives only in the process. So that every command can
// be tried without a database, the tool seeds it before each command with
// the demo data of internal/demodata: eight instances of four workflows
// (claims with a human review task, loan applications with a durable
// timer, a failed identity check and a refund with a dead letter) on a
// manual clock at 2026-11-23 10:00 UTC. chronicle demo describes them.
// Every run starts from the same state, and its output is the same on
// every run, hashes included.
//
// Commands that change the store (the task actions, instance terminate,
// suspend, resume and rerun, dlq redrive and discard) only enqueue work for the
// instance; on a shared store the deployment's workers apply it. On the memory store no worker runs, so
// the tool drives the engine until no work is left and reports the
// effect: the task's and the instance's new status. Changes to the memory
// store are lost when the command ends.
//
// # Commands
//
//	demo
//
// Describes the demo data: its instances and what each shows, the open
// tasks, the unresolved dead letters, and commands to try.
//
//	instances list [--status S] [--workflow W] [--key K] [--from TIME] [--to TIME] [--after ID] [--limit N]
//
// Lists instances in id order with their workflow, status, business key,
// creation and last change, and incident (the newest unresolved dead
// letter). --from and --to bound the creation time (RFC 3339 or a date;
// from inclusive, to exclusive); --after and --limit (default 100) page.
//
//	instance show ID
//
// Shows every field of an instance, its decoded result or failure, its
// custom status, its open tasks and its dead letters. A pending instance
// whose start waits for a concurrency slot (StartOptions.Concurrency)
// says so: "Waiting  concurrency key acme (limit 1), position 2, behind
// a-1, since ..." (in JSON, the "waiting" object).
//
//	history show ID
//
// Prints the history as a timeline: one row per event with its seq, time,
// kind, actor and a short description; "→ #n" points a completion at what
// scheduled it.
//
//	history export ID [--out FILE]
//
// Writes the history as JSON Lines (history.WriteJSONL: exact payloads
// and hashes, plus decoded attributes) to standard output or FILE.
//
//	history verify ID | --all | --archive FILE
//
// Verifies hash chains and prints "ok: N events, last hash H" or "BROKEN
// at seq N: reason" per history; the exit code is 1 when a chain is
// broken. --archive verifies an exported or archived file and then checks
// it against the store: against the tombstone of a purged instance
// (chronicle.VerifyArchive), or against the same seq of a stored history.
// --all reports an instance whose start was dead-lettered as "skipped: no
// history yet" and goes on, as Engine.VerifyAll does; so do the
// projections commands with --all.
//
//	replay PATH... | --all
//
// Replays exported histories (each PATH a .jsonl file that history export
// or purge --archive wrote, or a folder of them, searched recursively), or
// with --all every instance of the store, against the registered workflow
// code (Engine.ReplayHistories), and prints per history "ok", "DIVERGED
// ... at seq N history holds X, code asked for Y" or "FAILED" with the
// reason, then a total; the exit code is 1 when a history diverged or
// failed. This binary registers only the demo's workflows (on the memory
// store), so on another store, or for histories of other workflows, each
// history fails with "unknown workflow": a product replays its own
// histories from a program or test that registers its workflows, with
// Engine.ReplayHistories and ReplaySummary.WriteText (the same output) or
// chronicletest.Replay (docs/testing.md).
//
//	tasks list [--role R]... [--assignee U] [--status S] [--instance ID] [--unassigned] [--after ID] [--limit N]
//
// Lists human tasks. --role may be repeated or take a comma list; it
// matches tasks any of the roles may work on. An inbox of work to pick up
// is --role R --unassigned --status open.
//
//	task show TASK
//	task claim TASK --user U --roles R1,R2
//	task assign TASK --to U2 --user U --roles R1,R2
//	task reassign TASK --to U2 --user U [--roles R1,R2]
//	task release TASK --user U
//	task complete TASK --user U [--roles R1,R2] [--result JSON]
//
// Show a human task with its audit trail, or act on it as user U holding
// the given roles (see docs/tasks.md for who may do what). "task" in the
// tool always means a human task; the work items of activity workers
// appear only as "activity task" items of dead letters. The result of
// complete is JSON (Engine.CompleteTaskJSON): when the task records the
// Go type its workflow reads the result as, keys match its fields as
// encoding/json matches them, a key it lacks or a value of the wrong kind
// fails with "chronicle: invalid argument: ..." and nothing is written,
// and the result is encoded with the codec the workflow decodes with (see
// docs/tasks.md). An action that
// is not allowed fails with "chronicle: forbidden: ...", one on a closed
// task with "chronicle: task closed: ...", both with exit code 1.
//
//	instance terminate ID --reason R --by U [--ticket T]
//	instance suspend ID --reason R --by U [--ticket T]
//	instance resume ID --reason R --by U [--ticket T]
//
// Terminate, suspend or resume an instance as operator U. The event
// recorded in its history carries "user:U", the reason and the optional
// ticket (a ticket or change reference); a ticket longer than 200 bytes or
// holding control characters is refused with "chronicle: invalid
// argument: ..." and nothing is written. On the memory store the tool
// prints the event recorded.
//
//	instance hold ID --reason R --by U [--ticket T]
//	instance release ID --reason R --by U [--ticket T]
//
// Place a legal hold on an instance, running or ended, or release it
// (Engine.Hold, Engine.ReleaseHold): a held instance is not purged (by
// purge, a purge batch or a retention policy) or erased until released.
// The HoldPlaced or HoldReleased event recorded in its history carries
// "user:U", the reason and the optional ticket; instance show prints the
// hold. Releasing an instance that has no hold fails with "chronicle:
// instance is not under a legal hold: ...". On the memory store the tool
// prints the event recorded.
//
//	instance rerun ID --from-seq N [--input JSON] --reason R --by U [--ticket T]
//
// Start a new execution of an instance from seq N of its current execution
// (Engine.Rerun): a TurnStarted runs that turn again, a message recorded
// between turns (a result, a signal) is left out, and an activity's
// schedule or result runs the activity again, with --input (JSON) as its
// new input when given. The current execution ends (as terminated when it
// was running) and records an ExecutionRerun event; the new one starts
// with the lineage and copies of the events before N. A seq that cannot be
// rerun from (a command inside a turn, the start, another execution) is
// refused with "chronicle: invalid argument: ..." and nothing is written.
// On the memory store the tool prints the events the rerun recorded.
//
//	dlq list [--instance ID] [--status dead|redriven|discarded] [--after ID] [--limit N]
//	dlq show ID
//	dlq redrive ID --by U
//	dlq discard ID --by U
//
// List and show dead letters with their original work item, and redrive
// (requeue it) or discard them, recording the operator.
//
//	concurrency list [--waiting] [--after KEY] [--limit N]
//	concurrency show KEY
//
// Show the waiting work of flow control. list prints the concurrency keys
// of instances in key order with their limit, how many instances hold a
// slot, how many wait and which is next; --waiting keeps the keys someone
// waits for; --after and --limit (default 100) page. show prints one key:
// the instances holding its slots and since when, those waiting in the
// order they will get one, and how many activity tasks with that key
// (ActivityOptions.Concurrency) hold a live claim now.
//
//	projections rebuild ID | --all
//	projections check ID | --all
//
// Rebuild an instance's projections from its history, or compare the
// stored ones with a fresh fold of history and print the differences
// (exit code 1 when there are some).
//
//	purge ID... | --older-than AGE, --by U [--archive DIR]
//
// Deletes ended instances — the named ones, or every one unchanged for
// AGE (36h, 30d) — keeping a tombstone with the last seq and hash of each.
// With --archive each history is first written to DIR/<id>.jsonl, and an
// instance whose archive fails is kept. Running instances are skipped. It
// prints the tombstones and the skipped instances with the reason; the
// exit code is 1 when an instance was skipped.
//
//	doctor
//
// Reports what needs an operator (Engine.CheckHealth): instances with an
// incident (an unresolved dead letter, a start dead-lettered before the
// first round included), dead letters waiting, instances whose rounds
// fail and are retried (a projection whose fold fails, say) with the last
// error, and instances whose projections fail to fold or differ from
// their history. The exit code is 1 when it finds any.
//
//	ui [--listen HOST:PORT] [--insecure-listen] [--host NAME]... [--actions [--user U] [--roles R1,R2]]
//
// Serves the operator console (package console) until interrupted, on
// 127.0.0.1:8080 by default: instances, their timelines, hash chains,
// projections as of any seq, human tasks and dead letters. It is
// read-only unless --actions is given; actions (redrive, discard,
// terminate, human-task actions) are then taken and recorded as --user
// (default: the OS user) with --roles. On the memory store it serves the
// demo data and runs the demo engine, its clock going on with the wall
// clock, so that a redrive moves the refund on; on PostgreSQL or MongoDB
// the deployment's workers apply what the console enqueues. The console
// has no login of its own, so --listen must name a loopback address
// unless --insecure-listen is given (put an authenticating proxy in front
// first). It answers only requests for the names it listens as (for a
// loopback address also localhost, 127.0.0.1 and [::1], with the port)
// and those given with --host; any other Host header gets 421, which
// defeats DNS rebinding.
//
// # Exit codes
//
// 0: success. 1: the operation failed or found a problem (an unknown
// instance, a forbidden task action, a broken hash chain). 2: a usage
// error (unknown command, bad flag, missing argument), with a usage line
// on standard error.
package main
