// Package memory is Chronicle's embedded provider: a complete store kept in
// process memory, for development, demos, tests and single-process
// deployments whose state may be lost on exit.
//
// It implements both modes of the round contract. By default rounds are
// transactional ([provider.TxStore]): a round's writes are staged and applied
// together at commit, and the instance stays locked until then. With
// [Options].Mode set to [provider.ModePeekLock] it behaves like a store without
// transactions ([provider.LeaseStore]): instances are leased with a token and a
// fencing epoch, and every step is applied on its own.
//
// The store never reads a clock: every time comes from the caller, so a test
// drives time with a [round.ManualClock]. [Options].Fault injects failures
// into any operation, before its effect or after it (the effect happened,
// the caller sees an error), which is how tests model lost connections and
// commits whose outcome is unknown. [Store.WorkHint] closes a channel when
// work is enqueued, so workers sleep without polling.
//
// Searches (ListInstances under a Where, CountInstances,
// ListCustomProjections) evaluate the filter with [query.Match] over every
// instance record: a scan, the reference the other providers' native
// queries are checked against. Records are copied in and out, search
// attributes included, so a caller never shares a map or slice with the
// store.
package memory
