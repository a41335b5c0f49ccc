package replay

import (
	"encoding/json"
	"fmt"

	"github.com/chronicleflow/chronicle/history"
)

// Codec encodes the user payloads of workflows and activities: inputs,
// results, signal payloads, custom status. An engine uses one codec for all
// of them; history keeps the encoded bytes.
type Codec interface {
	// Name identifies the codec ("msgpack", "json").
	Name() string
	// Encode encodes v.
	Encode(v any) ([]byte, error)
	// Decode decodes data into v, a pointer. Empty data leaves v as it is.
	Decode(data []byte, v any) error
}

// MsgpackCodec is the default codec: MessagePack, with the bounded,
// panic-free decoder of the history package.
type MsgpackCodec struct{}

// Name implements Codec.
func (MsgpackCodec) Name() string { return "msgpack" }

// Encode implements Codec.
func (MsgpackCodec) Encode(v any) ([]byte, error) { return history.Encode(v) }

// Decode implements Codec.
func (MsgpackCodec) Decode(data []byte, v any) error {
	if len(data) == 0 {
		return nil
	}
	return history.Decode(data, v)
}

// JSONCodec encodes payloads as JSON, readable in exports and by tools of
// other languages.
type JSONCodec struct{}

// Name implements Codec.
func (JSONCodec) Name() string { return "json" }

// Encode implements Codec.
func (JSONCodec) Encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", history.ErrInvalid, err)
	}
	return b, nil
}

// Decode implements Codec.
func (JSONCodec) Decode(data []byte, v any) error {
	if len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %v", history.ErrCorrupt, err)
	}
	return nil
}
