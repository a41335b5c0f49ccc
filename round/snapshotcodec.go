package round

import (
	"slices"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/mpack"
	"github.com/chronicleflow/chronicle/provider"
)

// appendSnapshot appends the encoding of s that MarshalSnapshot stores:
// byte for byte what the reflective MessagePack encoder writes for its
// snapshotWire (a map of the non-empty fields in declaration order, the
// embedded Snapshot's first, compact integers, times as the timestamp
// extension, maps as slices sorted by key). Every round encodes its
// snapshot, and the reflective encoder boxed each omitempty field to test
// it; snapshotcodec_test.go checks the two against each other.
func appendSnapshot(b []byte, s *Snapshot) []byte {
	n := 2 + mpack.Count(s.ExecutionID != "", s.ExecutionStartSeq != 0, len(s.Executions) > 0, s.Name != "", s.Version != "",
		s.Status != "", s.Ended, s.BusinessKey != "", len(s.BusinessParts) > 0, s.Parent != nil, len(s.CustomStatus) > 0,
		s.CustomStatusText != "", len(s.Attributes) > 0,
		!s.CreatedAt.IsZero(), !s.UpdatedAt.IsZero(), !s.CompletedAt.IsZero(), len(s.Output) > 0, s.Failure != nil,
		s.LastError != "", len(s.LastHash) > 0, s.Priority != 0, s.Concurrency != nil, s.Subject != "", len(s.Activities) > 0, len(s.Timers) > 0, len(s.SubWorkflows) > 0, len(s.Signals) > 0, len(s.Tasks) > 0)
	b = mpack.AppendMapLen(b, n)
	b = mpack.AppendStr(mpack.AppendStr(b, "instance"), s.InstanceID)
	if s.ExecutionID != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "execution"), s.ExecutionID)
	}
	if s.ExecutionStartSeq != 0 {
		b = mpack.AppendInt(mpack.AppendStr(b, "execution_start_seq"), s.ExecutionStartSeq)
	}
	if len(s.Executions) > 0 {
		b = mpack.AppendStrings(mpack.AppendStr(b, "executions"), s.Executions)
	}
	if s.Name != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "name"), s.Name)
	}
	if s.Version != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "version"), s.Version)
	}
	if s.Status != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "status"), string(s.Status))
	}
	if s.Ended {
		b = append(mpack.AppendStr(b, "ended"), 0xc3)
	}
	if s.BusinessKey != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "business_key"), s.BusinessKey)
	}
	if len(s.BusinessParts) > 0 {
		b = mpack.AppendMapLen(mpack.AppendStr(b, "business_parts"), len(s.BusinessParts))
		keys := make([]string, 0, len(s.BusinessParts))
		for k := range s.BusinessParts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b = mpack.AppendStr(mpack.AppendStr(b, k), s.BusinessParts[k])
		}
	}
	if p := s.Parent; p != nil {
		b = append(mpack.AppendStr(b, "parent"), 0x83)
		b = mpack.AppendStr(mpack.AppendStr(b, "instance_id"), p.InstanceID)
		b = mpack.AppendStr(mpack.AppendStr(b, "execution_id"), p.ExecutionID)
		b = mpack.AppendInt(mpack.AppendStr(b, "scheduled_seq"), p.ScheduledSeq)
	}
	if len(s.CustomStatus) > 0 {
		b = mpack.AppendBin(mpack.AppendStr(b, "custom_status"), s.CustomStatus)
	}
	if s.CustomStatusText != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "custom_status_text"), s.CustomStatusText)
	}
	if len(s.Attributes) > 0 {
		b = s.Attributes.AppendMsgpack(mpack.AppendStr(b, "attributes"))
	}
	if !s.CreatedAt.IsZero() {
		b = mpack.AppendTime(mpack.AppendStr(b, "created_at"), s.CreatedAt)
	}
	if !s.UpdatedAt.IsZero() {
		b = mpack.AppendTime(mpack.AppendStr(b, "updated_at"), s.UpdatedAt)
	}
	if !s.CompletedAt.IsZero() {
		b = mpack.AppendTime(mpack.AppendStr(b, "completed_at"), s.CompletedAt)
	}
	if len(s.Output) > 0 {
		b = mpack.AppendBin(mpack.AppendStr(b, "output"), s.Output)
	}
	if f := s.Failure; f != nil {
		b = mpack.AppendMapLen(mpack.AppendStr(b, "failure"), 1+mpack.Count(f.Type != "", f.NonRetryable, len(f.Details) > 0))
		b = mpack.AppendStr(mpack.AppendStr(b, "message"), f.Message)
		if f.Type != "" {
			b = mpack.AppendStr(mpack.AppendStr(b, "type"), f.Type)
		}
		if f.NonRetryable {
			b = append(mpack.AppendStr(b, "non_retryable"), 0xc3)
		}
		if len(f.Details) > 0 {
			b = mpack.AppendBin(mpack.AppendStr(b, "details"), f.Details)
		}
	}
	if s.LastError != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "last_error"), s.LastError)
	}
	b = mpack.AppendInt(mpack.AppendStr(b, "last_seq"), s.LastSeq)
	if len(s.LastHash) > 0 {
		b = mpack.AppendBin(mpack.AppendStr(b, "last_hash"), s.LastHash)
	}
	if s.Priority != 0 {
		b = mpack.AppendInt(mpack.AppendStr(b, "priority"), int64(s.Priority))
	}
	if c := s.Concurrency; c != nil {
		b = append(mpack.AppendStr(b, "concurrency"), 0x82)
		b = mpack.AppendStr(mpack.AppendStr(b, "key"), c.Key)
		b = mpack.AppendInt(mpack.AppendStr(b, "limit"), int64(c.Limit))
	}
	if s.Subject != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "subject"), s.Subject)
	}
	if len(s.Activities) > 0 {
		b = appendPendingNames(mpack.AppendStr(b, "activities"), s.Activities)
	}
	if len(s.Timers) > 0 {
		b = mpack.AppendArrayLen(mpack.AppendStr(b, "timers"), len(s.Timers))
		for _, seq := range sortedSeqs(s.Timers) {
			b = mpack.AppendInt(mpack.AppendStr(append(b, 0x82), "seq"), seq)
			b = mpack.AppendTime(mpack.AppendStr(b, "at"), s.Timers[seq])
		}
	}
	if len(s.SubWorkflows) > 0 {
		b = appendPendingNames(mpack.AppendStr(b, "subworkflows"), s.SubWorkflows)
	}
	if len(s.Signals) > 0 {
		b = appendPendingNames(mpack.AppendStr(b, "signals"), s.Signals)
	}
	if len(s.Tasks) > 0 {
		b = mpack.AppendArrayLen(mpack.AppendStr(b, "tasks"), len(s.Tasks))
		ids := make([]string, 0, len(s.Tasks))
		for id := range s.Tasks {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			t := s.Tasks[id]
			b = mpack.AppendMapLen(b, 2+mpack.Count(t.Assignee != "", len(t.Roles) > 0))
			b = mpack.AppendStr(mpack.AppendStr(b, "id"), id)
			b = mpack.AppendStr(mpack.AppendStr(b, "name"), t.Name)
			if t.Assignee != "" {
				b = mpack.AppendStr(mpack.AppendStr(b, "assignee"), t.Assignee)
			}
			if len(t.Roles) > 0 {
				b = mpack.AppendStrings(mpack.AppendStr(b, "roles"), t.Roles)
			}
		}
	}
	return b
}

