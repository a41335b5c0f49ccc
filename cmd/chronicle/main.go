package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/internal/demodata"
	"github.com/chronicleflow/chronicle/provider/memory"
	"github.com/chronicleflow/chronicle/query"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the operation failed or found a problem
	exitUsage   = 2 // unknown command, bad flag, missing argument
)

// run runs the command line args (without the program name), writing
// results to stdout and errors to stderr, and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, stdout, stderr, hooks{})
}

// hooks let tests reach inside a run.
type hooks struct {
	// afterSeed, when set, is called with the memory store once the demo
	// data is in it and before the command runs (to tamper with history,
	// say).
	afterSeed func(*memory.Store)
	// demoEngine, when set, is called with the demo engine after
	// afterSeed (to register and run a workflow of the test, say).
	demoEngine func(*chronicle.Engine)
	// uiServing, when set, is called by ui once the console listens, with
	// its address and the engine it shows.
	uiServing func(addr string, e *chronicle.Engine)
	// witnessServing, when set, is called by witness serve once it
	// listens, with its address.
	witnessServing func(addr string)
}

func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, h hooks) int {
	out := &stickyWriter{w: stdout}
	c := &cli{ctx: ctx, stdout: out, stderr: stderr, hooks: h}
	defer c.close()
	code := c.exit(c.main(args))
	if out.err != nil && code == exitOK {
		// The output is incomplete: say so and fail, so that a script
		// piping it does not take it for the whole answer.
		return c.exit(fmt.Errorf("write output: %w", out.err))
	}
	return code
}

// stickyWriter keeps the first error of its writer and drops every write
// after it, so that the many small writes of a command need no check each
// and the run still fails when its output did not get through. Writes to
// stderr are not checked: when stderr fails there is nowhere left to say
// so, and the exit code still tells.
type stickyWriter struct {
	w   io.Writer
	err error
}

// Write implements io.Writer.
func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.err = err
	return n, err
}

// cli is one run of the tool.
type cli struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	hooks  hooks

	// partitions is the partition count of a benchmark's schema.
	partitions int
	// citus distributes a benchmark's schema on a Citus cluster.
	citus bool

	// Global flags.
	storeURL string
	schema   string
	json     bool
	// signKey is the signing key file of checkpoints (--sign-key).
	signKey string
	// keysDir and keks are the data keys of data subjects (--keys) and
	// the KEK files that wrap them (--kek, the first current).
	keysDir string
	keks    []string
	// origin and publishers go to Options.Checkpoints (checkpoint publish).
	origin     string
	publishers []chronicle.Publisher
	// codec is the codec of the deployment's payloads (--codec).
	codec string
	// searchAttrs declares search attributes (--search-attributes).
	searchAttrs string
	// decls are the parsed declarations, set by declarations.
	decls map[string]query.Type

	// roundTrips counts the round trips of the bench's PostgreSQL
	// connections.
	roundTrips *roundTrips

	// Opened on first use by open.
	engine     *chronicle.Engine
	demo       *demodata.Demo
	closeStore func()
}

// usageError is a mistake in the command line: exit code 2 with a usage
// line.
type usageError struct {
	cmd *command // nil for the global usage
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd *command, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// errReported means the command has already said what is wrong on stdout
// (a broken chain, projections that differ): exit code 1 and nothing more.
var errReported = errors.New("problem reported")

// codecs are the codecs --codec names: the deployment's Options.Codec,
// with which the tool decodes payloads to show them. Task results are
// encoded with the codec their task records, whatever --codec says.
var codecs = map[string]chronicle.Codec{"msgpack": chronicle.MsgpackCodec{}, "json": chronicle.JSONCodec{}}

// globalUsage is the usage line of the tool.
const globalUsage = "chronicle [--store URL] [--schema NAME] [--codec msgpack|json] [--search-attributes DECLS] [--sign-key FILE] [--keys DIR --kek FILE...] [--json] COMMAND [ARGS]"

func (c *cli) exit(err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(c.stderr, "chronicle: %s\n", ue.msg)
		if ue.cmd != nil {
			fmt.Fprintf(c.stderr, "usage: chronicle %s\n", strings.TrimSpace(ue.cmd.name+" "+ue.cmd.args))
		} else {
			fmt.Fprintf(c.stderr, "usage: %s (run 'chronicle help' for the commands)\n", globalUsage)
		}
		return exitUsage
	case errors.Is(err, errReported):
		return exitFailure
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "chronicle: ") {
		msg = "chronicle: " + msg
	}
	fmt.Fprintln(c.stderr, msg)
	return exitFailure
}

