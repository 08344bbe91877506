// Package audit verifies and exports replayguard's hash-chained audit log.
//
// Every decision the engine commits leaves one record; each record carries
// the hash of the one before it (engine.ChainHash), so an altered, removed
// or reordered record breaks the chain at a position Verify reports. An
// after-action reviewer can verify an exported JSON Lines file without the
// store.
//
//	n, err := audit.Verify(ctx, store, head)
//	var broken *audit.BrokenError
//	if errors.As(err, &broken) { fmt.Println("first bad record:", broken.Position) }
//
// The functions hold no state and are safe for concurrent use.
package audit
