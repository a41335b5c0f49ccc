package replay

import (
	"github.com/chronicleflow/chronicle/history"
)

// Check replays one execution's history against the registered code
// without running anything new: every recorded turn must be asked for
// again, command by command. It returns nil, or the first divergence as a
// *NondeterminismError (or the error that stopped the replay). events must
// start with the execution's ExecutionStarted.
func (r *Replayer) Check(instanceID string, events []history.Event) error {
	x, err := r.replay(instanceID, events)
	if err != nil {
		return err
	}
	x.Close()
	return nil
}

// Executions splits a whole instance history into its executions, in
// order; each part starts with its ExecutionStarted.
func Executions(events []history.Event) [][]history.Event {
	var out [][]history.Event
	for i := range events {
		if events[i].Kind == history.KindExecutionStarted || len(out) == 0 {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], events[i])
	}
	return out
}
