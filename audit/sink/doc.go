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
// A Set is an engine.Observer whose Committed only wakes the sinks: each
// runs on its own goroutine, so a slow or dead sink never holds up a
// commit. Run, Flush and Close must not run concurrently with each other.
package sink
