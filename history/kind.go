package history

// Kind names what an event records. Its value is stored, so constants are
// never renamed.
type Kind string

// Execution kinds.
const (
	KindExecutionStarted    Kind = "ExecutionStarted"
	KindExecutionCompleted  Kind = "ExecutionCompleted"
	KindExecutionFailed     Kind = "ExecutionFailed"
	KindExecutionTerminated Kind = "ExecutionTerminated"
	KindExecutionSuspended  Kind = "ExecutionSuspended"
	KindExecutionResumed    Kind = "ExecutionResumed"
	KindContinuedAsNew      Kind = "ContinuedAsNew"
	// KindExecutionRerun records, in the execution a rerun started from,
	// who started a new execution from which of its seqs (see
	// [ExecutionRerun]). It follows the end of its execution.
	KindExecutionRerun Kind = "ExecutionRerun"
	// KindHoldPlaced and KindHoldReleased record a legal hold placed on
	// the instance and its release (see [HoldPlaced]); they may follow the
	// end of an execution.
	KindHoldPlaced   Kind = "HoldPlaced"
	KindHoldReleased Kind = "HoldReleased"
)

// Turn kind: its At is the workflow's deterministic now.
const KindTurnStarted Kind = "TurnStarted"

// Activity kinds.
const (
	KindActivityScheduled Kind = "ActivityScheduled"
	KindActivityCompleted Kind = "ActivityCompleted"
	KindActivityFailed    Kind = "ActivityFailed"
)

// Timer kinds.
const (
	KindTimerCreated   Kind = "TimerCreated"
	KindTimerFired     Kind = "TimerFired"
	KindTimerCancelled Kind = "TimerCancelled"
)

// Signal kinds: EventRaised records a signal received; the others a
// signal a workflow sent to another instance and its outcome.
const (
	KindEventRaised     Kind = "EventRaised"
	KindSignalSent      Kind = "SignalSent"
	KindSignalDelivered Kind = "SignalDelivered"
	KindSignalFailed    Kind = "SignalFailed"
)

// Sub-workflow kinds.
const (
	KindSubWorkflowScheduled Kind = "SubWorkflowScheduled"
	KindSubWorkflowCompleted Kind = "SubWorkflowCompleted"
	KindSubWorkflowFailed    Kind = "SubWorkflowFailed"
)

// Human task kinds.
const (
	KindTaskCreated    Kind = "TaskCreated"
	KindTaskAssigned   Kind = "TaskAssigned"
	KindTaskReleased   Kind = "TaskReleased"
	KindTaskReassigned Kind = "TaskReassigned"
	KindTaskCompleted  Kind = "TaskCompleted"
	KindTaskCancelled  Kind = "TaskCancelled"
	// KindTaskEscalated records a step of a task's escalation policy
	// acting at its time: written by workflow code, actor
	// [ActorEscalation].
	KindTaskEscalated Kind = "TaskEscalated"
)

// State kinds.
const (
	KindMarkerRecorded        Kind = "MarkerRecorded"
	KindCustomStatusSet       Kind = "CustomStatusSet"
	KindCompensationStarted   Kind = "CompensationStarted"
	KindCompensationCompleted Kind = "CompensationCompleted"
	// KindSearchAttributesUpserted records search attributes workflow code
	// set or unset (see [SearchAttributesUpserted]).
	KindSearchAttributesUpserted Kind = "SearchAttributesUpserted"
)

// Idempotency classes returned by [Kind.Class].
const (
	ClassStart       = "start"
	ClassEnd         = "end"
	ClassControl     = "control"
	ClassActivity    = "activity"
	ClassTimer       = "timer"
	ClassEvent       = "event"
	ClassSubWorkflow = "subworkflow"
	ClassTask        = "task"
	ClassSignal      = "signal"
)

