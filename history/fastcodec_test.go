package history

import (
	"bytes"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/query"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func genBytes(t *rapid.T, label string) []byte {
	if rapid.Bool().Draw(t, label+" nil") {
		return nil
	}
	return rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, label)
}

func genStr(t *rapid.T, label string) string {
	n := rapid.SampledFrom([]int{0, 1, 31, 32, 255, 256, 300}).Draw(t, label+" len")
	if n > 32 && !rapid.Bool().Draw(t, label+" long") {
		n = 5
	}
	s := rapid.StringN(0, 3, -1).Draw(t, label)
	for len(s) < n {
		s += "x"
	}
	return s
}

func genInt(t *rapid.T, label string) int64 {
	return rapid.OneOf(
		rapid.Int64Range(-40, 140), rapid.Int64Range(-70000, 70000),
		rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, math.MinInt32, math.MaxUint32, math.MaxUint32 + 1, -129, 255, 256, 65535, 65536}),
		rapid.Int64(),
	).Draw(t, label)
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

// genValues draws attribute values: real ones set the field of their
// type, but any mix must encode alike.
func genValues(t *rapid.T) SearchAttributeMap {
	switch rapid.IntRange(0, 4).Draw(t, "values form") {
	case 0:
		return nil
	case 1:
		return SearchAttributeMap{}
	}
	m := SearchAttributeMap{}
	for i := rapid.IntRange(1, 8).Draw(t, "values"); i > 0; i-- {
		v := query.Value{Type: query.Type(rapid.IntRange(0, 6).Draw(t, "value type"))}
		if rapid.Bool().Draw(t, "str") {
			v.Str = genStr(t, "str value")
		}
		if rapid.Bool().Draw(t, "int") {
			v.Int = genInt(t, "int value")
		}
		if rapid.Bool().Draw(t, "float") {
			v.Float = rapid.Float64().Draw(t, "float value")
		}
		v.Bool = rapid.Bool().Draw(t, "bool value")
		v.Time = genTime(t, "time value")
		if rapid.Bool().Draw(t, "list") {
			v.List = rapid.SliceOfN(rapid.String(), 0, 5).Draw(t, "list value")
		}
		m[genStr(t, "value name")] = v
	}
	return m
}

func genAttributes(t *rapid.T) Attributes {
	switch rapid.IntRange(0, 6).Draw(t, "type") {
	case 6:
		return &SearchAttributesUpserted{Attributes: genValues(t)}
	case 0:
		return &TurnStarted{}
	case 1:
		a := &ActivityScheduled{Name: genStr(t, "name"), Input: genBytes(t, "input"), Queue: genStr(t, "queue"), Timeout: time.Duration(genInt(t, "timeout"))}
		a.Retry = RetryPolicy{
			MaxAttempts: int(genInt(t, "attempts")), InitialInterval: time.Duration(genInt(t, "initial")),
			MaxInterval: time.Duration(genInt(t, "max")),
			Multiplier:  rapid.SampledFrom([]float64{0, 1, 2, 1.5, -3, math.Inf(1), math.SmallestNonzeroFloat64}).Draw(t, "multiplier"),
		}
		if rapid.Bool().Draw(t, "non-retryable") {
			a.Retry.NonRetryable = rapid.SliceOfN(rapid.String(), 0, 20).Draw(t, "types")
		}
		return a
	case 2:
		return &ActivityCompleted{Result: genBytes(t, "result"), Attempts: int(genInt(t, "attempts"))}
	case 3:
		return &ExecutionCompleted{Output: genBytes(t, "output")}
	case 4:
		a := &ExecutionStarted{Name: genStr(t, "name"), Version: genStr(t, "version"), Input: genBytes(t, "input"),
			BusinessKey: genStr(t, "key"), Trace: genStr(t, "trace"), ContinuedFrom: genStr(t, "from"), Subject: genStr(t, "subject")}
		if rapid.Bool().Draw(t, "parent") {
			a.Parent = &ParentRef{InstanceID: genStr(t, "pid"), ExecutionID: genStr(t, "pexec"), ScheduledSeq: genInt(t, "pseq")}
		}
		if rapid.Bool().Draw(t, "maps") {
			a.BusinessParts = rapid.MapOf(rapid.String(), rapid.String()).Draw(t, "parts")
			a.Tags = rapid.MapOf(rapid.String(), rapid.String()).Draw(t, "tags")
		}
		a.SearchAttributes = genValues(t)
		if rapid.Bool().Draw(t, "rerun") {
			a.RerunOf = &RerunRef{ExecutionID: genStr(t, "rexec"), FromSeq: genInt(t, "rseq"), Reason: genStr(t, "rreason"), Ticket: genStr(t, "rticket"), ActivitySeq: genInt(t, "ract")}
		}
		return a
	default:
		return &ActivityFailed{Failure: Failure{Message: genStr(t, "message")}, Attempts: int(genInt(t, "attempts"))}
	}
}

// normalize puts the times the reflective decoder gives in the local
// zone in UTC, as DecodeAttributes does.
func normalize(a Attributes) {
	if n, ok := a.(utcNormalizer); ok {
		n.normalizeUTC()
	}
}

