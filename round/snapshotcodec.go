package round

import (
	"encoding/binary"
	"math"
	"slices"
	"time"
)

// appendSnapshot appends the encoding of s that MarshalSnapshot stores:
// byte for byte what the reflective MessagePack encoder writes for its
// snapshotWire (a map of the non-empty fields in declaration order, the
// embedded Snapshot's first, compact integers, times as the timestamp
// extension, maps as slices sorted by key). Every round encodes its
// snapshot, and the reflective encoder boxed each omitempty field to test
// it; snapshotcodec_test.go checks the two against each other.
func appendSnapshot(b []byte, s *Snapshot) []byte {
	n := 2 + count(s.ExecutionID != "", s.ExecutionStartSeq != 0, len(s.Executions) > 0, s.Name != "", s.Version != "",
		s.Status != "", s.Ended, s.BusinessKey != "", len(s.BusinessParts) > 0, s.Parent != nil, len(s.CustomStatus) > 0,
		!s.CreatedAt.IsZero(), !s.UpdatedAt.IsZero(), !s.CompletedAt.IsZero(), len(s.Output) > 0, s.Failure != nil,
		s.LastError != "", len(s.LastHash) > 0, len(s.Activities) > 0, len(s.Timers) > 0, len(s.SubWorkflows) > 0, len(s.Tasks) > 0)
	b = mpMapLen(b, n)
	b = mpStr(mpStr(b, "instance"), s.InstanceID)
	if s.ExecutionID != "" {
		b = mpStr(mpStr(b, "execution"), s.ExecutionID)
	}
	if s.ExecutionStartSeq != 0 {
		b = mpInt(mpStr(b, "execution_start_seq"), s.ExecutionStartSeq)
	}
	if len(s.Executions) > 0 {
		b = mpStrings(mpStr(b, "executions"), s.Executions)
	}
	if s.Name != "" {
		b = mpStr(mpStr(b, "name"), s.Name)
	}
	if s.Version != "" {
		b = mpStr(mpStr(b, "version"), s.Version)
	}
	if s.Status != "" {
		b = mpStr(mpStr(b, "status"), string(s.Status))
	}
	if s.Ended {
		b = append(mpStr(b, "ended"), 0xc3)
	}
	if s.BusinessKey != "" {
		b = mpStr(mpStr(b, "business_key"), s.BusinessKey)
	}
	if len(s.BusinessParts) > 0 {
		b = mpMapLen(mpStr(b, "business_parts"), len(s.BusinessParts))
		keys := make([]string, 0, len(s.BusinessParts))
		for k := range s.BusinessParts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b = mpStr(mpStr(b, k), s.BusinessParts[k])
		}
	}
	if p := s.Parent; p != nil {
		b = append(mpStr(b, "parent"), 0x83)
		b = mpStr(mpStr(b, "instance_id"), p.InstanceID)
		b = mpStr(mpStr(b, "execution_id"), p.ExecutionID)
		b = mpInt(mpStr(b, "scheduled_seq"), p.ScheduledSeq)
	}
	if len(s.CustomStatus) > 0 {
		b = mpBin(mpStr(b, "custom_status"), s.CustomStatus)
	}
	if !s.CreatedAt.IsZero() {
		b = mpTime(mpStr(b, "created_at"), s.CreatedAt)
	}
	if !s.UpdatedAt.IsZero() {
		b = mpTime(mpStr(b, "updated_at"), s.UpdatedAt)
	}
	if !s.CompletedAt.IsZero() {
		b = mpTime(mpStr(b, "completed_at"), s.CompletedAt)
	}
	if len(s.Output) > 0 {
		b = mpBin(mpStr(b, "output"), s.Output)
	}
	if f := s.Failure; f != nil {
		b = mpMapLen(mpStr(b, "failure"), 1+count(f.Type != "", f.NonRetryable, len(f.Details) > 0))
		b = mpStr(mpStr(b, "message"), f.Message)
		if f.Type != "" {
			b = mpStr(mpStr(b, "type"), f.Type)
		}
		if f.NonRetryable {
			b = append(mpStr(b, "non_retryable"), 0xc3)
		}
		if len(f.Details) > 0 {
			b = mpBin(mpStr(b, "details"), f.Details)
		}
	}
	if s.LastError != "" {
		b = mpStr(mpStr(b, "last_error"), s.LastError)
	}
	b = mpInt(mpStr(b, "last_seq"), s.LastSeq)
	if len(s.LastHash) > 0 {
		b = mpBin(mpStr(b, "last_hash"), s.LastHash)
	}
	if len(s.Activities) > 0 {
		b = appendPendingNames(mpStr(b, "activities"), s.Activities)
	}
	if len(s.Timers) > 0 {
		b = mpArrayLen(mpStr(b, "timers"), len(s.Timers))
		for _, seq := range sortedSeqs(s.Timers) {
			b = mpInt(mpStr(append(b, 0x82), "seq"), seq)
			b = mpTime(mpStr(b, "at"), s.Timers[seq])
		}
	}
	if len(s.SubWorkflows) > 0 {
		b = appendPendingNames(mpStr(b, "subworkflows"), s.SubWorkflows)
	}
	if len(s.Tasks) > 0 {
		b = mpArrayLen(mpStr(b, "tasks"), len(s.Tasks))
		ids := make([]string, 0, len(s.Tasks))
		for id := range s.Tasks {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			t := s.Tasks[id]
			b = mpMapLen(b, 2+count(t.Assignee != "", len(t.Roles) > 0))
			b = mpStr(mpStr(b, "id"), id)
			b = mpStr(mpStr(b, "name"), t.Name)
			if t.Assignee != "" {
				b = mpStr(mpStr(b, "assignee"), t.Assignee)
			}
			if len(t.Roles) > 0 {
				b = mpStrings(mpStr(b, "roles"), t.Roles)
			}
		}
	}
	return b
}

