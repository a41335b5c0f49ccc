// Package providertest is the conformance suite of Chronicle's provider
// contract: every provider runs [Exercise], and passing it is what makes a
// store a provider. The same cases run against every provider, memory
// included, with no weakening for any of them; a new behaviour of the
// contract means a new case here, not a provider-local test.
//
// # Using the suite
//
// A provider's test calls [Exercise] with a [Factory] that returns a fresh,
// empty store for each case and registers its own clean-up:
//
//	func TestConformance(t *testing.T) {
//		providertest.Exercise(t, func(t *testing.T) provider.Store {
//			return memory.New(memory.Options{})
//		})
//	}
//
// A provider backed by a server creates a schema or database per call and
// drops it in a [testing.T.Cleanup] function, so cases never see each
// other's data and may run in parallel. A provider with both modes calls
// [Exercise] once per mode.
//
// # What is checked
//
// The suite reads the store's [provider.Mode]: a transactional store must
// implement [provider.TxStore], a peek-lock store [provider.LeaseStore]. It runs
// the cases shared by both modes — queues and delayed visibility, idempotent
// enqueue and append, history loading, projections, activity claims and
// their fencing, dead letters, exclusive instance locking under concurrent
// workers — and the cases of the store's mode: round atomicity and SKIP
// LOCKED dequeues for transactional stores, leases, lease expiry and zombie
// rejection for peek-lock stores. Stores that implement [provider.Notifier] also
// have their wake-up hints checked, and stores of several partitions
// ([provider.Partitioned]) the Partitions of their dequeue, claim and next
// visible time.
//
// Every case passes the time explicitly: a fixed base time in UTC, truncated
// to microseconds, moved forward by hand. The stores never read a clock, and
// the suite never sleeps; it waits on channels with a timeout.
package providertest