// TestFastCodecMatchesReflective checks that the hand-written encoders
// write the reflective encoder's bytes and that decoding through the fast
// path returns what the reflective decoder returns.
func TestFastCodecMatchesReflective(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		a := genAttributes(t)
		want, err := Encode(a)
		require.NoError(t, err)
		got, err := EncodeAttributes(a)
		require.NoError(t, err)
		require.Equal(t, want, got, "%#v", a)
		if _, ok := appendAttributes(nil, a); ok {
			_, fast := decodeAttributes(a.EventKind(), want)
			// Empty byte slices are omitted, so all of these take the fast path.
			require.True(t, fast, "%#v", a)
		}
		slow := kindInfo[a.EventKind()].new()
		require.NoError(t, Decode(want, slow))
		normalize(slow)
		dec, err := DecodeAttributes(a.EventKind(), want)
		require.NoError(t, err)
		require.Equal(t, slow, dec)
	})
}

// TestFastDecodeFallsBack checks, on mutated encodings, that whatever the
// fast decoder accepts the reflective one decodes to the same value.
func TestFastDecodeFallsBack(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		a := genAttributes(t)
		data, err := Encode(a)
		require.NoError(t, err)
		data = append([]byte(nil), data...)
		for n := rapid.IntRange(0, 3).Draw(t, "mutations"); n > 0 && len(data) > 0; n-- {
			i := rapid.IntRange(0, len(data)-1).Draw(t, "at")
			switch rapid.IntRange(0, 2).Draw(t, "how") {
			case 0:
				data[i] = rapid.Byte().Draw(t, "byte")
			case 1:
				data = data[:i]
			default:
				data = append(data[:i:i], append([]byte{rapid.Byte().Draw(t, "insert")}, data[i:]...)...)
			}
		}
		fast, ok := decodeAttributes(a.EventKind(), data)
		if !ok {
			return
		}
		slow := kindInfo[a.EventKind()].new()
		require.NoError(t, Decode(data, slow), "the fast decoder accepted % x", data)
		normalize(slow)
		// A mutated float may read as NaN, which equals nothing, itself
		// included: both decoders must read the same bits.
		zeroNaNs(reflect.ValueOf(slow))
		zeroNaNs(reflect.ValueOf(fast))
		require.Equal(t, slow, fast, "% x", data)
	})
}

// zeroNaNs sets every NaN float reachable from v to 0.
func zeroNaNs(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			zeroNaNs(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			zeroNaNs(v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			zeroNaNs(v.Index(i))
		}
	case reflect.Float32, reflect.Float64:
		if math.IsNaN(v.Float()) && v.CanSet() {
			v.SetFloat(0)
		}
	}
}

// TestDeterministicIDIsUUIDv5 checks DeterministicID against the uuid
// package's name-based id it computes by hand.
func TestDeterministicIDIsUUIDv5(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		id, disc := rapid.String().Draw(t, "instance"), rapid.String().Draw(t, "discriminator")
		seq := rapid.Int64().Draw(t, "seq")
		want := uuid.NewSHA1(namespace, []byte(id+"\x00"+strconv.FormatInt(seq, 10)+"\x00"+disc)).String()
		require.Equal(t, want, DeterministicID(id, seq, disc))
	})
}

// TestScalarCodecMatchesReflective checks the hand-written paths of
// Encode and Decode for integers and strings against the reflective codec.
func TestScalarCodecMatchesReflective(t *testing.T) {
	t.Parallel()
	reflective := func(v any) []byte {
		c := codecPool.Get().(*codecState)
		c.buf.Reset()
		c.enc.Reset(&c.buf)
		c.enc.UseCompactInts(true)
		c.enc.SetSortMapKeys(true)
		require.NoError(t, c.enc.Encode(v))
		return bytes.Clone(c.buf.Bytes())
	}
	rapid.Check(t, func(rt *rapid.T) {
		n := genInt(rt, "n")
		s := genStr(rt, "s")
		require.Equal(t, reflective(int(n)), must(Encode(int(n))))
		require.Equal(t, reflective(n), must(Encode(n)))
		require.Equal(t, reflective(s), must(Encode(s)))
		var gotInt int
		var gotInt64 int64
		var gotStr string
		require.NoError(t, Decode(must(Encode(n)), &gotInt))
		require.NoError(t, Decode(must(Encode(n)), &gotInt64))
		require.NoError(t, Decode(must(Encode(s)), &gotStr))
		require.Equal(t, int(n), gotInt)
		require.Equal(t, n, gotInt64)
		require.Equal(t, s, gotStr)
		// Whatever the fast path accepts, the reflective decoder decodes
		// the same.
		data := rapid.SliceOfN(rapid.Byte(), 1, 10).Draw(rt, "data")
		var fast, slow int64
		if decodeScalar(data, &fast) {
			c := codecPool.Get().(*codecState)
			c.rd.Reset(data)
			c.dec.Reset(&c.rd)
			require.NoError(t, c.dec.Decode(&slow))
			require.Equal(t, slow, fast, "% x", data)
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
