// Package sink streams committed audit records to systems outside
// replayguard: OpenTelemetry logs over OTLP/HTTP, syslog (RFC 5424) over
// TCP, and a JSON Lines file with rotation.
//
// Each sink delivers every record at least once and in position order. Its
// cursor, the position of the last record it delivered, lives in the store
// (engine.CursorStore), so a sink that is down loses nothing: it reads the
// records after its cursor from the store when it is back.
//
//	set, _ := sink.New(store, sink.Options{Sinks: []sink.Sink{{Name: "siem", Exporter: exp}}})
//	eng, _ := engine.New(ctx, store, engine.Options{Routes: routes, Observer: set})
//	go set.Run(ctx) // returns when ctx is done
//
// On a shared store every member writes its own chain. NewChains makes a
// Set over the members' chains: each sink delivers every chain SetChains
// gives it (the chains its process claims: its own, and those of members
// that are gone) on its one goroutine, in position order per chain, with a
// cursor per chain and sink in the store (engine.ChainKeeper); Floor says
// up to where every sink delivered a chain, which is as far as audit
// retention may trim it.
//
// A Set is an engine.Observer whose Committed only wakes the sinks: each
// runs on its own goroutine, so a slow or dead sink never holds up a
// commit. Run, Flush and Close must not run concurrently with each other;
// SetChains, SetHead, Floor and Status may be called at any time.
package sink