func appendPendingNames(b []byte, m map[int64]string) []byte {
	b = mpack.AppendArrayLen(b, len(m))
	for _, seq := range sortedSeqs(m) {
		b = mpack.AppendInt(mpack.AppendStr(append(b, 0x82), "seq"), seq)
		b = mpack.AppendStr(mpack.AppendStr(b, "name"), m[seq])
	}
	return b
}

func sortedSeqs[V any](m map[int64]V) []int64 {
	seqs := make([]int64, 0, len(m))
	for seq := range m {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs
}

// decodeSnapshotWire reads into w a snapshot in the layout appendSnapshot
// writes, without business parts, open tasks or seen keys; ok is false
// for anything else (then UnmarshalSnapshot decodes it reflectively). A
// round that starts cold decodes its stored snapshot, and about half of
// memory W1's rounds at 20,000 workflows are cold. Times come back in
// UTC where the reflective decoder gives the local zone; UnmarshalSnapshot
// puts both in UTC.
func decodeSnapshotWire(data []byte, w *snapshotWire) bool {
	r := mpack.Reader{Buf: data, OK: true}
	s := w.Snapshot
	next := 0
	for n := r.MapLen(); n > 0 && r.OK; n-- {
		switch r.Key(snapshotFields, &next) {
		case 0:
			s.InstanceID = r.Str()
		case 1:
			s.ExecutionID = r.Str()
		case 2:
			s.ExecutionStartSeq = r.Int()
		case 3:
			s.Executions = r.Strings()
		case 4:
			s.Name = r.Str()
		case 5:
			s.Version = r.Str()
		case 6:
			s.Status = provider.Status(r.Str())
		case 7:
			s.Ended = r.Bool()
		case 8:
			s.BusinessKey = r.Str()
		case 9:
			p := &history.ParentRef{}
			pnext := 0
			for n := r.MapLen(); n > 0 && r.OK; n-- {
				switch r.Key(parentFields, &pnext) {
				case 0:
					p.InstanceID = r.Str()
				case 1:
					p.ExecutionID = r.Str()
				case 2:
					p.ScheduledSeq = r.Int()
				}
			}
			s.Parent = p
		case 10:
			s.CustomStatus = r.Bin()
		case 11:
			s.CustomStatusText = r.Str()
		case 12:
			m, n, ok := history.ReadSearchAttributeMap(r.Buf[r.Off:])
			if !ok {
				return false
			}
			s.Attributes, r.Off = m, r.Off+n
		case 13:
			s.CreatedAt = r.Time()
		case 14:
			s.UpdatedAt = r.Time()
		case 15:
			s.CompletedAt = r.Time()
		case 16:
			s.Output = r.Bin()
		case 17:
			f := &history.Failure{}
			fnext := 0
			for n := r.MapLen(); n > 0 && r.OK; n-- {
				switch r.Key(failureFields, &fnext) {
				case 0:
					f.Message = r.Str()
				case 1:
					f.Type = r.Str()
				case 2:
					f.NonRetryable = r.Bool()
				case 3:
					f.Details = r.Bin()
				}
			}
			s.Failure = f
		case 18:
			s.LastError = r.Str()
		case 19:
			s.LastSeq = r.Int()
		case 20:
			s.LastHash = r.Bin()
		case 21:
			s.Priority = int(r.Int())
		case 22:
			c := &history.Concurrency{}
			cnext := 0
			for n := r.MapLen(); n > 0 && r.OK; n-- {
				switch r.Key(concurrencyFields, &cnext) {
				case 0:
					c.Key = r.Str()
				case 1:
					c.Limit = int(r.Int())
				}
			}
			s.Concurrency = c
		case 23:
			s.Subject = r.Str()
		case 24:
			w.Activities = readPendingNames(&r)
		case 25:
			n := r.ArrayLen()
			if n == 0 || n > len(r.Buf)-r.Off {
				return false
			}
			w.Timers = make([]pendingTime, n)
			for i := range w.Timers {
				if r.MapLen() != 2 || string(r.StrBytes()) != "seq" {
					return false
				}
				w.Timers[i].Seq = r.Int()
				if string(r.StrBytes()) != "at" {
					return false
				}
				w.Timers[i].At = r.Time()
			}
		case 26:
			w.SubWorkflows = readPendingNames(&r)
		case 27:
			w.Signals = readPendingNames(&r)
		}
	}
	return r.OK && r.Off == len(data)
}

// The keys decodeSnapshotWire reads, in declaration order.
var (
	snapshotFields = []string{"instance", "execution", "execution_start_seq", "executions", "name", "version", "status", "ended",
		"business_key", "parent", "custom_status", "custom_status_text", "attributes", "created_at", "updated_at", "completed_at", "output", "failure",
		"last_error", "last_seq", "last_hash", "priority", "concurrency", "subject", "activities", "timers", "subworkflows", "signals"}
	concurrencyFields = []string{"key", "limit"}
	parentFields      = []string{"instance_id", "execution_id", "scheduled_seq"}
	failureFields     = []string{"message", "type", "non_retryable", "details"}
)

func readPendingNames(r *mpack.Reader) []pendingName {
	n := r.ArrayLen()
	if n == 0 || n > len(r.Buf)-r.Off {
		r.OK = false
		return nil
	}
	ps := make([]pendingName, n)
	for i := range ps {
		if r.MapLen() != 2 || string(r.StrBytes()) != "seq" {
			r.OK = false
			return nil
		}
		ps[i].Seq = r.Int()
		if string(r.StrBytes()) != "name" {
			r.OK = false
			return nil
		}
		ps[i].Name = r.Str()
	}
	return ps
}
