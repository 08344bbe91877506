// Package app wires replayguard's components from a configuration and owns
// their lifecycle: the store opens first and closes last, after the engine
// and any source using it have stopped.
//
// An App is used by one command at a time; its engine is safe for
// concurrent use.
package app
