package history

import (
	"encoding/binary"
	"math"
	"slices"
	"time"
)

// The attributes every round encodes and decodes (a turn's start, an
// activity's schedule and completion, an execution's start and end) have
// hand-written MessagePack codecs: the reflective encoder boxes every
// omitempty field to test it and looks each struct up in a shared cache,
// which made encoding the largest cost of a round after garbage collection.
// They write exactly the bytes [Encode] writes (struct as a map of its
// non-empty fields in declaration order, compact integers, float64 as a
// double), and read only that layout: anything else (a field out of
// order, another type, nil, an empty binary) falls back to [Decode], so
// decoding accepts and returns exactly what it did. fastcodec_test.go
// checks both against the reflective codec.

// appendAttributes appends the encoding of a; ok is false for a type
// without a hand-written encoder, or a value it leaves to the reflective
// one.
func appendAttributes(b []byte, a Attributes) (_ []byte, ok bool) {
	switch a := a.(type) {
	case *TurnStarted:
		return append(b, 0x80), true
	case *ActivityScheduled:
		return appendActivityScheduled(b, a), true
	case *ActivityCompleted:
		n := 1
		if len(a.Result) > 0 {
			n++
		}
		b = mpMapLen(b, n)
		if len(a.Result) > 0 {
			b = mpBin(mpStr(b, "result"), a.Result)
		}
		return mpInt(mpStr(b, "attempts"), int64(a.Attempts)), true
	case *ExecutionCompleted:
		if len(a.Output) == 0 {
			return append(b, 0x80), true
		}
		return mpBin(mpStr(append(b, 0x81), "output"), a.Output), true
	case *ExecutionStarted:
		if len(a.BusinessParts) > 0 || len(a.Tags) > 0 {
			return b, false
		}
		return appendExecutionStarted(b, a), true
	}
	return b, false
}

func appendActivityScheduled(b []byte, a *ActivityScheduled) []byte {
	n := 2 // name, retry
	n += count(len(a.Input) > 0, a.Queue != "", a.Timeout != 0)
	b = mpMapLen(b, n)
	b = mpStr(mpStr(b, "name"), a.Name)
	if len(a.Input) > 0 {
		b = mpBin(mpStr(b, "input"), a.Input)
	}
	b = mpStr(b, "retry")
	r := &a.Retry
	b = mpMapLen(b, count(r.MaxAttempts != 0, r.InitialInterval != 0, r.MaxInterval != 0, r.Multiplier != 0, len(r.NonRetryable) > 0))
	if r.MaxAttempts != 0 {
		b = mpInt(mpStr(b, "max_attempts"), int64(r.MaxAttempts))
	}
	if r.InitialInterval != 0 {
		b = mpInt(mpStr(b, "initial_interval"), int64(r.InitialInterval))
	}
	if r.MaxInterval != 0 {
		b = mpInt(mpStr(b, "max_interval"), int64(r.MaxInterval))
	}
	if r.Multiplier != 0 {
		b = binary.BigEndian.AppendUint64(append(mpStr(b, "multiplier"), 0xcb), math.Float64bits(r.Multiplier))
	}
	if len(r.NonRetryable) > 0 {
		b = mpArrayLen(mpStr(b, "non_retryable"), len(r.NonRetryable))
		for _, s := range r.NonRetryable {
			b = mpStr(b, s)
		}
	}
	if a.Queue != "" {
		b = mpStr(mpStr(b, "queue"), a.Queue)
	}
	if a.Timeout != 0 {
		b = mpInt(mpStr(b, "timeout"), int64(a.Timeout))
	}
	return b
}

