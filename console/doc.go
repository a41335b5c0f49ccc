// Package console is Chronicle's operator console: an [http.Handler] that
// shows what a store holds to the people who run its workflows, and lets
// them act on it.
//
//	h, err := console.New(engine, console.Options{
//		BasePath: "/ops/chronicle",
//		Actions:  true,
//		User: func(r *http.Request) (chronicle.User, error) {
//			u := auth.UserFrom(r.Context()) // the product's own authentication
//			return chronicle.User{ID: u.Login, Roles: u.Roles}, nil
//		},
//	})
//	mux.Handle("/ops/chronicle/", requireLogin(h))
//
// The command-line tool serves it too: chronicle ui.
//
// # Pages
//
//   - Instances, filtered by status, workflow, business key and creation
//     time, a page at a time.
//   - An instance: its fields, result or failure; its timeline drawn as a
//     picture (each execution, activity, timer, sub-workflow and human
//     task as a bar over time, retries and failures marked, signals as
//     moments); its hash-chain status (verified, or broken at seq N); its
//     projections as of any seq of its history (time travel) and whether
//     the stored ones agree with a fold of it; its human tasks with their
//     audit trails; its incident and dead letters; its events with their
//     payloads; while its start waits for a concurrency slot, why: its
//     key, limit, place in line and the instances holding the slots.
//   - Waiting: the concurrency keys instances wait for, each with its
//     holders and its waiters in order, a page at a time; a key with the
//     activity tasks using it that run now.
//   - Dead letters across instances, with redrive and discard.
//   - Human tasks by role, assignee, status and instance; a task with its
//     payload, result and audit trail, and the task actions.
//   - Schedules; a schedule with its next times, firings and changes, and
//     pause (with a note), resume and trigger now.
//   - Batches with their progress; a batch with its failures and changes,
//     and pause, resume and cancel (each with a note).
//
// Every page is rendered on the server with html/template, which escapes
// whatever a payload or an id holds; payloads are decoded with the
// engine's codec and shown as indented JSON. The stylesheet is embedded
// in the binary; the pages use no JavaScript, and the timeline is an
// inline SVG drawn on the server.
//
// # Actions
//
// The console is read-only unless [Options].Actions is set: its action
// buttons are then disabled and every POST is answered 403 Forbidden.
// With actions enabled an operator may redrive and discard dead letters,
// terminate running instances, claim, assign, reassign, release and
// complete human tasks, pause, resume and trigger schedules, and pause,
// resume and cancel batches. Each action is taken as the user
// [Options].User returns for the request (the product's authenticated
// user), and Chronicle records that user with it: in history as
// "user:<id>" (terminations, task actions, schedule and batch changes) or on the dead letter (who
// resolved it). A human-task action is allowed or refused by the user's
// roles, exactly as [chronicle.Engine.ClaimTask] and its siblings decide.
// The console never decides who may act: put it behind the product's
// authentication and authorization.
//
// Actions are POST requests only, and each is checked against cross-site
// request forgery twice: the form must carry the token of the console's
// cookie (random per browser session, HttpOnly, SameSite=Strict, compared
// in constant time), and the browser's Sec-Fetch-Site or Origin header
// must not name another site ([http.CrossOriginProtection]). A human
// task's result is typed as JSON and completed with
// [chronicle.Engine.CompleteTaskJSON], which refuses a result that does
// not fit the type the workflow reads it as.
//
// # Host names
//
// A console that a browser reaches directly, not through a proxy that
// checks the name, should set [Options].AllowedHosts: a request for any
// other Host is answered 421 Misdirected Request before any page, file or
// action. Otherwise a web page whose name its DNS server re-points at the
// console's address (DNS rebinding) is same-origin with it: it could read
// every page, with the CSRF token, and act. chronicle ui sets it to the
// names it listens as.
//
// # Headers
//
// Every response forbids framing and content sniffing, and its
// Content-Security-Policy allows only the console's own stylesheet: no
// script, no inline style, no other origin.
package console
