// Package killtest holds the test that kills Chronicle worker processes
// with SIGKILL while they share one PostgreSQL schema, restarts them, and
// checks that nothing was lost or duplicated. The test binary is its own
// worker: run with CHRONICLE_KILLTEST_WORKER set, it runs an engine until
// it is killed.
package killtest
