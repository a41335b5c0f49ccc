package history

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// jsonEvent is the exported form of an event: one JSON object per line.
// Payload is kept exactly (base64) so an export can be verified and
// replayed; Attributes is the decoded payload, for people and tools.
type jsonEvent struct {
	Seq           int64      `json:"seq"`
	InstanceID    string     `json:"instance_id"`
	ExecutionID   string     `json:"execution_id"`
	Kind          Kind       `json:"kind"`
	CorrelationID string     `json:"correlation_id,omitempty"`
	At            time.Time  `json:"at"`
	Actor         string     `json:"actor"`
	Attributes    Attributes `json:"attributes,omitempty"`
	Payload       string     `json:"payload"`
	PrevHash      string     `json:"prev_hash"`
	Hash          string     `json:"hash"`
}

// WriteJSONL writes events as JSON Lines, the export format of histories.
func WriteJSONL(w io.Writer, events []Event) error {
	enc := json.NewEncoder(w)
	for i := range events {
		e := &events[i]
		attrs, _ := e.Attributes() // undecodable payloads are still exported
		if err := enc.Encode(jsonEvent{
			Seq: e.Seq, InstanceID: e.InstanceID, ExecutionID: e.ExecutionID, Kind: e.Kind,
			CorrelationID: e.CorrelationID, At: e.At.UTC(), Actor: e.Actor, Attributes: attrs,
			Payload: base64.StdEncoding.EncodeToString(e.Payload), PrevHash: hex.EncodeToString(e.PrevHash), Hash: hex.EncodeToString(e.Hash),
		}); err != nil {
			return fmt.Errorf("export event %d: %w", e.Seq, err)
		}
	}
	return nil
}

// ReadJSONL reads events written by [WriteJSONL], skipping the
// checkpoint lines of [WriteCheckpointsJSONL]. Decoding errors name the
// line and wrap [ErrCorrupt]; lines are at most [MaxEncodedSize] bytes.
func ReadJSONL(r io.Reader) ([]Event, error) {
	events, _, err := readJSONL(r)
	return events, err
}

func readJSONL(r io.Reader) ([]Event, []CheckpointProof, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxEncodedSize)
	var out []Event
	var proofs []CheckpointProof
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if bytes.HasPrefix(sc.Bytes(), []byte(`{"checkpoint":`)) {
			var p CheckpointProof
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				return nil, nil, fmt.Errorf("%w: line %d: %v", ErrCorrupt, line, err)
			}
			proofs = append(proofs, p)
			continue
		}
		var je struct {
			jsonEvent
			Attributes json.RawMessage `json:"attributes,omitempty"`
		}
		if err := json.Unmarshal(sc.Bytes(), &je); err != nil {
			return nil, nil, fmt.Errorf("%w: line %d: %v", ErrCorrupt, line, err)
		}
		payload, err1 := base64.StdEncoding.DecodeString(je.Payload)
		prev, err2 := hex.DecodeString(je.PrevHash)
		hash, err3 := hex.DecodeString(je.Hash)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, nil, fmt.Errorf("%w: line %d: bad payload or hash encoding", ErrCorrupt, line)
		}
		e := Event{
			Seq: je.Seq, InstanceID: je.InstanceID, ExecutionID: je.ExecutionID, Kind: je.Kind,
			CorrelationID: je.CorrelationID, At: je.At.UTC(), Actor: je.Actor, Payload: payload,
		}
		if len(prev) > 0 {
			e.PrevHash = prev
		}
		if len(hash) > 0 {
			e.Hash = hash
		}
		if len(e.Payload) == 0 {
			e.Payload = nil
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return out, proofs, nil
}

// CheckpointProof is a checkpoint as an export carries it: without its
// leaves, with the exported instance's leaf and the leaf's inclusion
// proof, so that the export can be checked offline with a [Keyring].
type CheckpointProof struct {
	Checkpoint Checkpoint     `json:"checkpoint"`
	Leaf       CheckpointLeaf `json:"leaf"`
	Proof      InclusionProof `json:"proof"`
}

// NewCheckpointProof returns the proof of an instance's leaf in a stored
// checkpoint (which carries its leaves); ok is false when the checkpoint
// does not cover the instance.
func NewCheckpointProof(c *Checkpoint, instanceID string) (p CheckpointProof, ok bool) {
	leaf, proof, ok := c.Proof(instanceID)
	if !ok {
		return p, false
	}
	p.Checkpoint, p.Leaf, p.Proof = *c, leaf, *proof
	p.Checkpoint.Leaves = nil
	return p, true
}

// Verify checks the checkpoint's signature with keys and the leaf's
// inclusion in its root. Errors wrap ErrMalformedCheckpoint, ErrUnknownKey
// or ErrBadSignature.
func (p *CheckpointProof) Verify(keys *Keyring) error {
	c := p.Checkpoint
	if err := keys.check(); err != nil {
		return err
	}
	if err := c.verifyHeader(); err != nil {
		return err
	}
	if err := keys.verify(c.KeyID, c.SignedBytes(), c.Signature, c.Number); err != nil {
		return err
	}
	if p.Proof.Size != c.Size {
		return fmt.Errorf("%w: proof of %s is for a tree of %d leaves, checkpoint %d has %d", ErrMalformedCheckpoint, p.Leaf.InstanceID, p.Proof.Size, c.Number, c.Size)
	}
	return VerifyInclusion(c.Root, p.Leaf, &p.Proof)
}

// WriteCheckpointsJSONL writes checkpoint proofs as JSON Lines, one
// {"checkpoint":…,"leaf":…,"proof":…} object a line. Appended to the
// events of [WriteJSONL], they make an export that verifies offline;
// [ReadJSONL] skips them and [ReadExport] reads both.
func WriteCheckpointsJSONL(w io.Writer, proofs []CheckpointProof) error {
	enc := json.NewEncoder(w)
	for i := range proofs {
		if err := enc.Encode(&proofs[i]); err != nil {
			return fmt.Errorf("export checkpoint %d: %w", proofs[i].Checkpoint.Number, err)
		}
	}
	return nil
}

// ReadExport reads an export: the events of [WriteJSONL] and the
// checkpoint proofs of [WriteCheckpointsJSONL], in any order. Decoding
// errors name the line and wrap [ErrCorrupt].
func ReadExport(r io.Reader) ([]Event, []CheckpointProof, error) {
	return readJSONL(r)
}
