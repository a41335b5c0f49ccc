package postgres

import "github.com/chronicleflow/chronicle/provider"

// SetAfterCommit installs the test hook that runs after a round's commit;
// its error is returned as the round's.
func SetAfterCommit(s *Store, hook func() error) { s.afterCommit = hook }

// BackendPID returns the server process id of a round's connection.
func BackendPID(tx provider.Tx) uint32 { return tx.(*roundTx).tx.Conn().PgConn().PID() }
