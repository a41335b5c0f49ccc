package history

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/internal/mpack"
	"github.com/vmihailenco/msgpack/v5"
)

// Errors of this package.
var (
	// ErrCorrupt is wrapped by every decoding error: the bytes are not what
	// this package writes.
	ErrCorrupt = errors.New("history: corrupt encoding")
	// ErrInvalid is wrapped by validation errors of ids and fields.
	ErrInvalid = errors.New("history: invalid value")
	// ErrTooLarge is wrapped when encoded data exceeds [MaxEncodedSize].
	ErrTooLarge = errors.New("history: encoded data too large")
)

// MaxEncodedSize bounds any encoded event, payload or envelope this package
// decodes. Engines enforce a much smaller payload limit when data enters.
const MaxEncodedSize = 64 << 20

// eventFormat is the version of the canonical event layout. The layout is
// covered by the hash chain and is never changed in place: a new layout gets
// a new format number and the decoder keeps reading the old one.
const eventFormat = 1

// MarshalEvent returns the stored encoding of e: the canonical encoding that
// the hash covers, followed by the hash.
func MarshalEvent(e *Event) []byte {
	b := make([]byte, 0, 128+len(e.InstanceID)+len(e.ExecutionID)+len(e.CorrelationID)+len(e.Payload))
	b = appendCanonical(b, e, 11)
	return appendBin(b, e.Hash)
}

// appendCanonical appends the bytes the hash of e covers (every field but
// Hash, fields 10) or its stored encoding (fields 11, Hash appended next).
func appendCanonical(b []byte, e *Event, fields byte) []byte {
	b = append(b, 0x90|fields) // fixarray
	b = appendInt(b, eventFormat)
	b = appendInt(b, e.Seq)
	b = appendStr(b, e.InstanceID)
	b = appendStr(b, e.ExecutionID)
	b = appendStr(b, string(e.Kind))
	b = appendStr(b, e.CorrelationID)
	b = appendInt(b, timeNanos(e.At))
	b = appendStr(b, e.Actor)
	b = appendBin(b, e.Payload)
	return appendBin(b, e.PrevHash)
}

// UnmarshalEvent decodes an event written by [MarshalEvent]. It never panics;
// on bad input it returns an error wrapping [ErrCorrupt].
func UnmarshalEvent(data []byte) (Event, error) {
	var e Event
	if len(data) > MaxEncodedSize {
		return e, fmt.Errorf("%w: event of %d bytes", ErrTooLarge, len(data))
	}
	r := reader{buf: data}
	if n := r.arrayLen(); n != 11 && r.err == nil {
		return e, fmt.Errorf("%w: event has %d fields, want 11", ErrCorrupt, n)
	}
	if f := r.int(); f != eventFormat && r.err == nil {
		return e, fmt.Errorf("%w: unknown event format %d", ErrCorrupt, f)
	}
	e.Seq = r.int()
	e.InstanceID = r.str()
	e.ExecutionID = r.str()
	e.Kind = Kind(r.str())
	e.CorrelationID = r.str()
	e.At = nanosTime(r.int())
	e.Actor = r.str()
	e.Payload = r.bin()
	e.PrevHash = r.bin()
	e.Hash = r.bin()
	if r.err != nil {
		return Event{}, r.err
	}
	if len(r.buf) != r.off {
		return Event{}, fmt.Errorf("%w: %d trailing bytes after event", ErrCorrupt, len(r.buf)-r.off)
	}
	return e, nil
}

func timeNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nanosTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// EncodeAttributes encodes typed attributes as an event payload.
func EncodeAttributes(a Attributes) ([]byte, error) {
	if a == nil || reflect.ValueOf(a).IsNil() {
		return nil, fmt.Errorf("%w: nil attributes", ErrInvalid)
	}
	if !a.EventKind().Valid() {
		return nil, fmt.Errorf("%w: unknown kind %q", ErrInvalid, a.EventKind())
	}
	if b, ok := appendAttributes(make([]byte, 0, 64), a); ok {
		return b, nil
	}
	return Encode(a)
}