func (c *cli) main(args []string) error {
	fs := flag.NewFlagSet("chronicle", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.storeURL, "store", "memory", "")
	fs.StringVar(&c.schema, "schema", "", "")
	fs.BoolVar(&c.json, "json", false, "")
	fs.StringVar(&c.signKey, "sign-key", "", "")
	fs.StringVar(&c.codec, "codec", "msgpack", "")
	fs.StringVar(&c.searchAttrs, "search-attributes", "", "")
	fs.StringVar(&c.keysDir, "keys", "", "")
	fs.Var((*listFlag)(&c.keks), "kek", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c.help(nil)
		}
		return usagef(nil, "%s", flagError(err))
	}
	if err := checkStoreURL(c.storeURL); err != nil {
		return usagef(nil, "%v", err)
	}
	if _, ok := codecs[c.codec]; !ok {
		return usagef(nil, "unsupported --codec %q: use msgpack (the default) or json", c.codec)
	}
	if c.codec != "msgpack" && c.storeURL == "memory" {
		return usagef(nil, "--codec %s: the memory store's demo data is encoded with msgpack", c.codec)
	}
	args = fs.Args()
	if len(args) == 0 {
		return usagef(nil, "no command given")
	}
	cmd, rest := lookup(args)
	if cmd == nil {
		if sub := group(args[0]); len(sub) > 0 {
			if len(args) == 1 {
				return usagef(nil, "%s needs a subcommand: %s", args[0], strings.Join(sub, ", "))
			}
			return usagef(nil, "unknown command %q; %s has: %s", args[0]+" "+args[1], args[0], strings.Join(sub, ", "))
		}
		return usagef(nil, "unknown command %q", args[0])
	}
	return cmd.run(c, cmd, rest)
}

// command is one command of the tool.
type command struct {
	name    string // "instances list"
	args    string // its arguments, for usage lines
	summary string
	run     func(c *cli, cmd *command, args []string) error
}

