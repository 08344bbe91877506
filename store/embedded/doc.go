// Package embedded is the default engine.Store: a single bbolt file in a
// local directory, durable without a server.
//
// Every Commit is one bbolt write transaction, synced to disk before it
// returns, so a batch is either entirely on stable storage or not at all.
// Commits are meant to be grouped: one carrying a thousand decisions costs
// about the same two fsyncs as one carrying a single decision. The key
// window, source windows and entities are read in full by Load; the audit log
// and the quarantine are read by the scanners in position and ID order.
//
// A directory is held by one writing process at a time (a file lock): a
// second Open fails with engine.ErrLocked. Read-only opens share the
// directory with each other but not with a writer, so read commands against
// a running daemon should go through its HTTP API.
//
// A Store declares, in its Capabilities, audit retention (Trim), the audit
// sinks' cursors (Cursors), the outbox of forward effects (Outbox) and the
// routes' key derivations (Routes). Its
// conformance test runs storetest.Run with Features{Durable: true}: the
// suite reopens a directory, and checks its lock.
//
// A Store is safe for concurrent use. Reads run in their own transactions
// and never block a commit for longer than one chunk of a scan; commits are
// serialised.
package embedded
