// Package file reads a captured feed — JSON Lines, one delivery a line —
// and passes it to the engine in batches, the way `replayguard ingest` does.
//
// Each line is {"topic": "...", "payload": <JSON value>} or
// {"topic": "...", "payload_b64": "..."}, with an optional "dup": true. A
// line that cannot be read as such is not dropped: it reaches the engine as
// a malformed message with the raw line as its payload, and is quarantined.
//
//	sum, err := file.Ingest(ctx, eng, os.Stdin, file.Options{Name: "stdin"})
//
// Ingest runs on the caller's goroutine.
package file