// commands lists every command in the order help shows them.
func commands() []*command {
	return []*command{
		{"demo", "", "describe the demo data of the memory store", runDemo},
		{"migrate", "[--partitions P] [--citus]", "create or upgrade the PostgreSQL schema", runMigrate},
		{"instances list", "[--where QUERY] [--columns A,B] [--status S] [--workflow W] [--key K] [--from TIME] [--to TIME] [--after ID] [--limit N]", "list instances", runInstancesList},
		{"instances count", "[--by FIELD] [--where QUERY]", "count instances, grouped by a field", runInstancesCount},
		{"instance show", "ID", "show an instance: fields, result, open human tasks, dead letters", runInstanceShow},
		{"instance terminate", "ID --reason R --by U [--ticket T]", "end a running instance, recording the operator, reason and ticket", runInstanceTerminate},
		{"instance suspend", "ID --reason R --by U [--ticket T]", "pause a running instance's code, recording the operator, reason and ticket", runInstanceSuspend},
		{"instance resume", "ID --reason R --by U [--ticket T]", "continue a suspended instance, recording the operator, reason and ticket", runInstanceResume},
		{"instance hold", "ID --reason R --by U [--ticket T]", "place a legal hold on an instance, running or ended: it is not purged or erased until released", runInstanceHold},
		{"instance release", "ID --reason R --by U [--ticket T]", "release an instance's legal hold", runInstanceRelease},
		{"instance rerun", "ID --from-seq N [--input JSON] --reason R --by U [--ticket T]", "start a new execution from a seq of the current one (a turn, a message, an activity with an optional new input), recording the operator, reason and ticket in both", runInstanceRerun},
		{"history show", "ID", "print an instance's history as a timeline", runHistoryShow},
		{"history export", "ID [--out FILE]", "export an instance's history as JSON Lines", runHistoryExport},
		{"history verify", "ID | --all | --archive FILE [--key KEYRING]...", "verify hash chains of stored or exported histories, and with --key their signed checkpoints", runHistoryVerify},
		{"replay", "PATH... | --all", "replay exported histories (files, folders) or every instance of the store against the workflows this binary registers (the demo's); name each divergence", runReplay},
		{"checkpoint write", "", "sign a checkpoint of every head no checkpoint covers yet (needs --sign-key)", runCheckpointWrite},
		{"checkpoint list", "[--after N] [--limit N]", "list signed checkpoints", runCheckpointList},
		{"audit bundle", "ID... | --all, --out FILE [--published NOTE]", "write an audit bundle (histories, their signed checkpoint proofs, signed tombstones of purged ones, projections folded from history) that verifies offline", runAuditBundle},
		{"audit verify", "FILE --key KEYRING... [--witness NAME=KEYRING]...", "verify an audit bundle offline with the public keys alone and print what it proves", runAuditVerify},
		{"checkpoint publish", "--dir DIR [--witness URL]... [--origin O]", "publish the newest checkpoint as a signed tlog-checkpoint note to an append-only directory, and have witnesses cosign it (needs --sign-key)", runCheckpointPublish},
		{"checkpoint verify", "--published DIR --key KEYRING [--origin O]", "check the store's checkpoints against published notes: truncation, fork", runCheckpointVerify},
		{"witness serve", "--name NAME --key FILE --dir DIR --log ORIGIN=KEYRING... [--listen HOST:PORT]", "serve a witness that cosigns checkpoint notes only when they extend the last it cosigned (C2SP tlog-witness)", runWitnessServe},
		{"keygen", "--id KEYID --out FILE [--origin O]", "make an Ed25519 signing key for checkpoints and its keyring line (and with --origin its note verifier key)", runKeygen},
		{"tasks list", "[--role R]... [--assignee U] [--status S] [--instance ID] [--unassigned] [--after ID] [--limit N]", "list human tasks", runTasksList},
		{"task show", "TASK", "show a human task and its audit trail", runTaskShow},
		{"task claim", "TASK --user U --roles R1,R2", "take an unassigned human task", runTaskClaim},
		{"task assign", "TASK --to U2 --user U --roles R1,R2", "give an unassigned human task to a user", runTaskAssign},
		{"task reassign", "TASK --to U2 --user U [--roles R1,R2]", "move an assigned human task to another user", runTaskReassign},
		{"task release", "TASK --user U", "give a human task back to its roles", runTaskRelease},
		{"task complete", "TASK --user U [--roles R1,R2] [--result JSON]", "complete a human task with a result", runTaskComplete},
		{"dlq list", "[--instance ID] [--status S] [--after ID] [--limit N]", "list dead letters", runDLQList},
		{"dlq show", "ID", "show a dead letter and its original work item", runDLQShow},
		{"dlq redrive", "ID --by U", "requeue a dead letter's work item", runDLQRedrive},
		{"dlq discard", "ID --by U", "close a dead letter without processing it", runDLQDiscard},
		{"concurrency list", "[--waiting] [--after KEY] [--limit N]", "list concurrency keys: limit, instances holding a slot, instances waiting", runConcurrencyList},
		{"concurrency show", "KEY", "show a concurrency key: the instances holding its slots, those waiting in order, its running activities", runConcurrencyShow},
		{"schedules list", "", "list schedules: spec, workflow, overlap policy, state, next firing", runSchedulesList},
		{"schedule show", "ID", "show a schedule: spec, state, next and recent firings, changes with who made them", runScheduleShow},
		{"schedule create", "ID --workflow W (--cron EXPR | --every D) --by U [--zone TZ] [--start TIME] [--end TIME] [--jitter D] [--overlap P] [--catchup D] [--input JSON] [--paused] [--note N]", "create a schedule", runScheduleCreate},
		{"schedule pause", "ID --by U [--note N]", "pause a schedule, with a note saying why", runSchedulePause},
		{"schedule resume", "ID --by U [--note N]", "resume a paused schedule", runScheduleResume},
		{"schedule trigger", "ID --by U", "fire a schedule now", runScheduleTrigger},
		{"schedule backfill", "ID --from TIME --to TIME --by U", "start the firings of a past range that never started", runScheduleBackfill},
		{"schedule delete", "ID --by U [--note N]", "delete a schedule; instances it started keep running", runScheduleDelete},
		{"batch start", "--action A --reason R --by U [--where QUERY] [--workflow W] [--ticket T] [--signal NAME [--payload JSON]] [--rate N] [--id ID]", "act on every instance a query selects (terminate, cancel, suspend, resume, redrive, discard, purge, signal, hold, release) as a durable batch job", runBatchStart},
		{"batch list", "", "list batch jobs: action, state, progress, operator, reason", runBatchesList},
		{"batch show", "ID", "show a batch job: its selection, progress, failures, changes with who made them", runBatchShow},
		{"batch pause", "ID --by U [--note N]", "pause a batch job after its current page", runBatchPause},
		{"batch resume", "ID --by U [--note N]", "resume a paused batch job where it stopped", runBatchResume},
		{"batch cancel", "ID --by U [--note N]", "stop a batch job; what it did stays done", runBatchCancel},
		{"projections rebuild", "ID | --all", "rebuild an instance's projections from its history", runProjectionsRebuild},
		{"projections check", "ID | --all", "compare stored projections with a fold of history", runProjectionsCheck},
		{"purge", "ID... | --older-than AGE, --by U [--archive DIR]", "delete ended instances, keeping tombstones", runPurge},
		{"subject erase", "SUBJECT --reason R --by U [--ticket T] (needs --keys, --kek)", "erase a data subject: record it, terminate its running instances, destroy its key; its payloads read as erased everywhere", runSubjectErase},
		{"keys kek", "--id KEKID --out FILE", "make a key-encryption key (KEK) for the data keys of --keys DIR", runKeysKEK},
		{"keys rotate", "(needs --keys DIR --kek NEW [--kek OLD]...)", "re-wrap every data key under the first --kek, so older KEKs can be destroyed", runKeysRotate},
		{"doctor", "[--key FILE [--published DIR]]", "report incidents, dead letters waiting, failing rounds, projections that fail to fold and, with --key, history the signed checkpoints (and the published ones) contradict", runDoctor},
		{"bench", "[--workload W1,W2,W3] [--instances N] [--orchestration-workers N] [--activity-workers N] [--checkpoints D] [--preload N] [--partitions P] [--citus] [--keep]", "run the benchmark workloads and print their numbers", runBench},
		{"ui", "[--listen HOST:PORT] [--insecure-listen] [--host NAME]... [--actions [--user U] [--roles R1,R2]] [--key FILE]", "serve the operator console in a browser", runUI},
		{"help", "[COMMAND]", "show this help, or a command's", runHelp},
	}
}

