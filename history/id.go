package history

import (
	"crypto/sha1"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// MaxIDLength bounds user-given ids, in bytes.
const MaxIDLength = 200

// ValidateID checks a user-given id (instance id, task id, idempotency key,
// user id): non-empty, at most [MaxIDLength] bytes, valid UTF-8 and made of
// printable characters without spaces at either end. The error wraps
// [ErrInvalid] and names what is wrong.
func ValidateID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(id) > MaxIDLength:
		return fmt.Errorf("%w: %s is %d bytes, at most %d allowed", ErrInvalid, what, len(id), MaxIDLength)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	}
	for i, r := range id {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: %s has a non-printable character at byte %d", ErrInvalid, what, i)
		}
	}
	if r, _ := utf8.DecodeRuneInString(id); unicode.IsSpace(r) {
		return fmt.Errorf("%w: %s starts with a space", ErrInvalid, what)
	}
	if r, _ := utf8.DecodeLastRuneInString(id); unicode.IsSpace(r) {
		return fmt.Errorf("%w: %s ends with a space", ErrInvalid, what)
	}
	return nil
}

// NewID returns a new random, time-ordered id (UUIDv7).
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's random source fails.
		return uuid.NewString()
	}
	return id.String()
}

// namespace of deterministic ids, fixed forever.
var namespace = uuid.MustParse("6f1c3a8e-2b7d-4f5e-9a61-3c0d8e4b7a20")

// DeterministicID derives an id from an instance id, a sequence number and
// a discriminator; replaying the same history yields the same id.
func DeterministicID(instanceID string, seq int64, discriminator string) string {
	// uuid.NewSHA1(namespace, instanceID NUL seq NUL discriminator),
	// hashed from a buffer on the stack: rounds derive several ids each.
	var buf [256]byte
	b := append(buf[:0], namespace[:]...)
	b = append(append(b, instanceID...), 0)
	b = append(strconv.AppendInt(b, seq, 10), 0)
	b = append(b, discriminator...)
	sum := sha1.Sum(b)
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return u.String()
}

// CleanText returns s with every NUL byte and invalid UTF-8 sequence
// replaced by U+FFFD: stores keep text columns (errors, reasons) that
// cannot hold them, and the engine records error texts from user code in
// this form rather than fail the round that records them.
func CleanText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