func appendExecutionStarted(b []byte, a *ExecutionStarted) []byte {
	b = mpMapLen(b, 1+count(a.Version != "", len(a.Input) > 0, a.BusinessKey != "", a.Parent != nil, a.Trace != "", a.ContinuedFrom != ""))
	b = mpStr(mpStr(b, "name"), a.Name)
	if a.Version != "" {
		b = mpStr(mpStr(b, "version"), a.Version)
	}
	if len(a.Input) > 0 {
		b = mpBin(mpStr(b, "input"), a.Input)
	}
	if a.BusinessKey != "" {
		b = mpStr(mpStr(b, "business_key"), a.BusinessKey)
	}
	if p := a.Parent; p != nil {
		b = append(mpStr(b, "parent"), 0x83)
		b = mpStr(mpStr(b, "instance_id"), p.InstanceID)
		b = mpStr(mpStr(b, "execution_id"), p.ExecutionID)
		b = mpInt(mpStr(b, "scheduled_seq"), p.ScheduledSeq)
	}
	if a.Trace != "" {
		b = mpStr(mpStr(b, "trace"), a.Trace)
	}
	if a.ContinuedFrom != "" {
		b = mpStr(mpStr(b, "continued_from"), a.ContinuedFrom)
	}
	return b
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

// mpMapLen, mpArrayLen, mpStr, mpBin and mpInt write what the MessagePack
// encoder writes for a map or array header, a string, a byte slice and an
// integer (compact).
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

// mpReader reads the layout the hand-written encoders write. Any other
// byte makes it fail (ok false), and the caller falls back to [Decode].
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

// strBytes reads a string's bytes without copying them.
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

func (r *mpReader) float64() float64 {
	if r.byte() != 0xcb {
		r.ok = false
		return 0
	}
	return math.Float64frombits(r.uint(8))
}

// key reads the next key of a map whose keys must be names, in order:
// it returns the key's index, after the index of the previous key (next
// holds the index the next key may have at least), or -1 when the key is
// none of those.
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

// decodeAttributes decodes a payload of kind k that its hand-written
// encoder wrote; ok is false for anything else.
func decodeAttributes(k Kind, payload []byte) (Attributes, bool) {
	r := mpReader{buf: payload, ok: true}
	var a Attributes
	switch k {
	case KindTurnStarted:
		if r.mapLen() != 0 {
			return nil, false
		}
		a = &TurnStarted{}
	case KindActivityScheduled:
		s := &ActivityScheduled{}
		next := 0
		for n := r.mapLen(); n > 0 && r.ok; n-- {
			switch r.key(activityScheduledFields, &next) {
			case 0:
				s.Name = r.str()
			case 1:
				s.Input = r.bin()
			case 2:
				decodeRetry(&r, &s.Retry)
			case 3:
				s.Queue = r.str()
			case 4:
				s.Timeout = time.Duration(r.int())
			}
		}
		a = s
	case KindActivityCompleted:
		c := &ActivityCompleted{}
		next := 0
		for n := r.mapLen(); n > 0 && r.ok; n-- {
			switch r.key(activityCompletedFields, &next) {
			case 0:
				c.Result = r.bin()
			case 1:
				c.Attempts = int(r.int())
			}
		}
		a = c
	case KindExecutionCompleted:
		c := &ExecutionCompleted{}
		next := 0
		for n := r.mapLen(); n > 0 && r.ok; n-- {
			if r.key(executionCompletedFields, &next) == 0 {
				c.Output = r.bin()
			}
		}
		a = c
	case KindExecutionStarted:
		s := &ExecutionStarted{}
		next := 0
		for n := r.mapLen(); n > 0 && r.ok; n-- {
			switch r.key(executionStartedFields, &next) {
			case 0:
				s.Name = r.str()
			case 1:
				s.Version = r.str()
			case 2:
				s.Input = r.bin()
			case 3:
				s.BusinessKey = r.str()
			case 4:
				p := &ParentRef{}
				pnext := 0
				for n := r.mapLen(); n > 0 && r.ok; n-- {
					switch r.key(parentRefFields, &pnext) {
					case 0:
						p.InstanceID = r.str()
					case 1:
						p.ExecutionID = r.str()
					case 2:
						p.ScheduledSeq = r.int()
					}
				}
				s.Parent = p
			case 5:
				s.Trace = r.str()
			case 6:
				s.ContinuedFrom = r.str()
			}
		}
		a = s
	default:
		return nil, false
	}
	if !r.ok || r.off != len(payload) {
		return nil, false
	}
	return a, true
}

func decodeRetry(r *mpReader, p *RetryPolicy) {
	next := 0
	for n := r.mapLen(); n > 0 && r.ok; n-- {
		switch r.key(retryPolicyFields, &next) {
		case 0:
			p.MaxAttempts = int(r.int())
		case 1:
			p.InitialInterval = time.Duration(r.int())
		case 2:
			p.MaxInterval = time.Duration(r.int())
		case 3:
			p.Multiplier = r.float64()
		case 4:
			n := r.arrayLen()
			if n == 0 || n > len(r.buf)-r.off {
				r.ok = false
				return
			}
			p.NonRetryable = make([]string, n)
			for j := range p.NonRetryable {
				p.NonRetryable[j] = r.str()
			}
		}
	}
}

// The keys of the hand-decoded types, in declaration order.
var (
	activityScheduledFields  = []string{"name", "input", "retry", "queue", "timeout"}
	activityCompletedFields  = []string{"result", "attempts"}
	executionCompletedFields = []string{"output"}
	executionStartedFields   = []string{"name", "version", "input", "business_key", "parent", "trace", "continued_from"}
	parentRefFields          = []string{"instance_id", "execution_id", "scheduled_seq"}
	retryPolicyFields        = []string{"max_attempts", "initial_interval", "max_interval", "multiplier", "non_retryable"}
)

// decodeScalar decodes an integer into *int or *int64, or a string into
// *string, when data is exactly one in the layout [Encode] writes; it
// reports false, having changed nothing, for anything else.
func decodeScalar(data []byte, v any) bool {
	r := mpReader{buf: data, ok: true}
	switch p := v.(type) {
	case *int:
		n := r.int()
		if !r.ok || r.off != len(data) || p == nil {
			return false
		}
		*p = int(n)
	case *int64:
		n := r.int()
		if !r.ok || r.off != len(data) || p == nil {
			return false
		}
		*p = n
	case *string:
		b := r.strBytes()
		if !r.ok || r.off != len(data) || p == nil {
			return false
		}
		*p = string(b)
	default:
		return false
	}
	return true
}
