// Package redis is a shared engine.Store on a Redis server, for the members
// of a consumer group (DESIGN.md, "Stores and consumer groups").
//
// Each batch is one read and one write. Update's read script locks the
// source windows and entities the batch touches and reads them and the
// batch's keys with their versions; the engine decides on them, and one
// server-side script checks that every key and row is still as it was read,
// that the row locks are still this Update's and that this handle still
// holds its member's lease, then writes keys, rows, audit records, the chain
// head and quarantine changes and deletes the locks, or writes nothing. When
// another member changed something in between, Update reads and decides
// again, a bounded number of times.
//
// The row locks only keep members whose batches share rows from losing
// races to each other (they take turns instead); the version checks are
// what makes a write correct, so a lock that expired or that a server
// restart forgot costs at most a race. A member waits for rows another
// holds (a release, published on the group's unlocked channel, ends the
// wait), for at most two lock TTLs (a third of the lease each); a member
// that dies holding locks delays the others by one TTL at most. Idempotency
// keys take no lock: the write checks that each is still absent.
//
// Open refuses a server that could lose an acknowledged write: the
// settings appendonly yes, appendfsync always and maxmemory-policy
// noeviction are required unless Options.AllowNotDurable says otherwise.
// Redis replicates asynchronously, so a member's store also refuses a
// replica, and a primary with connected replicas unless each commit waits
// for Options.WaitReplicas of them (WAIT, on the update script's own
// connection; a commit they do not acknowledge within Options.WaitTimeout
// fails) or Options.AllowAsyncReplication accepts the risk; every new
// connection is checked again, so a reconnect after a failover is too.
// store.url may name Sentinels (redis+sentinel://host:26379/MASTERNAME) to
// follow a failover. Options.CommitTimeout bounds each Update and Commit.
// Every key is under Options.Prefix, whose one hash tag keeps a group in one
// Redis Cluster slot. A member's lease fences a second process with the same
// member id; each member writes its own audit chain.
//
// Idempotency keys expire TTL after they are written (PX); a pruning task,
// run by one member at a time under a lock in the store, keeps at most
// about MaxEntries of them (whole batches of keys leave, oldest first). The
// pruning script deletes keys it finds in the index, which it cannot name
// in KEYS; they share the prefix's slot, so it runs on Redis Cluster too.
//
// The outbox of forward effects is written by the same update script, all
// or nothing, and never expires: each member's pending entries, in id
// order, and the held ones. A claim per member outbox, a key with the
// lease's TTL, hands it to one drainer at a time, a dead member's to
// another once its lease is gone (engine.OutboxClaimer).
//
// Each member's chain keeps, beside its records and head, what audit
// retention and the audit sinks need (engine.ChainKeeper): its base, the
// last record a trim dropped (one script checks the trim and drops the
// batches below it, storing the batch that straddles it again from there),
// each sink's cursor on it, and a claim per chain, taken by the outbox
// claims' script.
//
// A Store declares, in its Capabilities, a group's store (Shared, Chains),
// the outbox and its claims (Outbox, Claims), the chains' retention,
// cursors and claims (Keeper), SharedStats (Stats), the routes' key
// derivations (Routes), the members of the MQTT share group (Share), the
// adoption of a gone member's session (Adopt) and the shares and
// adoptions of the paths of members of mqtt.feeds (Paths); sql effects
// need a
// SQL store. Its conformance test runs storetest.Run with
// Features{Members, Durable, Kill}, a key prefix per case.
//
// A Store is safe for concurrent use. Its Update and Commit calls write one
// chain and are meant to come one at a time, as the engine makes them: two
// at once would write the same positions, and one fails with
// engine.ErrAuditGap.
package redis
