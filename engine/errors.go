package engine

import "errors"

// Errors returned by the engine and by stores. Permanent errors concern the
// input and are never retried; a store error other than these is transient:
// the source should redeliver (not acknowledge) and retry with backoff.
var (
	// ErrClosed is returned by a store or engine used after Close.
	ErrClosed = errors.New("replayguard: closed")
	// ErrNotFound is returned for an unknown quarantine entry, and for an
	// outbox entry that is not held (see Batch.OutboxResolved).
	ErrNotFound = errors.New("replayguard: not found")
	// ErrLocked is returned when another process holds an embedded store.
	ErrLocked = errors.New("replayguard: store locked by another process")
	// ErrConfig is returned for an invalid engine configuration.
	ErrConfig = errors.New("replayguard: invalid configuration")
	// ErrAuditGap is returned when a batch's audit positions do not follow the head.
	ErrAuditGap = errors.New("replayguard: audit positions do not follow the chain head")
	// ErrOutboxID is returned when a batch's outbox entries are out of
	// order or do not name records of the batch (see CheckOutbox).
	ErrOutboxID = errors.New("replayguard: outbox entry does not name a record of its batch")
	// ErrAmbiguous is returned when an outbox entry id given without a
	// member names held entries of several members of a group.
	ErrAmbiguous = errors.New("replayguard: the id names held outbox entries of several members")
)

var errBadHash = errors.New("replayguard: a hash is not 64 lowercase hex digits")

// ErrInProgress is returned by Release and Discard for a quarantine entry
// that is still held while another request's release or discard of it
// commits: try again once that one has answered.
var ErrInProgress = errors.New("replayguard: action in progress")

// ErrStillMalformed is returned by Release for a message that still does
// not decode: discard it instead.
var ErrStillMalformed = errors.New("replayguard: message is still malformed")

// ErrAborted is returned for a batch that was not committed because a
// batch submitted before it failed to commit. Submit it again.
var ErrAborted = errors.New("replayguard: batch aborted")

// ErrTrimBase is returned by TrimAudit when the base it is given is not the
// stored record just below the trim: the caller archived something else.
var ErrTrimBase = errors.New("replayguard: audit trim base does not match the stored record")

// ErrCursorRecord is returned by ChainKeeper.SetChainCursorAt when the
// chain does not hold the record the cursor names at its position: the
// store lost it (a failover to a standby that lacked it) or holds another
// record there, decided again. The cursor is left as it was.
var ErrCursorRecord = errors.New("replayguard: the chain does not hold the record a sink's cursor names")

// ErrTrimQuarantine is returned by TrimAudit when an open quarantine entry
// still needs a record it would drop.
var ErrTrimQuarantine = errors.New("replayguard: audit records below an open quarantine entry stay until it is resolved")

// ErrChainClaimed is returned by ChainKeeper.TrimChain when another handle
// holds the claim of the chain: a process whose claim ran out while it
// trimmed must not drop records the claim's new holder may not have
// archived.
var ErrChainClaimed = errors.New("replayguard: another process holds the claim of that member's chain")

// ErrKeyDerivation is returned by New for a route whose key derivation
// (KeyDerivation) differs from the one the store recorded for its name:
// replays of the messages it already applied would get other keys and
// other source windows, and be applied again. Permanent: the configuration
// must change.
var ErrKeyDerivation = errors.New("replayguard: a route derives its keys differently from the store's record")
