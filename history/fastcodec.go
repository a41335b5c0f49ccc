package history

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/chronicleflow/chronicle/internal/mpack"
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
		if a.Priority != 0 || a.Concurrency != nil {
			return b, false
		}
		return appendActivityScheduled(b, a), true
	case *ActivityCompleted:
		n := 1
		if len(a.Result) > 0 {
			n++
		}
		b = mpack.AppendMapLen(b, n)
		if len(a.Result) > 0 {
			b = mpack.AppendBin(mpack.AppendStr(b, "result"), a.Result)
		}
		return mpack.AppendInt(mpack.AppendStr(b, "attempts"), int64(a.Attempts)), true
	case *ExecutionCompleted:
		if len(a.Output) == 0 {
			return append(b, 0x80), true
		}
		return mpack.AppendBin(mpack.AppendStr(append(b, 0x81), "output"), a.Output), true
	case *SearchAttributesUpserted:
		return a.Attributes.AppendMsgpack(mpack.AppendStr(append(b, 0x81), "attributes")), true
	case *ExecutionStarted:
		if len(a.BusinessParts) > 0 || len(a.Tags) > 0 || a.RerunOf != nil || a.Priority != 0 || a.Concurrency != nil {
			// Rare: left to the reflective encoder.
			return b, false
		}
		return appendExecutionStarted(b, a), true
	}
	return b, false
}

func appendActivityScheduled(b []byte, a *ActivityScheduled) []byte {
	n := 2 // name, retry
	n += mpack.Count(len(a.Input) > 0, a.Queue != "", a.Timeout != 0)
	b = mpack.AppendMapLen(b, n)
	b = mpack.AppendStr(mpack.AppendStr(b, "name"), a.Name)
	if len(a.Input) > 0 {
		b = mpack.AppendBin(mpack.AppendStr(b, "input"), a.Input)
	}
	b = mpack.AppendStr(b, "retry")
	r := &a.Retry
	b = mpack.AppendMapLen(b, mpack.Count(r.MaxAttempts != 0, r.InitialInterval != 0, r.MaxInterval != 0, r.Multiplier != 0, len(r.NonRetryable) > 0))
	if r.MaxAttempts != 0 {
		b = mpack.AppendInt(mpack.AppendStr(b, "max_attempts"), int64(r.MaxAttempts))
	}
	if r.InitialInterval != 0 {
		b = mpack.AppendInt(mpack.AppendStr(b, "initial_interval"), int64(r.InitialInterval))
	}
	if r.MaxInterval != 0 {
		b = mpack.AppendInt(mpack.AppendStr(b, "max_interval"), int64(r.MaxInterval))
	}
	if r.Multiplier != 0 {
		b = binary.BigEndian.AppendUint64(append(mpack.AppendStr(b, "multiplier"), 0xcb), math.Float64bits(r.Multiplier))
	}
	if len(r.NonRetryable) > 0 {
		b = mpack.AppendArrayLen(mpack.AppendStr(b, "non_retryable"), len(r.NonRetryable))
		for _, s := range r.NonRetryable {
			b = mpack.AppendStr(b, s)
		}
	}
	if a.Queue != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "queue"), a.Queue)
	}
	if a.Timeout != 0 {
		b = mpack.AppendInt(mpack.AppendStr(b, "timeout"), int64(a.Timeout))
	}
	return b
}

func appendExecutionStarted(b []byte, a *ExecutionStarted) []byte {
	b = mpack.AppendMapLen(b, 1+mpack.Count(a.Version != "", len(a.Input) > 0, a.BusinessKey != "", a.Parent != nil, a.Trace != "", a.ContinuedFrom != "", len(a.SearchAttributes) > 0, a.Subject != ""))
	b = mpack.AppendStr(mpack.AppendStr(b, "name"), a.Name)
	if a.Version != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "version"), a.Version)
	}
	if len(a.Input) > 0 {
		b = mpack.AppendBin(mpack.AppendStr(b, "input"), a.Input)
	}
	if a.BusinessKey != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "business_key"), a.BusinessKey)
	}
	if p := a.Parent; p != nil {
		b = append(mpack.AppendStr(b, "parent"), 0x83)
		b = mpack.AppendStr(mpack.AppendStr(b, "instance_id"), p.InstanceID)
		b = mpack.AppendStr(mpack.AppendStr(b, "execution_id"), p.ExecutionID)
		b = mpack.AppendInt(mpack.AppendStr(b, "scheduled_seq"), p.ScheduledSeq)
	}
	if a.Trace != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "trace"), a.Trace)
	}
	if a.ContinuedFrom != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "continued_from"), a.ContinuedFrom)
	}
	if len(a.SearchAttributes) > 0 {
		b = a.SearchAttributes.AppendMsgpack(mpack.AppendStr(b, "search_attributes"))
	}
	if a.Subject != "" {
		b = mpack.AppendStr(mpack.AppendStr(b, "subject"), a.Subject)
	}
	return b
}