// aliases map the other number of a group name to the one commands use,
// so that "instance list" and "tasks show" work too.
var aliases = map[string]string{"instance": "instances", "instances": "instance", "task": "tasks", "tasks": "task",
	"schedule": "schedules", "schedules": "schedule", "batch": "batches", "batches": "batch"}

// lookup finds the command args start with and returns it with the rest
// of args.
func lookup(args []string) (*command, []string) {
	cmds := commands()
	find := func(name string) *command {
		for _, cmd := range cmds {
			if cmd.name == name {
				return cmd
			}
		}
		return nil
	}
	if len(args) >= 2 {
		if cmd := find(args[0] + " " + args[1]); cmd != nil {
			return cmd, args[2:]
		}
		if alt, ok := aliases[args[0]]; ok {
			if cmd := find(alt + " " + args[1]); cmd != nil {
				return cmd, args[2:]
			}
		}
	}
	if cmd := find(args[0]); cmd != nil {
		return cmd, args[1:]
	}
	return nil, nil
}

// group returns the subcommands of a command group ("history" → show,
// export, verify), none when name is not a group.
func group(name string) []string {
	var subs []string
	for _, cmd := range commands() {
		g, sub, ok := strings.Cut(cmd.name, " ")
		if ok && (g == name || g == aliases[name]) && !slices.Contains(subs, sub) {
			subs = append(subs, sub)
		}
	}
	return subs
}

