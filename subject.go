package chronicle

import (
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle/history"
	"github.com/chronicleflow/chronicle/internal/sealed"
	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// A data subject is the person (or party) whose personal data an instance
// carries, named by StartOptions.Subject. Every user payload of such an
// instance is stored encrypted with the subject's data key, which a
// [KeyProvider] keeps; [Engine.Erase] destroys the key, and with it every
// copy of those payloads: history, exports and archives keep the
// ciphertext, whose hash chain still verifies. See docs/audit.md, "Erasure
// by key".

// KeyProvider keeps the data keys of data subjects, each wrapped by a
// key-encryption key (KEK) it holds; it is the shape a key management
// service implements. [FileKeyProvider] keeps them in a directory. Its
// methods are called from the engine's workers and must be safe for
// concurrent use.
type KeyProvider interface {
	// DataKey returns the data key of subject. When the subject has none
	// it creates one if create is set and returns an error wrapping
	// [ErrNoDataKey] otherwise. For a subject whose key was destroyed it
	// returns an *[ErasedError], also when create is set: an erased
	// subject never gets a key again.
	DataKey(ctx context.Context, subject string, create bool) (DataKey, error)
	// DestroyKey destroys the data key of subject for good and remembers
	// the subject as erased. Destroying the key of an erased subject, or
	// of one that has none, succeeds.
	DestroyKey(ctx context.Context, subject string) error
	// Rotate re-wraps every data key under the current KEK, so that older
	// KEKs can be retired. The data keys, and so every stored payload,
	// stay as they are. It returns how many keys it re-wrapped.
	Rotate(ctx context.Context) (int, error)
}

// DataKey is a subject's data key: 32 bytes for AES-256-GCM, and the id
// every payload sealed with it records.
type DataKey struct {
	ID  string
	Key []byte
}

// ErrNoDataKey is wrapped by [KeyProvider.DataKey] when a subject has no
// key and none was to be created.
var ErrNoDataKey = errors.New("chronicle: no data key for subject")

// ErasedError reports a payload, or a start, of a data subject that was
// erased ([Engine.Erase]): its key is destroyed and the payload can no
// longer be read. Every read path returns it (results, custom status,
// projections, decoding, replays); a workflow command of the subject
// fails with it.
type ErasedError = history.ErasedError

// SealError reports a sealed payload that cannot be opened — a changed
// byte, a wrong key, a malformed envelope, a key provider that fails — or
// a payload that cannot be sealed.
type SealError struct {
	// Subject and InstanceID are those the envelope names, when it names
	// them.
	Subject    string
	InstanceID string
	Err        error
}

// Error implements error.
func (e *SealError) Error() string {
	return fmt.Sprintf("chronicle: sealed payload of subject %q (instance %s): %v", e.Subject, e.InstanceID, e.Err)
}

// Unwrap returns the underlying error.
func (e *SealError) Unwrap() error { return e.Err }

// SealedSubject reports the data subject a stored payload is sealed for,
// and false for a payload in plaintext (of an instance without a subject).
func SealedSubject(payload []byte) (string, bool) {
	if !sealed.Is(payload) {
		return "", false
	}
	h, err := sealed.Parse(payload)
	if err != nil {
		return "", false
	}
	return h.Subject, true
}

// keyCacheTTL is how long an engine keeps a subject's data key in memory
// after reading it from its KeyProvider. An erasure by another process
// takes effect on this one within it.
const keyCacheTTL = time.Minute

// payloadCodec is the codec the engine decodes user payloads with: the
// configured codec, after opening a sealed payload. It seals the payloads
// of instances with a subject.
type payloadCodec struct {
	Codec
	keys KeyProvider
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]*cachedKey
}

type cachedKey struct {
	id      string
	aead    cipher.AEAD
	expires time.Time
}

func newPayloadCodec(c Codec, keys KeyProvider) *payloadCodec {
	return &payloadCodec{Codec: c, keys: keys, now: time.Now, cache: map[string]*cachedKey{}}
}

// Decode implements Codec: a sealed payload is opened first.
func (p *payloadCodec) Decode(data []byte, v any) error {
	if sealed.Is(data) {
		var err error
		if data, err = p.open(context.Background(), data); err != nil {
			return err
		}
	}
	return p.Codec.Decode(data, v)
}

// key returns the AEAD of subject's data key.
func (p *payloadCodec) key(ctx context.Context, subject string, create bool) (*cachedKey, error) {
	now := p.now()
	p.mu.Lock()
	k := p.cache[subject]
	p.mu.Unlock()
	if k != nil && now.Before(k.expires) {
		return k, nil
	}
	if p.keys == nil {
		return nil, errors.New("the engine has no KeyProvider (Options.Keys)")
	}
	dk, err := p.keys.DataKey(ctx, subject, create)
	if err != nil {
		return nil, err
	}
	aead, err := sealed.NewAEAD(dk.Key)
	if err != nil {
		return nil, err
	}
	k = &cachedKey{id: dk.ID, aead: aead, expires: now.Add(keyCacheTTL)}
	p.mu.Lock()
	p.cache[subject] = k
	p.mu.Unlock()
	return k, nil
}

