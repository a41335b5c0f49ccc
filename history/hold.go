package history

// HoldPlaced records that an operator placed a legal hold on the instance:
// while it holds, the instance is neither purged nor erased. It may follow
// the end of its execution (an ended instance is held like a running one)
// and changes nothing of the execution's state; the store keeps the hold
// itself (see docs/audit.md, "Legal hold and retention").
type HoldPlaced struct {
	// HoldID names the hold; its HoldReleased carries the same id.
	HoldID string `msgpack:"hold_id" json:"hold_id"`
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	// Ticket is the optional ticket or change reference the actor gave.
	Ticket string `msgpack:"ticket,omitempty" json:"ticket,omitempty"`
}

// HoldReleased records that an operator released the legal hold HoldID.
type HoldReleased struct {
	HoldID string `msgpack:"hold_id" json:"hold_id"`
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	// Ticket is the optional ticket or change reference the actor gave.
	Ticket string `msgpack:"ticket,omitempty" json:"ticket,omitempty"`
}

// EventKind implements [Attributes].
func (*HoldPlaced) EventKind() Kind { return KindHoldPlaced }

// EventKind implements [Attributes].
func (*HoldReleased) EventKind() Kind { return KindHoldReleased }

// IsRecord reports whether events of kind k are records an operator adds
// to an instance's history that workflow code never sees and that may
// follow the end of an execution: legal holds and their releases.
func (k Kind) IsRecord() bool { return k == KindHoldPlaced || k == KindHoldReleased }