var kindInfo = map[Kind]struct {
	class string
	new   func() Attributes
}{
	KindExecutionStarted:         {ClassStart, func() Attributes { return &ExecutionStarted{} }},
	KindExecutionCompleted:       {ClassEnd, func() Attributes { return &ExecutionCompleted{} }},
	KindExecutionFailed:          {ClassEnd, func() Attributes { return &ExecutionFailed{} }},
	KindExecutionTerminated:      {ClassEnd, func() Attributes { return &ExecutionTerminated{} }},
	KindContinuedAsNew:           {ClassEnd, func() Attributes { return &ContinuedAsNew{} }},
	KindExecutionSuspended:       {ClassControl, func() Attributes { return &ExecutionSuspended{} }},
	KindExecutionResumed:         {ClassControl, func() Attributes { return &ExecutionResumed{} }},
	KindExecutionRerun:           {ClassControl, func() Attributes { return &ExecutionRerun{} }},
	KindHoldPlaced:               {ClassControl, func() Attributes { return &HoldPlaced{} }},
	KindHoldReleased:             {ClassControl, func() Attributes { return &HoldReleased{} }},
	KindTurnStarted:              {"", func() Attributes { return &TurnStarted{} }},
	KindActivityScheduled:        {"", func() Attributes { return &ActivityScheduled{} }},
	KindActivityCompleted:        {ClassActivity, func() Attributes { return &ActivityCompleted{} }},
	KindActivityFailed:           {ClassActivity, func() Attributes { return &ActivityFailed{} }},
	KindTimerCreated:             {"", func() Attributes { return &TimerCreated{} }},
	KindTimerFired:               {ClassTimer, func() Attributes { return &TimerFired{} }},
	KindTimerCancelled:           {ClassTimer, func() Attributes { return &TimerCancelled{} }},
	KindEventRaised:              {ClassEvent, func() Attributes { return &EventRaised{} }},
	KindSignalSent:               {"", func() Attributes { return &SignalSent{} }},
	KindSignalDelivered:          {ClassSignal, func() Attributes { return &SignalDelivered{} }},
	KindSignalFailed:             {ClassSignal, func() Attributes { return &SignalFailed{} }},
	KindSubWorkflowScheduled:     {"", func() Attributes { return &SubWorkflowScheduled{} }},
	KindSubWorkflowCompleted:     {ClassSubWorkflow, func() Attributes { return &SubWorkflowCompleted{} }},
	KindSubWorkflowFailed:        {ClassSubWorkflow, func() Attributes { return &SubWorkflowFailed{} }},
	KindTaskCreated:              {"", func() Attributes { return &TaskCreated{} }},
	KindTaskAssigned:             {ClassTask, func() Attributes { return &TaskAssigned{} }},
	KindTaskReleased:             {ClassTask, func() Attributes { return &TaskReleased{} }},
	KindTaskReassigned:           {ClassTask, func() Attributes { return &TaskReassigned{} }},
	KindTaskCompleted:            {ClassTask, func() Attributes { return &TaskCompleted{} }},
	KindTaskCancelled:            {ClassTask, func() Attributes { return &TaskCancelled{} }},
	KindMarkerRecorded:           {"", func() Attributes { return &MarkerRecorded{} }},
	KindCustomStatusSet:          {"", func() Attributes { return &CustomStatusSet{} }},
	KindCompensationStarted:      {"", func() Attributes { return &CompensationStarted{} }},
	KindCompensationCompleted:    {"", func() Attributes { return &CompensationCompleted{} }},
	KindSearchAttributesUpserted: {"", func() Attributes { return &SearchAttributesUpserted{} }},
	KindTaskEscalated:            {"", func() Attributes { return &TaskEscalated{} }},
}

// Kinds returns every kind, in a stable order.
func Kinds() []Kind {
	return []Kind{
		KindExecutionStarted, KindExecutionCompleted, KindExecutionFailed, KindExecutionTerminated,
		KindExecutionSuspended, KindExecutionResumed, KindContinuedAsNew,
		KindTurnStarted,
		KindActivityScheduled, KindActivityCompleted, KindActivityFailed,
		KindTimerCreated, KindTimerFired, KindTimerCancelled,
		KindEventRaised,
		KindSubWorkflowScheduled, KindSubWorkflowCompleted, KindSubWorkflowFailed,
		KindTaskCreated, KindTaskAssigned, KindTaskReleased, KindTaskReassigned, KindTaskCompleted, KindTaskCancelled,
		KindMarkerRecorded, KindCustomStatusSet, KindCompensationStarted, KindCompensationCompleted,
		// Kinds added later go last, so that the order stays stable.
		KindSignalSent, KindSignalDelivered, KindSignalFailed,
		KindSearchAttributesUpserted,
		KindTaskEscalated,
		KindExecutionRerun,
		KindHoldPlaced, KindHoldReleased,
	}
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { _, ok := kindInfo[k]; return ok }

// Class returns the idempotency class of completion-like kinds and "" for
// kinds without an idempotency key. Two kinds of one class exclude each
// other: an activity completes or fails, a timer fires or is cancelled.
func (k Kind) Class() string { return kindInfo[k].class }

// Terminal reports whether k ends an execution.
func (k Kind) Terminal() bool { return k.Class() == ClassEnd }

// String returns the kind's name.
func (k Kind) String() string { return string(k) }
