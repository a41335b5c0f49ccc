package oracle

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle/provider"
)

func TestOptionsDefaults(t *testing.T) {
	o, err := Options{DSN: `user="app" password="x" connectString="db/APP"`}.withDefaults()
	if err != nil {
		t.Fatalf("withDefaults: %v", err)
	}
	if o.Prefix != DefaultPrefix || o.Schema != "" || o.Mode != provider.ModeTransactional || o.Logger == nil || o.ListenWait != DefaultListenWait {
		t.Fatalf("defaults not filled in: %+v", o)
	}
	o, err = Options{DB: &sql.DB{}, Schema: "app_owner", Prefix: "wf$1"}.withDefaults()
	if err != nil {
		t.Fatalf("withDefaults: %v", err)
	}
	if o.Schema != "APP_OWNER" || o.Prefix != "WF$1" {
		t.Fatalf("names are not upper-cased: schema %q, prefix %q", o.Schema, o.Prefix)
	}
}

func TestOptionsNameEveryBadField(t *testing.T) {
	_, err := Options{
		DB: &sql.DB{}, DSN: "x", Schema: "1abc", Prefix: strings.Repeat("P", MaxPrefixLength+1),
		Mode: provider.ModePeekLock, ListenWait: 10 * time.Millisecond,
	}.withDefaults()
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("error %v does not wrap ErrInvalidOptions", err)
	}
	for _, field := range []string{"DB and DSN", "Schema", "Prefix", "Mode", "ListenWait"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
	if _, err := (Options{}).withDefaults(); err == nil || !strings.Contains(err.Error(), "one of DB and DSN") {
		t.Fatalf("missing connection: got %v", err)
	}
}

func TestValidateIdentifiers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema bool
		prefix bool
	}{
		{"CHRONICLE", true, true},
		{"app_1$#", true, true},
		{"A", true, true},
		{strings.Repeat("a", MaxPrefixLength), true, true},
		{strings.Repeat("a", MaxPrefixLength+1), true, false},
		{strings.Repeat("a", 128), true, false},
		{strings.Repeat("a", 129), false, false},
		{"", false, false},
		{"_app", false, false},
		{"1app", false, false},
		{"app-1", false, false},
		{"app 1", false, false},
		{`"APP"`, false, false},
		{"appé", false, false},
		{"table", false, false},
		{"USER", false, false},
		{"Select", false, false},
	} {
		if got := ValidateSchema(tc.name) == nil; got != tc.schema {
			t.Errorf("ValidateSchema(%q) ok = %v, want %v", tc.name, got, tc.schema)
		}
		if got := ValidatePrefix(tc.name) == nil; got != tc.prefix {
			t.Errorf("ValidatePrefix(%q) ok = %v, want %v", tc.name, got, tc.prefix)
		}
	}
}

func TestReservedWords(t *testing.T) {
	for _, w := range []string{"select", "FROM", "Level", "mode", "size", "by", "end", "begin"} {
		if !IsReserved(w) {
			t.Errorf("%q is reserved", w)
		}
	}
	for _, w := range []string{"chronicle", "name", "status", "queue", "token", "data"} {
		if IsReserved(w) {
			t.Errorf("%q is not reserved", w)
		}
	}
	if quote("app") != `"APP"` {
		t.Errorf("quote renders %s", quote("app"))
	}
}

func TestNewWithoutCgo(t *testing.T) {
	if cgoBuild {
		t.Skip("a cgo build has the driver")
	}
	_, err := New(t.Context(), Options{DSN: "x"})
	if !errors.Is(err, ErrNeedsCgo) {
		t.Fatalf("New without cgo: %v, want ErrNeedsCgo", err)
	}
	if _, err := New(t.Context(), Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("bad options are reported first: %v", err)
	}
}
