package oracle

// SetAfterCommit installs the test hook that runs after a round's commit;
// its error is returned as the round's.
func SetAfterCommit(s *Store, hook func() error) { s.afterCommit = hook }
