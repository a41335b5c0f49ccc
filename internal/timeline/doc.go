// Package timeline renders an instance's history for people: one row per
// event with its sequence number, time (UTC), kind, actor and a short
// detail decoded from the event's typed attributes.
//
//	SEQ  TIME (UTC)           KIND               ACTOR        DETAIL
//	1    2026-11-22 09:00:00  ExecutionStarted   user:ines    loan-approval v1, key APP-1001
//	2    2026-11-22 09:00:00  TurnStarted        worker:demo
//	3    2026-11-22 09:00:00  ActivityScheduled  worker:demo  credit-check, up to 3 attempts, input "APP-1001"
//	4    2026-11-22 09:00:00  ActivityCompleted  worker:demo  → #3 attempt 2: 742
//
// Completions point back at what scheduled them ("→ #3"), so a reader can
// follow an activity, timer or sub-workflow from its start to its outcome.
//
// [Bars] gives the same history as bars over time, for a picture: each
// execution, activity call, timer, sub-workflow and human task from the
// event that began it to the event that ended it, with its outcome, its
// attempts and the moments in between (a task claimed, an execution
// suspended); signals are moments. The operator console draws them.
//
// # Payloads
//
// User payloads (inputs, results, signal payloads, custom status) are
// encoded by the engine's codec. [Options].Decode renders them; the default,
// [DecodeMsgpack], suits the default msgpack codec and [DecodeJSON] the JSON
// one. Rendered payloads are shortened to about 60 characters.
//
// Rendering never fails and never panics on what it reads: an undecodable
// payload or attribute shows as a short description of its bytes, so a
// timeline of a damaged history is still readable.
//
// The package is internal: it serves Chronicle's examples, command-line
// tool and console, and its output format may change.
package timeline
