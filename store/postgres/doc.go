// Package postgres is the engine.SharedStore on a PostgreSQL server: the
// members of a consumer group share one schema (Options.Schema, default
// "replayguard") and each member writes its own audit chain.
//
// Every Update is one transaction: the touched source and entity rows are
// locked with SELECT … FOR UPDATE in one canonical order (sources by id,
// then entities by name, both bytewise), and those absent are claimed,
// inserted in the same order with an empty state that the Update writes
// over or deletes before it commits; the keys are read by key, the engine
// decides, and the batch is written keys first: its keys and audit records
// by COPY (the keys by a statement instead when one of them was read as
// present: an expired key is written over), the other rows with array
// parameters. A
// member whose batch names a row another member is creating thus waits
// for it, as for a locked row, and reads it once it is there. A key that
// another member inserted in between is a lost race: the transaction is
// rolled back and the batch decided again on fresh rows, a bounded number
// of times, as it is on a serialization failure or a deadlock. A batch
// costs about eight round trips whatever its size (begin, the locking
// reads, the keys' COPY, the writes, the records' COPY, commit; a COPY is
// two). SharedStats counts the batches that found a row locked
// by another member (LockWaits: rows are first asked for with NOWAIT, and
// waited for after that fails) or created by one while they read it.
//
// An Update asked with engine.Reads.SkipHeld locks with SKIP LOCKED
// instead: a row another transaction holds (or created while it read) is
// neither read nor locked nor claimed but named in Rows.Held, and the
// engine decides only the messages that touch no such row, leaving the
// rest to a batch after it (SharedStats.HeldRows counts those rows, once a
// batch that left them out commits). So is a row another transaction is
// still creating: its claim's advisory lock is tried, not waited for.
// Those advisory locks, one a row the batch creates, are held until it
// commits: a batch whose locks the server's lock table cannot hold ("out
// of shared memory", SQLSTATE 53200) fails with engine.ErrLockTable,
// naming max_locks_per_transaction, with nothing written, and the engine
// decides it again in smaller parts.
//
// A route's sql effects (engine.SQLStatement) run in the same transaction,
// after the writes found the batch's keys this member's: one round trip
// more, in one pipeline behind a savepoint, each statement prepared once
// per connection, every argument sent as text for the server to parse. A
// statement failing with SQLSTATE class 20, 21, 22, 23 or 54, or with an
// exception a trigger raised (P0001 to P0004, or a code of a class the
// server does not define), is its message's fault:
// the transaction is rolled back and the batch decided again with that
// message quarantined (Rows.Refused), its other refusals found first with a
// savepoint per message; any other failure commits nothing and is returned.
// A commit that fails the same way broke a constraint checked at commit:
// the batch runs again with each message's statements checked at their
// end, which finds the message. The statements of every batch start by
// taking an advisory lock of the group's, shared; a batch aborted for a
// deadlock (two members' statements taking the user's rows in different
// orders) is retried with it taken alone, so that it cannot deadlock with
// another member's statements again.
//
// Open refuses a server that can lose a commit it acknowledged
// (synchronous_commit = off, fsync = off) unless Options.AllowNotDurable
// says so, creates or migrates the versioned schema, and takes the
// member's lease, which a background task renews; every write checks, in
// its transaction, that this handle still holds it. One member at a time
// prunes the group's keys by age and count (a session advisory lock).
//
// A member's handle checks every new connection, in one round trip, so that
// a reconnect after a failover checks again: a standby (a server in
// recovery) is refused, and so is a primary with streaming standbys that a
// commit does not wait for (synchronous_standby_names empty, or
// synchronous_commit = local or off), on which a failover loses
// acknowledged commits, unless Options.AllowAsyncReplication says so
// (SharedStats' AsyncReplication then reports it). Every Update and Commit
// is bounded by Options.CommitTimeout: a commit that waits for a
// synchronous standby that never answers fails with an error that says so,
// and that the commit may or may not have happened. Each new connection of a
// member's handle also sets client_connection_check_interval (PostgreSQL 14
// and later), so that the server ends a session whose member has gone
// while its statement waits, rather than leaving it to hold the member's
// rows for as long as the lock it waits for is held. Each transaction of
// Update and Commit has the server end its session once it has waited
// longer than Options.CommitTimeout for the member's next statement (a
// member's host that dies in the middle of a batch sends no end of its
// connection; see inTx).
//
// The schema is the numbered migrations in migrations/, NNN_name.up.sql
// files embedded in the build as River keeps its own: Open applies those a
// schema lacks, in order, in one transaction under an advisory lock (members
// opening at once wait for each other), and records in the schema's
// schema_version table how many have run. A schema of a newer version is
// refused; a read-only handle only checks the version.
//
// The outbox of forward effects (schema version 2) is written in the
// batch's own transaction: each member's pending entries, the held ones,
// and the claims by which each member's outbox is drained by one process
// at a time, a dead member's by another once its lease expired
// (engine.OutboxClaimer; a claim lasts Options.LeaseTTL).
//
// What audit retention and the audit sinks keep of each member's chain
// (schema version 3, engine.ChainKeeper) are rows of their own, never the
// member's row, so that they never wait for its batches: the chain's base
// (the last record a trim deleted; the head stays in the member's row, also
// when every record was trimmed), each sink's cursor on it, and the claims
// that hand a member's chain to one process at a time, by the outbox
// claims' rules and statements.
//
// A Store declares, in its Capabilities, a group's store (Shared, Chains),
// the outbox and its claims (Outbox, Claims), the chains' retention,
// cursors and claims (Keeper), SharedStats (Stats), sql effects run in the
// batch's transaction (SQL), the routes' key derivations (Routes), the
// members of the MQTT share group (Share, in the leases table), the
// adoption of a gone member's session (Adopt, share_claims) and the
// shares and adoptions of the paths of members of mqtt.feeds (Paths,
// share_paths and share_path_claims, schema version 14), a share whose
// connection was lost marked so for its adoption (leases.share_lost and
// share_paths.lost, schema version 16). Its
// conformance test runs storetest.Run with Features{Members, Durable, Kill},
// a schema per case.
//
// A Store is safe for concurrent use; its connections come from a pool.
package postgres