func appendPendingNames(b []byte, m map[int64]string) []byte {
	b = mpArrayLen(b, len(m))
	for _, seq := range sortedSeqs(m) {
		b = mpInt(mpStr(append(b, 0x82), "seq"), seq)
		b = mpStr(mpStr(b, "name"), m[seq])
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

func count(conds ...bool) int {
	n := 0
	for _, c := range conds {
		if c {
			n++
		}
	}
	return n
}

// mpMapLen, mpArrayLen, mpStr, mpStrings, mpBin, mpInt and mpTime write
// what the MessagePack encoder writes (with compact integers) for a map
// or array header, a string, a string slice, a byte slice, an integer and
// a time.
func mpMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}

func mpArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

func mpStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func mpStrings(b []byte, ss []string) []byte {
	b = mpArrayLen(b, len(ss))
	for _, s := range ss {
		b = mpStr(b, s)
	}
	return b
}

func mpBin(b []byte, p []byte) []byte {
	switch n := len(p); {
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, p...)
}

func mpInt(b []byte, n int64) []byte {
	if n >= 0 {
		switch u := uint64(n); {
		case u <= math.MaxInt8:
			return append(b, byte(u))
		case u <= math.MaxUint8:
			return append(b, 0xcc, byte(u))
		case u <= math.MaxUint16:
			return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(u))
		case u <= math.MaxUint32:
			return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(u))
		default:
			return binary.BigEndian.AppendUint64(append(b, 0xcf), u)
		}
	}
	switch {
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

// mpTime writes the timestamp extension (type -1) in its 4-, 8- or
// 12-byte form.
func mpTime(b []byte, t time.Time) []byte {
	secs := uint64(t.Unix())
	if secs>>34 == 0 {
		data := uint64(t.Nanosecond())<<34 | secs
		if data&0xffffffff00000000 == 0 {
			return binary.BigEndian.AppendUint32(append(b, 0xd6, 0xff), uint32(data))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xd7, 0xff), data)
	}
	b = binary.BigEndian.AppendUint32(append(b, 0xc7, 12, 0xff), uint32(t.Nanosecond()))
	return binary.BigEndian.AppendUint64(b, secs)
}
