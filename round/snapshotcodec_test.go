package round

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// marshalSnapshotReflective is how MarshalSnapshot encoded before its
// encoder was written by hand: the reference it must match.
func marshalSnapshotReflective(s *Snapshot) ([]byte, error) {
	w := snapshotWire{Snapshot: s}
	for _, seq := range slices.Sorted(maps.Keys(s.Activities)) {
		w.Activities = append(w.Activities, pendingName{seq, s.Activities[seq]})
	}
	for _, seq := range slices.Sorted(maps.Keys(s.Timers)) {
		w.Timers = append(w.Timers, pendingTime{seq, s.Timers[seq]})
	}
	for _, seq := range slices.Sorted(maps.Keys(s.SubWorkflows)) {
		w.SubWorkflows = append(w.SubWorkflows, pendingName{seq, s.SubWorkflows[seq]})
	}
	for _, seq := range slices.Sorted(maps.Keys(s.Signals)) {
		w.Signals = append(w.Signals, pendingName{seq, s.Signals[seq]})
	}
	for _, id := range slices.Sorted(maps.Keys(s.Tasks)) {
		w.Tasks = append(w.Tasks, openTaskWire{id, *s.Tasks[id]})
	}
	return history.Encode(&w)
}

func genString(t *rapid.T, label string) string {
	s := rapid.StringN(0, 4, -1).Draw(t, label)
	if n := rapid.SampledFrom([]int{0, 31, 32, 256, 300}).Draw(t, label+" pad"); n > 0 && rapid.Bool().Draw(t, label+" long") {
		for len(s) < n {
			s += "ab"
		}
	}
	return s
}

func genTime(t *rapid.T, label string) time.Time {
	switch rapid.IntRange(0, 3).Draw(t, label+" form") {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(rapid.Int64Range(0, 1<<32-1).Draw(t, label), 0).UTC()
	case 2:
		return time.Unix(rapid.Int64Range(0, 1<<34-1).Draw(t, label), rapid.Int64Range(0, 999999999).Draw(t, label+" ns")).UTC()
	}
	return time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, label), rapid.Int64Range(0, 999999999).Draw(t, label+" ns")).UTC()
}

func genInt64(t *rapid.T, label string) int64 {
	return rapid.OneOf(rapid.Int64Range(-40, 300), rapid.Int64Range(-1<<33, 1<<33), rapid.Int64()).Draw(t, label)
}

