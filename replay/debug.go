package replay

import (
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle/history"
)

// Report is what replaying a stored or exported history against the
// current code found.
type Report struct {
	InstanceID string
	// Workflow names the workflow of the last execution replayed.
	Workflow string
	// Executions counts the executions replayed.
	Executions int
	// Divergence is the first point where code and history part, or nil.
	Divergence *NondeterminismError
	// Err is any other failure that stopped the replay (an unknown
	// workflow, a corrupt event).
	Err error
	// Turns lists, turn by turn, the commands the code produced while
	// replaying the last execution.
	Turns []TurnReport
	// Ended is true when the last execution ended in history; Output or
	// Failure then hold its result.
	Ended   bool
	Output  []byte
	Failure *history.Failure
}

// TurnReport is one replayed turn.
type TurnReport struct {
	// Seq and At are those of the turn's TurnStarted.
	Seq      int64
	At       string
	Commands []string
}

// trim keeps only what the code reproduced before seq.
func (r *Report) trim(seq int64) {
	kept := r.Turns[:0]
	for _, t := range r.Turns {
		if t.Seq >= seq {
			break
		}
		var cmds []string
		for _, c := range t.Commands {
			var n int64
			if _, err := fmt.Sscanf(c, "#%d", &n); err == nil && n >= seq {
				break
			}
			cmds = append(cmds, c)
		}
		t.Commands = cmds
		kept = append(kept, t)
	}
	r.Turns = kept
	r.Ended, r.Output, r.Failure = false, nil, nil
}

// OK reports whether the history replayed without divergence or error.
func (r *Report) OK() bool { return r.Divergence == nil && r.Err == nil }

// Debug replays a whole instance history (every execution) against the
// current code and reports the first divergence, the commands the code
// produced turn by turn, and the result. It runs nothing new and writes
// nothing.
func (r *Replayer) Debug(instanceID string, events []history.Event) *Report {
	rep := &Report{InstanceID: instanceID}
	for _, exec := range Executions(events) {
		rep.Executions++
		rep.Turns, rep.Ended, rep.Output, rep.Failure = nil, false, nil, nil
		if err := r.debugExecution(rep, instanceID, exec); err != nil {
			var nd *NondeterminismError
			if errors.As(err, &nd) {
				rep.Divergence = nd
				rep.trim(nd.Seq)
			} else {
				rep.Err = err
			}
			return rep
		}
	}
	return rep
}

func (r *Replayer) debugExecution(rep *Report, instanceID string, events []history.Event) error {
	if len(events) == 0 || events[0].Kind != history.KindExecutionStarted {
		return fmt.Errorf("chronicle: execution does not open with ExecutionStarted")
	}
	if a, err := events[0].Attributes(); err == nil {
		rep.Workflow = a.(*history.ExecutionStarted).Name
	}
	for i := range events {
		e := &events[i]
		if e.Kind == history.KindTurnStarted {
			rep.Turns = append(rep.Turns, TurnReport{Seq: e.Seq, At: e.At.UTC().Format("2006-01-02 15:04:05")})
			continue
		}
		if isCommand(e.Kind) && len(rep.Turns) > 0 {
			t := &rep.Turns[len(rep.Turns)-1]
			t.Commands = append(t.Commands, fmt.Sprintf("#%d %s", e.Seq, describe(e)))
		}
		a, err := e.Attributes()
		if err != nil {
			continue
		}
		switch a := a.(type) {
		case *history.ExecutionCompleted:
			rep.Ended, rep.Output = true, a.Output
		case *history.ExecutionFailed:
			f := a.Failure
			rep.Ended, rep.Failure = true, &f
		case *history.ExecutionTerminated:
			rep.Ended, rep.Failure = true, &history.Failure{Message: "terminated: " + a.Reason}
		case *history.ContinuedAsNew:
			rep.Ended = true
		}
	}
	// The commands listed above are those history recorded; Check proves
	// the code asks for exactly them.
	return r.Check(instanceID, events)
}