// forget drops subject's key from the cache.
func (p *payloadCodec) forget(subject string) {
	p.mu.Lock()
	delete(p.cache, subject)
	p.mu.Unlock()
}

// seal returns b sealed for subject by instanceID; b as it is when subject
// is empty or b is sealed already (a payload passed on from another
// instance keeps its subject). An empty b is sealed too: an activity's
// input names the subject its result is sealed for.
func (p *payloadCodec) seal(ctx context.Context, subject, instanceID string, b []byte) ([]byte, error) {
	if subject == "" || sealed.Is(b) {
		return b, nil
	}
	k, err := p.key(ctx, subject, true)
	if err != nil {
		return nil, sealFailure(subject, instanceID, err)
	}
	out, err := sealed.Seal(k.aead, subject, instanceID, k.id, b)
	if err != nil {
		return nil, &SealError{Subject: subject, InstanceID: instanceID, Err: err}
	}
	return out, nil
}

// open returns the plaintext of envelope b.
func (p *payloadCodec) open(ctx context.Context, b []byte) ([]byte, error) {
	v, err := sealed.ParseView(b)
	if err != nil {
		return nil, &SealError{Err: err}
	}
	// Looked up by the envelope's bytes first: no copy of the subject.
	p.mu.Lock()
	k := p.cache[string(v.Subject)]
	p.mu.Unlock()
	if k == nil || !p.now().Before(k.expires) {
		k, err = p.key(ctx, string(v.Subject), false)
	}
	if err != nil {
		return nil, sealFailure(string(v.Subject), string(v.InstanceID), err)
	}
	if k.id != string(v.KeyID) {
		return nil, &SealError{Subject: string(v.Subject), InstanceID: string(v.InstanceID), Err: fmt.Errorf("sealed with key %q, the subject's key is %q", v.KeyID, k.id)}
	}
	pt, err := sealed.Open(k.aead, b)
	if err != nil {
		return nil, &SealError{Subject: string(v.Subject), InstanceID: string(v.InstanceID), Err: err}
	}
	return pt, nil
}

func sealFailure(subject, instanceID string, err error) error {
	var erased *ErasedError
	if errors.As(err, &erased) {
		return erased
	}
	return &SealError{Subject: subject, InstanceID: instanceID, Err: err}
}

// SubjectAttribute is the search attribute (a keyword) that holds an
// instance's data subject, declared by every engine with Options.Keys:
// `data_subject = 'C-0815'` finds the instances of a subject.
const SubjectAttribute = history.SubjectAttribute

// sealFor seals payload b of instanceID for subject (nothing to do when
// subject is empty).
func (e *Engine) sealFor(subject, instanceID string, b []byte) ([]byte, error) {
	if subject == "" {
		return b, nil
	}
	return e.payloads.seal(context.Background(), subject, instanceID, b)
}

// startSubject checks the subject of a start and records it among its
// search attributes.
func (e *Engine) startSubject(c *checkedStart) error {
	o := &c.opts
	if _, ok := o.SearchAttributes[SubjectAttribute]; ok && e.opts.Keys != nil {
		return invalid("search attribute %s is set by StartOptions.Subject", SubjectAttribute)
	}
	if o.Subject == "" {
		return nil
	}
	if e.opts.Keys == nil {
		return invalid("StartOptions.Subject needs an engine with Options.Keys")
	}
	if err := e.validateID("subject", o.Subject); err != nil {
		return err
	}
	if c.attrs == nil {
		c.attrs = history.SearchAttributeMap{}
	}
	c.attrs[SubjectAttribute] = query.Value{Type: query.Keyword, Str: o.Subject}
	return nil
}

// sealForInstance seals payload b, which the client API sends to
// instanceID, for the instance's data subject (read from its record, or
// its queued start); b as it is without Options.Keys.
func (e *Engine) sealForInstance(ctx context.Context, instanceID string, b []byte) ([]byte, error) {
	if e.opts.Keys == nil || b == nil {
		return b, nil
	}
	rec, start, err := e.find(ctx, instanceID, false, nil)
	if err != nil {
		return nil, err
	}
	subject := ""
	switch {
	case rec != nil:
		subject = rec.Attributes[SubjectAttribute].Str
	case start != nil:
		a, err := history.DecodeAttributes(start.Kind, start.Payload)
		if err != nil {
			return nil, err
		}
		if s, ok := a.(*history.ExecutionStarted); ok {
			subject = s.Subject
		}
	}
	return e.sealFor(subject, instanceID, b)
}

// ErasureWorkflow is the built-in workflow whose instances record
// erasures: every engine registers it. Its input, in plaintext, is the
// [ErasureRecord]; its start event's actor is who erased; it completes at
// once.
const ErasureWorkflow = "chronicle.erasure"

// EraseOptions say who erases a data subject and why; Reason and Actor are
// required.
type EraseOptions struct {
	Reason string
	// Actor is the user who erases, recorded as "user:<Actor>".
	Actor string
	// Ticket is the request's reference (a data-protection request id).
	Ticket string
}

