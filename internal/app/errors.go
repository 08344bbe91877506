package app

import "errors"

// ErrUsage marks a mistake in how a command was asked for (a flag that
// does not fit the store, a missing reason): the command line, not the
// store, is wrong. cmd/replayguard exits 2 and prints the usage on it.
var ErrUsage = errors.New("usage")

// ErrStoreKind is returned for a store kind this build cannot open.
var ErrStoreKind = errors.New("store kind not available")

// ErrNoSinkCursor is returned by ForgetSink for a sink the store keeps no
// cursor of.
var ErrNoSinkCursor = errors.New("no cursor of that audit sink is stored")
