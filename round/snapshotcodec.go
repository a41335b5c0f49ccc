package round

import (
	"encoding/binary"
	"math"
	"slices"
	"time"

	"github.com/chronicleflow/chronicle/history"
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

// decodeSnapshotWire reads into w a snapshot in the layout appendSnapshot
// writes, without business parts, open tasks or seen keys; ok is false
// for anything else (then UnmarshalSnapshot decodes it reflectively). A
// round that starts cold decodes its stored snapshot, and about half of
// memory W1's rounds at 20,000 workflows are cold. Times come back in
// UTC where the reflective decoder gives the local zone; UnmarshalSnapshot
// puts both in UTC.
func decodeSnapshotWire(data []byte, w *snapshotWire) bool {
	r := mpReader{buf: data, ok: true}
	s := w.Snapshot
	next := 0
	for n := r.mapLen(); n > 0 && r.ok; n-- {
		switch r.key(snapshotFields, &next) {
		case 0:
			s.InstanceID = r.str()
		case 1:
			s.ExecutionID = r.str()
		case 2:
			s.ExecutionStartSeq = r.int()
		case 3:
			s.Executions = r.strings()
		case 4:
			s.Name = r.str()
		case 5:
			s.Version = r.str()
		case 6:
			s.Status = provider.Status(r.str())
		case 7:
			s.Ended = r.bool()
		case 8:
			s.BusinessKey = r.str()
		case 9:
			p := &history.ParentRef{}
			pnext := 0
			for n := r.mapLen(); n > 0 && r.ok; n-- {
				switch r.key(parentFields, &pnext) {
				case 0:
					p.InstanceID = r.str()
				case 1:
					p.ExecutionID = r.str()
				case 2:
					p.ScheduledSeq = r.int()
				}
			}
			s.Parent = p
		case 10:
			s.CustomStatus = r.bin()
		case 11:
			s.CreatedAt = r.time()
		case 12:
			s.UpdatedAt = r.time()
		case 13:
			s.CompletedAt = r.time()
		case 14:
			s.Output = r.bin()
		case 15:
			f := &history.Failure{}
			fnext := 0
			for n := r.mapLen(); n > 0 && r.ok; n-- {
				switch r.key(failureFields, &fnext) {
				case 0:
					f.Message = r.str()
				case 1:
					f.Type = r.str()
				case 2:
					f.NonRetryable = r.bool()
				case 3:
					f.Details = r.bin()
				}
			}
			s.Failure = f
		case 16:
			s.LastError = r.str()
		case 17:
			s.LastSeq = r.int()
		case 18:
			s.LastHash = r.bin()
		case 19:
			w.Activities = r.pendingNames()
		case 20:
			n := r.arrayLen()
			if n == 0 || n > len(r.buf)-r.off {
				return false
			}
			w.Timers = make([]pendingTime, n)
			for i := range w.Timers {
				if r.mapLen() != 2 || string(r.strBytes()) != "seq" {
					return false
				}
				w.Timers[i].Seq = r.int()
				if string(r.strBytes()) != "at" {
					return false
				}
				w.Timers[i].At = r.time()
			}
		case 21:
			w.SubWorkflows = r.pendingNames()
		}
	}
	return r.ok && r.off == len(data)
}

// The keys decodeSnapshotWire reads, in declaration order.
var (
	snapshotFields = []string{"instance", "execution", "execution_start_seq", "executions", "name", "version", "status", "ended",
		"business_key", "parent", "custom_status", "created_at", "updated_at", "completed_at", "output", "failure",
		"last_error", "last_seq", "last_hash", "activities", "timers", "subworkflows"}
	parentFields  = []string{"instance_id", "execution_id", "scheduled_seq"}
	failureFields = []string{"message", "type", "non_retryable", "details"}
)

// mpReader reads the layout appendSnapshot writes; any other byte makes
// it fail (ok false).
type mpReader struct {
	buf []byte
	off int
	ok  bool
}

func (r *mpReader) byte() byte {
	if !r.ok || r.off >= len(r.buf) {
		r.ok = false
		return 0
	}
	c := r.buf[r.off]
	r.off++
	return c
}

func (r *mpReader) take(n int) []byte {
	if !r.ok || n < 0 || n > len(r.buf)-r.off {
		r.ok = false
		return nil
	}
	p := r.buf[r.off : r.off+n]
	r.off += n
	return p
}

func (r *mpReader) uint(size int) uint64 {
	p := r.take(size)
	if !r.ok {
		return 0
	}
	switch size {
	case 1:
		return uint64(p[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(p))
	case 4:
		return uint64(binary.BigEndian.Uint32(p))
	}
	return binary.BigEndian.Uint64(p)
}

func (r *mpReader) mapLen() int {
	switch c := r.byte(); {
	case c&0xf0 == 0x80:
		return int(c & 0x0f)
	case c == 0xde:
		return int(r.uint(2))
	}
	r.ok = false
	return 0
}

func (r *mpReader) arrayLen() int {
	switch c := r.byte(); {
	case c&0xf0 == 0x90:
		return int(c & 0x0f)
	case c == 0xdc:
		return int(r.uint(2))
	}
	r.ok = false
	return 0
}

func (r *mpReader) strBytes() []byte {
	var n int
	switch c := r.byte(); {
	case c&0xe0 == 0xa0:
		n = int(c & 0x1f)
	case c == 0xd9:
		n = int(r.uint(1))
	case c == 0xda:
		n = int(r.uint(2))
	case c == 0xdb:
		n = int(r.uint(4))
	default:
		r.ok = false
	}
	return r.take(n)
}

func (r *mpReader) str() string { return string(r.strBytes()) }

// strings reads a non-empty string slice.
func (r *mpReader) strings() []string {
	n := r.arrayLen()
	if n == 0 || n > len(r.buf)-r.off {
		r.ok = false
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = r.str()
	}
	return ss
}

// bin reads a non-empty byte slice into a copy of its own.
func (r *mpReader) bin() []byte {
	var n int
	switch r.byte() {
	case 0xc4:
		n = int(r.uint(1))
	case 0xc5:
		n = int(r.uint(2))
	case 0xc6:
		n = int(r.uint(4))
	default:
		r.ok = false
	}
	if n == 0 {
		r.ok = false
	}
	return slices.Clone(r.take(n))
}

func (r *mpReader) bool() bool {
	switch r.byte() {
	case 0xc3:
		return true
	case 0xc2:
		return false
	}
	r.ok = false
	return false
}

func (r *mpReader) int() int64 {
	c := r.byte()
	switch {
	case c <= 0x7f:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	}
	switch c {
	case 0xcc:
		return int64(r.uint(1))
	case 0xcd:
		return int64(r.uint(2))
	case 0xce:
		return int64(r.uint(4))
	case 0xcf:
		u := r.uint(8)
		if u > math.MaxInt64 {
			r.ok = false
		}
		return int64(u)
	case 0xd0:
		return int64(int8(r.uint(1)))
	case 0xd1:
		return int64(int16(r.uint(2)))
	case 0xd2:
		return int64(int32(r.uint(4)))
	case 0xd3:
		return int64(r.uint(8))
	}
	r.ok = false
	return 0
}

// time reads the timestamp extension in the forms mpTime writes.
func (r *mpReader) time() time.Time {
	switch r.byte() {
	case 0xd6:
		if r.byte() != 0xff {
			break
		}
		return time.Unix(int64(r.uint(4)), 0).UTC()
	case 0xd7:
		if r.byte() != 0xff {
			break
		}
		data := r.uint(8)
		return time.Unix(int64(data&0x00000003ffffffff), int64(data>>34)).UTC()
	case 0xc7:
		if r.byte() != 12 || r.byte() != 0xff {
			break
		}
		nsec := r.uint(4)
		return time.Unix(int64(r.uint(8)), int64(nsec)).UTC()
	}
	r.ok = false
	return time.Time{}
}

// key reads the next key of a map whose keys must be names, in order,
// and returns its index (-1, failing, for any other key).
func (r *mpReader) key(names []string, next *int) int {
	key := r.strBytes()
	for i := *next; i < len(names); i++ {
		if names[i] == string(key) {
			*next = i + 1
			return i
		}
	}
	r.ok = false
	return -1
}

func (r *mpReader) pendingNames() []pendingName {
	n := r.arrayLen()
	if n == 0 || n > len(r.buf)-r.off {
		r.ok = false
		return nil
	}
	ps := make([]pendingName, n)
	for i := range ps {
		if r.mapLen() != 2 || string(r.strBytes()) != "seq" {
			r.ok = false
			return nil
		}
		ps[i].Seq = r.int()
		if string(r.strBytes()) != "name" {
			r.ok = false
			return nil
		}
		ps[i].Name = r.str()
	}
	return ps
}
