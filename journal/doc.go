// Package journal keeps a consumer-group member's journal: on a local
// directory, outside the shared store, each batch the member committed —
// the chain head after it (the witness) and the raw deliveries it decided —
// synced to disk before any of them is acknowledged, for a bounded
// retention. When the store fails over to a replica that lacks the last
// commits, the engine finds its head behind the journal's and decides the
// lost deliveries again from it (engine.Journal).
//
//	j, err := journal.Open(journal.Dir("/var/lib/replayguard/journal", "replayguard-1"), journal.Options{Retention: 15 * time.Minute})
//	if err != nil { ... }
//	defer j.Close()
//	eng, err := engine.New(ctx, store, engine.Options{Routes: routes, Journal: j})
//
// Segments are files of length-prefixed, CRC-checked records; one that
// grows past Options.SegmentBytes or a quarter of the retention is closed,
// and closed segments whose newest record is older than the retention are
// deleted. Ages are measured by the records' own times, on the clock the
// engine gives them (the group's, on a store that reads its server's
// clock), never by this process's wall clock. A crash during an append leaves a torn record, which Open cuts
// off: that batch was never acknowledged.
//
// Concurrency: a Journal is safe for concurrent use; appends are serialised.
package journal
