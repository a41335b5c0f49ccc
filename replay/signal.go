package replay

import (
	"fmt"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/round"
)

// SignalWorkflow sends the signal name with payload to the instance
// instanceID, which receives it with WaitEvent like a signal a client
// raises with Engine.RaiseEvent. The round records a SignalSent and queues
// the signal with its own writes (in its transaction, or in the ordered
// steps of a peek-lock round), so no crash loses it; the receiver records
// it as an EventRaised whose actor is "workflow:<this instance id>", under
// an idempotency key derived from this instance, execution and seq, so a
// replayed or redone sender never delivers it twice.
//
// The future resolves once the receiver recorded the signal (a
// SignalDelivered in this history), or fails with a *SignalError matching
// [ErrSignalNotDelivered] (a SignalFailed) when no instance has that id or
// its execution has ended, as Temporal's SignalExternalWorkflow does.
// Waiting for it is optional: a workflow that does not care returns
// without waiting, and the signal is still sent.
func (c *Context) SignalWorkflow(instanceID, name string, payload any) Future {
	if err := history.ValidateID("signal instance id", instanceID); err != nil {
		return c.x.failedFuture(fmt.Errorf("chronicle: signal workflow: %w", err))
	}
	if err := history.ValidateID("event name", name); err != nil {
		return c.x.failedFuture(fmt.Errorf("chronicle: signal workflow %s: %w", instanceID, err))
	}
	data, err := c.encode(payload)
	if err != nil {
		return c.x.failedFuture(fmt.Errorf("chronicle: signal %s to %s payload: %w", name, instanceID, err))
	}
	seq := c.x.nextSeq
	e := c.x.command(&history.SignalSent{
		InstanceID: instanceID, Name: name, Payload: data,
		IdempotencyKey: round.SignalKey(c.x.instanceID, c.x.executionID, seq),
	}, "")
	f := c.x.newFuture(e.Seq, name)
	f.child = instanceID
	return f
}
