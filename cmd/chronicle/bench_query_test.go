package main

import "testing"

// TestBenchQueryMistakes: --query needs a PostgreSQL store and a preload
// (or a schema holding one).
func TestBenchQueryMistakes(t *testing.T) {
	golden(t, "bench_query_memory", exitUsage, hooks{}, "bench", "--query", "--preload", "10")
	golden(t, "bench_query_no_preload", exitUsage, hooks{}, "--store", "postgres://127.0.0.1:1/none", "bench", "--query")
}