// flags returns the flag set of a command; every command accepts --json.
func (c *cli) flags(cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&c.json, "json", c.json, "print JSON for machines")
	return fs
}

// parse parses a command's flags, which may come before, between or after
// its positional arguments, and returns the positional arguments; "--"
// ends the flags. There must be at least minArgs of them and at most
// maxArgs (any number when maxArgs < 0).
func (c *cli) parse(cmd *command, fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, c.commandHelp(cmd, fs)
			}
			return nil, usagef(cmd, "%s", flagError(err))
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) < minArgs && minArgs == 1:
		return nil, usagef(cmd, "missing %s", argName(cmd))
	case len(pos) < minArgs:
		return nil, usagef(cmd, "missing arguments")
	case maxArgs >= 0 && len(pos) > maxArgs:
		return nil, usagef(cmd, "unexpected argument %q", pos[maxArgs])
	}
	return pos, nil
}

// flagError rewrites an error of the flag package to name flags the way
// the usage lines do: "--limit", not "-limit".
func flagError(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"for flag -", "not defined: -", "needs an argument: -"} {
		msg = strings.Replace(msg, prefix, prefix+"-", 1)
	}
	return msg
}

// argName is what a command's first positional argument is called in its
// usage: "ID", "TASK".
func argName(cmd *command) string {
	name, _, _ := strings.Cut(cmd.args, " ")
	return strings.Trim(name, ".[]")
}

// errHelpShown ends a run that printed help: exit code 0.
var errHelpShown = errors.New("help shown")

func (c *cli) commandHelp(cmd *command, fs *flag.FlagSet) error {
	fmt.Fprintf(c.stdout, "usage: chronicle %s\n\n%s.\n\nflags:\n", strings.TrimSpace(cmd.name+" "+cmd.args), upperFirst(cmd.summary))
	fs.SetOutput(c.stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return errHelpShown
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// open opens the store on first use. The memory store is seeded with the
// demo data first.
func (c *cli) open() (*chronicle.Engine, error) {
	if c.engine != nil {
		return c.engine, nil
	}
	store, closeStore, err := openStore(c.ctx, c.storeURL, c.schema)
	if err != nil {
		return nil, err
	}
	c.closeStore = closeStore
	decls, err := c.declarations()
	if err != nil {
		return nil, err
	}
	var checkpoints *chronicle.CheckpointOptions
	if c.signKey != "" {
		s, err := chronicle.ReadSigningKey(c.signKey)
		if err != nil {
			return nil, err
		}
		checkpoints = &chronicle.CheckpointOptions{Signer: s, Origin: c.origin, Publishers: c.publishers}
	}
	if mem, ok := store.(*memory.Store); ok {
		d, err := demodata.SeedWith(c.ctx, mem, demodata.SeedOptions{SearchAttributes: decls, Checkpoints: checkpoints})
		if err != nil {
			return nil, err
		}
		c.demo, c.engine = d, d.Engine
		if c.hooks.afterSeed != nil {
			c.hooks.afterSeed(mem)
		}
		if c.hooks.demoEngine != nil {
			c.hooks.demoEngine(c.engine)
		}
		return c.engine, nil
	}
	opts := chronicle.Options{NodeID: "chronicle-cli", Codec: codecs[c.codec], SearchAttributes: decls, Checkpoints: checkpoints}
	if opts.Keys, err = c.keyProvider(); err != nil {
		return nil, err
	}
	c.engine, err = chronicle.New(store, opts)
	return c.engine, err
}

func (c *cli) close() {
	if c.engine != nil {
		c.engine.Close()
	}
	if c.closeStore != nil {
		c.closeStore()
	}
}

// now is the engine's time: the demo clock on the memory store.
func (c *cli) now() time.Time {
	if c.demo != nil {
		return c.demo.Clock.Now()
	}
	return time.Now()
}

// settle lets a mutation take effect before the command reports it: on the
// memory store it drives the engine until no work is left (no worker runs
// there otherwise); on a shared store the deployment's workers apply it,
// and settle reports false.
func (c *cli) settle() (bool, error) {
	if c.demo == nil {
		return false, nil
	}
	return true, c.demo.Drain(c.ctx)
}
