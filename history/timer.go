package history

import "time"

// TimerCreated records a durable timer; its event's Seq is the timer id.
type TimerCreated struct {
	FireAt time.Time `msgpack:"fire_at" json:"fire_at"`
	// Name is an optional label shown in timelines ("deadline").
	Name string `msgpack:"name,omitempty" json:"name,omitempty"`
}

// TimerFired records that a timer fired.
type TimerFired struct {
	FireAt time.Time `msgpack:"fire_at" json:"fire_at"`
}

// TimerCancelled records that workflow code cancelled a pending timer; a
// fire message arriving later is stale.
type TimerCancelled struct{}

// EventKind implements [Attributes].
func (*TimerCreated) EventKind() Kind { return KindTimerCreated }

// EventKind implements [Attributes].
func (*TimerFired) EventKind() Kind { return KindTimerFired }

// EventKind implements [Attributes].
func (*TimerCancelled) EventKind() Kind { return KindTimerCancelled }

func (a *TimerCreated) normalizeUTC() { a.FireAt = utc(a.FireAt) }
func (a *TimerFired) normalizeUTC()   { a.FireAt = utc(a.FireAt) }
