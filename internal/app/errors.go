package app

import "errors"

// ErrUsage marks a mistake in how a command was asked for (a flag that
// does not fit the store, a missing reason): the command line, not the
// store, is wrong. cmd/replayguard exits 2 and prints the usage on it.
var ErrUsage = errors.New("usage")

// ErrStoreKind is returned for a store kind this build cannot open.
var ErrStoreKind = errors.New("store kind not available")