// DecodeAttributes decodes the payload of an event of kind k into its typed
// attributes. It never panics; bad input yields an error wrapping
// [ErrCorrupt].
func DecodeAttributes(k Kind, payload []byte) (Attributes, error) {
	info, ok := kindInfo[k]
	if !ok {
		return nil, fmt.Errorf("%w: unknown event kind %q", ErrCorrupt, k)
	}
	if len(payload) <= MaxEncodedSize {
		if a, ok := decodeAttributes(k, payload); ok {
			return a, nil
		}
	}
	a := info.new()
	if err := Decode(payload, a); err != nil {
		return nil, fmt.Errorf("decode %s attributes: %w", k, err)
	}
	if n, ok := a.(utcNormalizer); ok {
		n.normalizeUTC()
	}
	return a, nil
}

// codecState is an encoder and a decoder with their buffers, pooled: the
// engine encodes and decodes attributes and envelopes on every round.
type codecState struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
	rd  bytes.Reader
	dec *msgpack.Decoder
}

var codecPool = sync.Pool{New: func() any {
	c := &codecState{}
	c.enc = msgpack.NewEncoder(&c.buf)
	c.dec = msgpack.NewDecoder(&c.rd)
	return c
}}

// maxPooledBuffer bounds the buffer a pooled encoder keeps: one large
// payload does not pin its memory for the life of the process.
const maxPooledBuffer = 64 << 10

func putCodec(c *codecState) {
	c.rd.Reset(nil)
	if c.buf.Cap() > maxPooledBuffer {
		return
	}
	codecPool.Put(c)
}

// Encode encodes v with MessagePack, the encoding of stored payloads and
// envelopes.
func Encode(v any) ([]byte, error) {
	// Integers and strings, the commonest payloads, are written by hand:
	// the same bytes, without the reflective encoder's type lookup.
	switch x := v.(type) {
	case int:
		return mpack.AppendInt(make([]byte, 0, 9), int64(x)), nil
	case int64:
		return mpack.AppendInt(make([]byte, 0, 9), x), nil
	case string:
		return mpack.AppendStr(make([]byte, 0, 5+len(x)), x), nil
	}
	c := codecPool.Get().(*codecState)
	c.buf.Reset()
	c.enc.Reset(&c.buf)
	c.enc.UseCompactInts(true)
	c.enc.SetSortMapKeys(true)
	if err := c.enc.Encode(v); err != nil {
		putCodec(c)
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	out := bytes.Clone(c.buf.Bytes())
	putCodec(c)
	return out, nil
}

// Decode decodes MessagePack data written by [Encode] into v, a pointer. It
// first checks that every length the data declares fits in it, so
// allocation is bounded by the input size; it rejects trailing bytes and
// deep nesting and never panics: every failure wraps [ErrCorrupt].
func Decode(data []byte, v any) (err error) {
	if len(data) > MaxEncodedSize {
		return fmt.Errorf("%w: %d bytes", ErrTooLarge, len(data))
	}
	if len(data) == 0 {
		return fmt.Errorf("%w: empty input", ErrCorrupt)
	}
	if decodeScalar(data, v) {
		return nil
	}
	if err := checkMsgpack(data); err != nil {
		return err
	}
	defer func() {
		// The msgpack decoder has no known panics on bad input; this keeps
		// the promise even if one is found.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, r)
		}
	}()
	c := codecPool.Get().(*codecState)
	c.rd.Reset(data)
	c.dec.Reset(&c.rd)
	if err := c.dec.Decode(v); err != nil {
		putCodec(c)
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	trailing := c.rd.Len()
	putCodec(c) // not reached after a panic: a decoder that panicked is dropped
	if trailing != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, trailing)
	}
	return nil
}
