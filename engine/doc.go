// Package engine decides, for every delivery of an at-least-once feed,
// whether it is new, a proven duplicate, or something a person must look
// at, and commits each batch of decisions — window changes, effects, audit
// records, quarantine entries — to a Store in one atomic transaction.
//
// The pipeline, top to bottom:
//
//   - decode (kind.go, kindjson.go, decode.go, validjson.go): a route's
//     kind reads a delivery. A kind is a RouteKind: json is built in (one
//     pass over the payload validates the JSON and extracts only the
//     route's configured paths); Options.Kinds adds others, such as
//     package sparkplug's, whose deliveries a Placer places against their
//     source's committed state at decide time. Every kind is decided by
//     the same code below;
//   - identity (identity.go): a length-prefixed SHA-256 idempotency key over
//     producer fields, and a canonical digest of every value the route reads;
//   - decide (decide.go, keywindow.go, seqwindow.go): the key window (same
//     digest: duplicate; other digest: conflict), then for sequenced routes
//     the per-(route, source, epoch) RFC 6479 window;
//   - project (effects.go): add, set, max, min on entity state, for applied
//     messages only;
//   - record and commit (decide.go, chain.go, owned.go, sharedupdate.go):
//     hash-chained audit records, quarantine entries with raw bytes, one
//     Batch per commit.
//
// Both kinds of store are behind one seam, the engine's windows
// (windows.go), chosen once in New from Capabilities.Shared: on a
// single-owner store the windows are the engine's memory, loaded once
// from Store.Load, and each batch is sealed and queued to the committer
// goroutine (owned.go); on a shared store they are the rows a batch
// touches, read under the store's concurrency control for that batch by
// SharedStore.Update and written with it, then journaled (shared.go,
// shareddecide.go, sharedreads.go, sharedupdate.go, with storeloss.go for
// a store that fails over). Either way each message is
// decided by the same code, on the windows the seam put in place.
//
// Concurrency: an Engine is safe for concurrent use. Decisions are
// serialised; commits run in submission order (on a single-owner store on
// the engine's committer goroutine, which Close stops after the queued
// commits; on a shared store within Submit). A failed commit
// aborts every batch decided on top of it and the engine reloads the
// committed state before deciding again.
package engine
