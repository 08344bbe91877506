// Package memory is an engine.Store that keeps everything in process
// memory: for tests, examples and library use where losing the state on exit
// is acceptable. Both it and Group, the reference shared store, keep the
// outbox of forward effects (engine.OutboxStore) in the same atomic step as
// the rest of a batch; Group's member handles also claim outboxes for
// their drainers (engine.OutboxClaimer) and keep each member's audit chain
// for retention and the audit sinks (engine.ChainKeeper).
//
// What each declares it does beyond engine.Store is in its Capabilities,
// fixed where it is made: a Store declares Trim, Cursors and Outbox; a
// Group's Member declares Shared, Chains, Outbox, Claims and Keeper. Both
// run the one conformance suite, storetest.Run, which chooses its cases
// from those declarations: a Store as a single-owner store that keeps
// nothing once closed (storetest.Features{}), a Group's members as a group
// that outlives its handles, whose members can be killed (Members,
// Durable, Kill).
//
// The store copies what it is given and what it hands out, so callers may
// reuse batch slices and change what they read. A Store is safe for
// concurrent use: scans run on a consistent view taken when they start and
// hold no lock while their callback runs, so commits proceed meanwhile.
package memory
