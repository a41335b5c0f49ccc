package oracletest_test

import (
	"testing"

	"github.com/chronicleflow/chronicle/provider/oracle"
	"github.com/chronicleflow/chronicle/provider/oracle/oracletest"
)

func TestDSNSkipsLoudlyWithoutAServer(t *testing.T) {
	t.Setenv(oracletest.EnvDSN, "")
	t.Setenv("CI", "true")
	var skipped bool
	t.Run("needs a server", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		oracletest.DSN(t)
		t.Error("DSN returned without a server")
	})
	if !skipped {
		t.Fatal("without CHRONICLE_TEST_ORACLE_DSN a test must be skipped, under CI=true too")
	}
}

func TestPrefixesAreValidAndFresh(t *testing.T) {
	a, b := oracletest.Prefix(), oracletest.Prefix()
	if a == b {
		t.Fatalf("two prefixes are both %s", a)
	}
	for _, p := range []string{a, b} {
		if err := oracle.ValidatePrefix(p); err != nil {
			t.Errorf("prefix %s: %v", p, err)
		}
	}
}