func genSnapshot(t *rapid.T) *Snapshot {
	bytes := func(label string) []byte {
		if rapid.Bool().Draw(t, label+" nil") {
			return nil
		}
		return rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, label)
	}
	s := &Snapshot{
		InstanceID: genString(t, "instance"), ExecutionID: genString(t, "execution"), ExecutionStartSeq: genInt64(t, "start seq"),
		Name: genString(t, "name"), Version: genString(t, "version"),
		Status: rapid.SampledFrom([]provider.Status{"", provider.StatusRunning, provider.StatusCompleted}).Draw(t, "status"),
		Ended:  rapid.Bool().Draw(t, "ended"), BusinessKey: genString(t, "key"), CustomStatus: bytes("custom"),
		CreatedAt: genTime(t, "created"), UpdatedAt: genTime(t, "updated"), CompletedAt: genTime(t, "completed"),
		Output: bytes("output"), LastError: genString(t, "last error"), LastSeq: genInt64(t, "last seq"), LastHash: bytes("hash"),
	}
	if rapid.Bool().Draw(t, "executions") {
		s.Executions = rapid.SliceOfN(rapid.String(), 0, 20).Draw(t, "execution ids")
	}
	if rapid.Bool().Draw(t, "parts") {
		s.BusinessParts = rapid.MapOf(rapid.String(), rapid.String()).Draw(t, "business parts")
	}
	if rapid.Bool().Draw(t, "parent") {
		s.Parent = &history.ParentRef{InstanceID: genString(t, "parent id"), ExecutionID: genString(t, "parent execution"), ScheduledSeq: genInt64(t, "parent seq")}
	}
	if rapid.Bool().Draw(t, "failure") {
		s.Failure = &history.Failure{Message: genString(t, "message"), Type: genString(t, "type"), NonRetryable: rapid.Bool().Draw(t, "non-retryable"), Details: bytes("details")}
	}
	seqs := rapid.MapOfN(rapid.Int64(), rapid.String(), 0, 20)
	if rapid.Bool().Draw(t, "activities") {
		s.Activities = seqs.Draw(t, "activities map")
	}
	if rapid.Bool().Draw(t, "subworkflows") {
		s.SubWorkflows = seqs.Draw(t, "subworkflows map")
	}
	if rapid.Bool().Draw(t, "signals") {
		s.Signals = seqs.Draw(t, "signals map")
	}
	if rapid.Bool().Draw(t, "timers") {
		s.Timers = map[int64]time.Time{}
		for i := rapid.IntRange(0, 20).Draw(t, "timer count"); i > 0; i-- {
			s.Timers[genInt64(t, "timer seq")] = genTime(t, "fire")
		}
	}
	if rapid.Bool().Draw(t, "tasks") {
		s.Tasks = map[string]*OpenTask{}
		for i := rapid.IntRange(0, 20).Draw(t, "task count"); i > 0; i-- {
			ot := &OpenTask{Name: genString(t, "task name"), Assignee: genString(t, "assignee")}
			if rapid.Bool().Draw(t, "roles") {
				ot.Roles = rapid.SliceOfN(rapid.String(), 0, 3).Draw(t, "role list")
			}
			s.Tasks[rapid.String().Draw(t, "task id")] = ot
		}
	}
	if rapid.Bool().Draw(t, "custom text") {
		s.CustomStatusText = genString(t, "custom status text")
	}
	if rapid.Bool().Draw(t, "priority") {
		s.Priority = rapid.IntRange(-1000, 1000).Draw(t, "priority value")
	}
	if rapid.Bool().Draw(t, "concurrency") {
		s.Concurrency = &history.Concurrency{Key: genString(t, "concurrency key"), Limit: rapid.IntRange(0, 1<<20).Draw(t, "limit")}
	}
	if rapid.Bool().Draw(t, "subject") {
		s.Subject = genString(t, "subject value")
	}
	if rapid.Bool().Draw(t, "attributes") {
		s.Attributes = history.SearchAttributeMap{}
		for i := rapid.IntRange(0, 10).Draw(t, "attribute count"); i > 0; i-- {
			v := query.Value{Type: query.Type(rapid.IntRange(0, 6).Draw(t, "type"))}
			// Real values set the field of their type; any mix must
			// encode alike.
			if rapid.Bool().Draw(t, "str") {
				v.Str = genString(t, "str value")
			}
			if rapid.Bool().Draw(t, "int") {
				v.Int = genInt64(t, "int value")
			}
			if rapid.Bool().Draw(t, "float") {
				v.Float = rapid.Float64().Draw(t, "float value")
			}
			v.Bool = rapid.Bool().Draw(t, "bool value")
			v.Time = genTime(t, "time value")
			if rapid.Bool().Draw(t, "list") {
				v.List = rapid.SliceOfN(rapid.String(), 0, 5).Draw(t, "list value")
			}
			s.Attributes[genString(t, "attribute name")] = v
		}
	}
	if rapid.Bool().Draw(t, "seen") {
		s.Seen = map[string]bool{rapid.String().Draw(t, "seen key"): true}
	}
	return s
}

// TestMarshalSnapshotMatchesReflective checks that the hand-written
// snapshot encoder writes the bytes the reflective encoder wrote, so
// stored snapshots and their comparisons are unchanged.
func TestMarshalSnapshotMatchesReflective(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		want, err := marshalSnapshotReflective(s)
		require.NoError(t, err)
		got, err := MarshalSnapshot(s)
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
}

func utcWire(w *snapshotWire) {
	s := w.Snapshot
	s.CreatedAt, s.UpdatedAt, s.CompletedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC(), s.CompletedAt.UTC()
	for i := range w.Timers {
		w.Timers[i].At = w.Timers[i].At.UTC()
	}
	for k, v := range s.Attributes {
		v.Time = v.Time.UTC()
		s.Attributes[k] = v
	}
}

// TestSnapshotDecoderMatchesReflective checks that what the hand-written
// snapshot decoder accepts, stored or mutated, the reflective decoder
// decodes to the same value, and that it accepts every stored snapshot
// without business parts or open tasks.
func TestSnapshotDecoderMatchesReflective(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		data, err := MarshalSnapshot(s)
		require.NoError(t, err)
		mutated := rapid.Bool().Draw(t, "mutate")
		if mutated && len(data) > 0 {
			data[rapid.IntRange(0, len(data)-1).Draw(t, "at")] = rapid.Byte().Draw(t, "byte")
		}
		fast := snapshotWire{Snapshot: &Snapshot{}}
		ok := decodeSnapshotWire(data, &fast)
		if !mutated && len(s.BusinessParts) == 0 && len(s.Tasks) == 0 {
			require.True(t, ok, "the fast decoder refused a stored snapshot")
		}
		if !ok {
			return
		}
		slow := snapshotWire{Snapshot: &Snapshot{}}
		require.NoError(t, history.Decode(data, &slow), "the fast decoder accepted % x", data)
		utcWire(&fast)
		utcWire(&slow)
		require.Equal(t, slow, fast)
	})
}