// ErasureRecord is what an erasure records: the input of its
// [ErasureWorkflow] instance.
type ErasureRecord struct {
	Subject string `msgpack:"subject" json:"subject"`
	Reason  string `msgpack:"reason" json:"reason"`
	Ticket  string `msgpack:"ticket,omitempty" json:"ticket,omitempty"`
	// Instances are the instances of the subject the erasure found, and
	// Terminated those of them it terminated (they were running).
	Instances  []string `msgpack:"instances,omitempty" json:"instances,omitempty"`
	Terminated []string `msgpack:"terminated,omitempty" json:"terminated,omitempty"`
}

// EraseReport is what [Engine.Erase] did.
type EraseReport struct {
	ErasureRecord
	// RecordID is the instance of ErasureWorkflow that records it.
	RecordID string
}

// Erase erases a data subject: it finds the subject's instances (by
// [SubjectAttribute]), records the erasure as an instance of
// [ErasureWorkflow] (who, why, which instances), terminates those still
// running, and destroys the subject's data key with Options.Keys. From
// then on every payload of the subject, wherever it is stored or copied,
// reads as an *[ErasedError]; history, its hash chain and checkpoints are
// untouched and still verify. A start with the subject is refused.
//
// Erase is idempotent: run it again after an error. An instance under a
// legal hold stops it before anything is done. Engines on other nodes
// keep a key they read in memory for at most a minute.
func (e *Engine) Erase(ctx context.Context, subject string, o EraseOptions) (*EraseReport, error) {
	if e.opts.Keys == nil {
		return nil, invalid("Erase needs an engine with Options.Keys")
	}
	if err := e.validateID("subject", subject); err != nil {
		return nil, err
	}
	if o.Reason == "" || o.Actor == "" {
		return nil, invalid("an erasure needs a reason and an actor")
	}
	if err := checkControl(o.Reason, &ControlOptions{Actor: o.Actor, Ticket: o.Ticket}); err != nil {
		return nil, err
	}
	rep := &EraseReport{ErasureRecord: ErasureRecord{Subject: subject, Reason: o.Reason, Ticket: o.Ticket}}
	where := &query.Cmp{Field: query.Field{Name: SubjectAttribute, Type: query.Keyword}, Op: query.Eq, Value: query.Value{Type: query.Keyword, Str: subject}}
	var running []string
	for after := ""; ; {
		recs, err := e.listInstances(ctx, &provider.ListInstancesParams{Where: where, AfterID: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if err := e.checkNotHeld(ctx, r.InstanceID); err != nil {
				return nil, err
			}
			rep.Instances = append(rep.Instances, r.InstanceID)
			if !r.Status.Terminal() {
				running = append(running, r.InstanceID)
			}
		}
		if len(recs) < 500 {
			break
		}
		after = recs[len(recs)-1].InstanceID
	}
	rep.Terminated = running
	id, err := e.Start(ctx, ErasureWorkflow, rep.ErasureRecord, &StartOptions{BusinessKey: subject, Actor: o.Actor})
	if err != nil {
		return nil, fmt.Errorf("record the erasure of %s: %w", subject, err)
	}
	rep.RecordID = id
	for _, id := range running {
		err := e.Terminate(ctx, id, "data subject erased: "+o.Reason, &ControlOptions{Actor: o.Actor, Ticket: o.Ticket})
		if err != nil && !errors.Is(err, ErrInstanceNotRunning) {
			return nil, fmt.Errorf("terminate %s: %w", id, err)
		}
	}
	if err := e.opts.Keys.DestroyKey(ctx, subject); err != nil {
		return nil, fmt.Errorf("destroy the key of %s: %w", subject, err)
	}
	e.payloads.forget(subject)
	return rep, nil
}

// registerErasure registers the workflow that records erasures.
func (e *Engine) registerErasure() error {
	return RegisterWorkflow(e, ErasureWorkflow, func(ctx *Context, r ErasureRecord) (struct{}, error) {
		return struct{}{}, nil
	})
}

// Unseal returns the plaintext of a payload sealed for a data subject
// (still encoded with the codec), and a payload that is not sealed as it
// is. An erased subject's payload is an *[ErasedError], one that does not
// open a *[SealError]. Tools that render payloads without decoding them
// use it.
func (e *Engine) Unseal(payload []byte) ([]byte, error) {
	if !sealed.Is(payload) {
		return payload, nil
	}
	return e.payloads.open(context.Background(), payload)
}

// ErasedText is how tools show a payload that cannot be read: "erased"
// for an erased subject's, and what went wrong otherwise.
func ErasedText(err error) string {
	var erased *ErasedError
	if errors.As(err, &erased) {
		return "<erased: data subject " + erased.Subject + ">"
	}
	var se *SealError
	if errors.As(err, &se) {
		return "<sealed for data subject " + se.Subject + ": " + se.Err.Error() + ">"
	}
	return "<" + err.Error() + ">"
}
