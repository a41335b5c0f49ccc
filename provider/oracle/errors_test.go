package oracle

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/chronicleflow/chronicle/provider"
)

// oraErr is an error like godror's: an ORA- code behind a Code method.
type oraErr struct{ code int }

func (e *oraErr) Error() string { return fmt.Sprintf("ORA-%05d: test", e.code) }
func (e *oraErr) Code() int     { return e.code }

func TestTranslate(t *testing.T) {
	wrapped := func(code int) error { return fmt.Errorf("exec: %w", &oraErr{code}) }
	for _, tc := range []struct {
		name    string
		err     error
		want    []error
		notWant []error
	}{
		{"no rows", sql.ErrNoRows, []error{provider.ErrNotFound, sql.ErrNoRows}, []error{ErrRetryable}},
		{"unique violation", wrapped(1), []error{provider.ErrConflict}, []error{ErrRetryable}},
		{"deadlock", wrapped(60), []error{ErrRetryable}, []error{provider.ErrConflict, ErrConnectionLost}},
		{"serialization failure", wrapped(8177), []error{ErrRetryable}, []error{ErrConnectionLost}},
		{"resource busy", wrapped(54), []error{ErrRetryable}, nil},
		{"wait timeout", wrapped(30006), []error{ErrRetryable}, nil},
		{"end of file on channel", wrapped(3113), []error{ErrConnectionLost, ErrRetryable}, []error{ErrOutcomeUnknown}},
		{"not connected", wrapped(3114), []error{ErrConnectionLost, ErrRetryable}, nil},
		{"lost contact", wrapped(3135), []error{ErrConnectionLost, ErrRetryable}, nil},
		{"TNS connection closed", wrapped(12537), []error{ErrConnectionLost, ErrRetryable}, nil},
		{"session killed", wrapped(28), []error{ErrConnectionLost, ErrRetryable}, nil},
		{"bad connection", fmt.Errorf("exec: %w", driver.ErrBadConn), []error{ErrConnectionLost, ErrRetryable}, nil},
		{"other error", wrapped(904), nil, []error{ErrRetryable, provider.ErrConflict, provider.ErrNotFound}},
		{"context", context.Canceled, []error{context.Canceled}, []error{ErrRetryable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := translate(tc.err)
			if !errors.Is(got, tc.err) {
				t.Errorf("translate(%v) = %v loses the driver's error", tc.err, got)
			}
			for _, w := range tc.want {
				if !errors.Is(got, w) {
					t.Errorf("translate(%v) = %v, want it to wrap %v", tc.err, got, w)
				}
			}
			for _, w := range tc.notWant {
				if errors.Is(got, w) {
					t.Errorf("translate(%v) = %v wraps %v", tc.err, got, w)
				}
			}
			if code := oracleCode(got); code != oracleCode(tc.err) {
				t.Errorf("the ORA code is lost: %d, want %d", code, oracleCode(tc.err))
			}
		})
	}
	if translate(nil) != nil || translateCommit(nil) != nil || failf(nil, "x") != nil {
		t.Error("nil must stay nil")
	}
}

func TestTranslateCommit(t *testing.T) {
	for _, err := range []error{&oraErr{3113}, &oraErr{3135}, &oraErr{12537}, &oraErr{28}, driver.ErrBadConn, fmt.Errorf("Commit: %w", driver.ErrBadConn)} {
		got := translateCommit(err)
		if !errors.Is(got, ErrOutcomeUnknown) || !errors.Is(got, ErrRetryable) {
			t.Errorf("commit error %v: %v, want outcome unknown and retryable", err, got)
		}
	}
	got := translateCommit(&oraErr{2091}) // transaction rolled back: a deferred constraint
	if errors.Is(got, ErrOutcomeUnknown) {
		t.Errorf("a commit the server refused has a known outcome: %v", got)
	}
	if !errors.Is(translateCommit(&oraErr{60}), ErrRetryable) {
		t.Error("a deadlock at commit is retryable")
	}
}

func TestFailfTranslatesAndNames(t *testing.T) {
	err := failf(&oraErr{1}, "enqueue message %s", "m-1")
	if !errors.Is(err, provider.ErrConflict) || err.Error() != "oracle: enqueue message m-1: provider: conflicting history append: ORA-00001: test" {
		t.Fatalf("failf: %v", err)
	}
}

func TestDDLErrorClasses(t *testing.T) {
	for _, code := range []int{955, 1408, 1430, 2260, 2275, 2264, 24001, 24006} {
		if !alreadyExists(&oraErr{code}) {
			t.Errorf("ORA-%05d says the object exists", code)
		}
	}
	for _, code := range []int{942, 2289, 24002, 24010, 4043} {
		if !alreadyGone(&oraErr{code}) {
			t.Errorf("ORA-%05d says the object is gone", code)
		}
	}
	if alreadyExists(&oraErr{1}) || alreadyGone(&oraErr{1}) || isDuplicate(&oraErr{955}) || !isDuplicate(fmt.Errorf("x: %w", &oraErr{1})) {
		t.Error("error classes overlap")
	}
}
