package engine

import (
	"context"
	"time"
)

// windows is the engine's one seam between its two kinds of store: where
// the windows a batch is decided on come from, and where the batch decided
// on them goes. decideOne, and all it calls, reads and writes the engine's
// windows (e.keys, e.sources, e.entities) and its pending batch the same
// way on both; a windows puts the state to decide on there before, and
// takes the batch away after.
//
//   - ownedWindows (owned.go), on a single-owner store: the engine's
//     memory, loaded once from Store.Load (and again after a failed
//     commit), which nothing else can change; each batch is sealed and
//     queued to the committer goroutine, which writes batches in order.
//   - sharedWindows (shared.go), on a consumer group's store: for each
//     batch the rows it touches, read under the store's concurrency
//     control by SharedStore.Update and written with it, then journaled.
//     Only such a store can lose commits behind the engine's back: it
//     finds and recovers them (storeloss.go).
//
// New chooses one, from Capabilities.Shared, and never asks again. Calls
// are per batch or per operator action, never per message: what a message
// needs (the member id, the quarantine id base, how versions are ordered)
// the windows set on the Engine when it is made.
type windows interface {
	// load (re)reads the committed state the engine decides on: at start
	// and before deciding again after a failed commit. A *StoreLoss error
	// leaves the engine open but stopped. Called with e.mu held, or from
	// New.
	load(ctx context.Context) error
	// submit decides msgs with decideOne and commits them; landed is
	// closed once the commit is durable or failed, and wait returns their
	// decisions then, or the commit's error. Called with e.mu held, after
	// ready.
	submit(ctx context.Context, msgs []Message) (landed <-chan struct{}, wait func() ([]Decision, error), err error)
	// act commits an operator's action: fill records it in the pending
	// batch, deciding msgs again (nil: none). Called with e.mu held, which
	// it may let go while the commit runs.
	act(ctx context.Context, msgs []Message, fill func(now time.Time)) error
	// actAlone is act for an action the store may refuse while every
	// batch before it commits (an operator's hold of an entry the drainer
	// may deliver meanwhile): it keeps e.mu until the commit ended, so no
	// batch decided on top of the action fails with it.
	actAlone(ctx context.Context, fill func(now time.Time)) error
	// member returns the member id whose chain the engine writes, and
	// whether the store is a consumer group's (group), whose other
	// members' outboxes it may also review; "" and false on a
	// single-owner store.
	member() (id string, group bool)
	// readState and readSources are ReadStateUpTo and ReadSourcesUpTo
	// (every row when limit <= 0); stats is Stats. Called without e.mu.
	readState(ctx context.Context, limit int) (states []EntityState, total int, err error)
	readSources(ctx context.Context, limit int) (SourceSelection, error)
	// countGaps is CountGaps. Called without e.mu.
	countGaps(ctx context.Context) (sources int, gaps int64, err error)
	stats() Stats
	losses
	// close stops what commits batches, after the queued commits. Called
	// once, without e.mu, after the engine is marked closed.
	close()
}

// losses finds and recovers the commits a store lost after the engine
// committed them (DESIGN.md, "A store that fails over"). A single-owner
// store never loses one behind its owner's back (noLosses).
type losses interface {
	// retryLoss tries again to recover a loss that stops deciding. Called
	// with e.mu held before deciding anything.
	retryLoss(ctx context.Context) error
	// checkStore is CheckStore.
	checkStore(ctx context.Context) error
	// acceptLoss is AcceptLoss, for a named operator. Called with e.mu
	// held.
	acceptLoss(ctx context.Context, operator string) (StoreLoss, error)
}

// noLosses are the losses of a single-owner store: none.
type noLosses struct{}

func (noLosses) retryLoss(context.Context) error  { return nil }
func (noLosses) checkStore(context.Context) error { return nil }
func (noLosses) acceptLoss(context.Context, string) (StoreLoss, error) {
	return StoreLoss{}, ErrNoLoss
}