// decodeAttributes decodes a payload of kind k that its hand-written
// encoder wrote; ok is false for anything else.
func decodeAttributes(k Kind, payload []byte) (Attributes, bool) {
	r := mpack.Reader{Buf: payload, OK: true}
	var a Attributes
	switch k {
	case KindTurnStarted:
		if r.MapLen() != 0 {
			return nil, false
		}
		a = &TurnStarted{}
	case KindActivityScheduled:
		s := &ActivityScheduled{}
		next := 0
		for n := r.MapLen(); n > 0 && r.OK; n-- {
			switch r.Key(activityScheduledFields, &next) {
			case 0:
				s.Name = r.Str()
			case 1:
				s.Input = r.Bin()
			case 2:
				decodeRetry(&r, &s.Retry)
			case 3:
				s.Queue = r.Str()
			case 4:
				s.Timeout = time.Duration(r.Int())
			}
		}
		a = s
	case KindActivityCompleted:
		c := &ActivityCompleted{}
		next := 0
		for n := r.MapLen(); n > 0 && r.OK; n-- {
			switch r.Key(activityCompletedFields, &next) {
			case 0:
				c.Result = r.Bin()
			case 1:
				c.Attempts = int(r.Int())
			}
		}
		a = c
	case KindExecutionCompleted:
		c := &ExecutionCompleted{}
		next := 0
		for n := r.MapLen(); n > 0 && r.OK; n-- {
			if r.Key(executionCompletedFields, &next) == 0 {
				c.Output = r.Bin()
			}
		}
		a = c
	case KindExecutionStarted:
		s := &ExecutionStarted{}
		next := 0
		for n := r.MapLen(); n > 0 && r.OK; n-- {
			switch r.Key(executionStartedFields, &next) {
			case 0:
				s.Name = r.Str()
			case 1:
				s.Version = r.Str()
			case 2:
				s.Input = r.Bin()
			case 3:
				s.BusinessKey = r.Str()
			case 4:
				p := &ParentRef{}
				pnext := 0
				for n := r.MapLen(); n > 0 && r.OK; n-- {
					switch r.Key(parentRefFields, &pnext) {
					case 0:
						p.InstanceID = r.Str()
					case 1:
						p.ExecutionID = r.Str()
					case 2:
						p.ScheduledSeq = r.Int()
					}
				}
				s.Parent = p
			case 5:
				s.Trace = r.Str()
			case 6:
				s.ContinuedFrom = r.Str()
			case 7:
				s.SearchAttributes = readAttributeMap(&r)
			case 8:
				s.Subject = r.Str()
			}
		}
		a = s
	case KindSearchAttributesUpserted:
		if r.MapLen() != 1 || r.Key(searchAttributesUpsertedFields, new(int)) != 0 {
			return nil, false
		}
		u := &SearchAttributesUpserted{}
		switch {
		case r.Off < len(payload) && payload[r.Off] == 0xc0: // nil
			r.Off++
		case r.Off < len(payload) && payload[r.Off] == 0x80: // empty
			r.Off++
			u.Attributes = SearchAttributeMap{}
		default:
			u.Attributes = readAttributeMap(&r)
		}
		a = u
	default:
		return nil, false
	}
	if !r.OK || r.Off != len(payload) {
		return nil, false
	}
	return a, true
}

func decodeRetry(r *mpack.Reader, p *RetryPolicy) {
	next := 0
	for n := r.MapLen(); n > 0 && r.OK; n-- {
		switch r.Key(retryPolicyFields, &next) {
		case 0:
			p.MaxAttempts = int(r.Int())
		case 1:
			p.InitialInterval = time.Duration(r.Int())
		case 2:
			p.MaxInterval = time.Duration(r.Int())
		case 3:
			p.Multiplier = r.Float64()
		case 4:
			n := r.ArrayLen()
			if n == 0 || n > len(r.Buf)-r.Off {
				r.OK = false
				return
			}
			p.NonRetryable = make([]string, n)
			for j := range p.NonRetryable {
				p.NonRetryable[j] = r.Str()
			}
		}
	}
}

// The keys of the hand-decoded types, in declaration order.
var (
	activityScheduledFields  = []string{"name", "input", "retry", "queue", "timeout"}
	activityCompletedFields  = []string{"result", "attempts"}
	executionCompletedFields = []string{"output"}
	executionStartedFields   = []string{"name", "version", "input", "business_key", "parent", "trace", "continued_from", "search_attributes", "subject"}

	searchAttributesUpsertedFields = []string{"attributes"}
	parentRefFields                = []string{"instance_id", "execution_id", "scheduled_seq"}
	retryPolicyFields              = []string{"max_attempts", "initial_interval", "max_interval", "multiplier", "non_retryable"}
)

// decodeScalar decodes an integer into *int or *int64, or a string into
// *string, when data is exactly one in the layout [Encode] writes; it
// reports false, having changed nothing, for anything else.
func decodeScalar(data []byte, v any) bool {
	r := mpack.Reader{Buf: data, OK: true}
	switch p := v.(type) {
	case *int:
		n := r.Int()
		if !r.OK || r.Off != len(data) || p == nil {
			return false
		}
		*p = int(n)
	case *int64:
		n := r.Int()
		if !r.OK || r.Off != len(data) || p == nil {
			return false
		}
		*p = n
	case *string:
		b := r.StrBytes()
		if !r.OK || r.Off != len(data) || p == nil {
			return false
		}
		*p = string(b)
	default:
		return false
	}
	return true
}
