// Package source holds what every broker source of replayguard reports
// the same way, whatever its protocol: the Event a consumer tells its
// Observer about (connections, deliveries, commits, acknowledgements), so
// that one Observer, the metrics, serves source/mqtt, source/mqtt3 and
// source/jetstream alike. It imports no source backend: the backends and
// their observers (package metrics) import it.
//
//	var acked atomic.Int64
//	obs := source.ObserverFunc(func(e source.Event) {
//		if e.Kind == source.Acked {
//			acked.Add(int64(e.N))
//		}
//	})
//	c, err := mqtt.New(mqtt.Config{Observer: obs, ...}, eng)
//
// The events let an operator check the delivery accounting:
// Received = Committed + Abandoned + in hand, and Committed = Acked + AckDropped.
//
// Concurrency: EventKind and Event are plain values; a source calls its
// Observer from its own and its client library's goroutines, possibly
// concurrently, so an Observer must be safe for concurrent use and must
// not block.
package source
