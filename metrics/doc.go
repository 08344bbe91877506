// Package metrics exposes replayguard's Prometheus metrics on a registry
// the application owns.
//
// Every delivery is counted once in exactly one bucket, so that
//
//	replayguard_received_total == sum(replayguard_decisions_total) - replayguard_store_recovered_total
//	                              + replayguard_abandoned_total + replayguard_in_flight
//
// (replayguard_store_recovered_total counts, on a shared store, the
// deliveries a member decided again from its journal after the store lost
// them: decisions without a delivery of this process.)
//
// holds in every single scrape: the received counter, the decision
// counters, the abandoned counter and the in-flight gauge are read together
// under one lock. A delivery is abandoned when shutdown could not commit it
// in time; the broker sends it again, and that copy is a new delivery. In
// normal running abandoned_total stays 0. An operator's
// release or discard of a held message is not a delivery; it is counted in
// replayguard_quarantine_resolved_total instead.
//
// Gauges that mirror engine state (key window entries, sources, open gaps,
// held messages) are read at scrape time from the engine and the store.
//
// The metrics hear two things, through two seams. As the engine's
// engine.Observer they hear every durable commit: its audit records give
// the decisions, and the gap ranges the decisions opened (AuditRecord.Gap,
// counted in replayguard_gaps_total). As a source.Observer they hear what
// a broker source did (connections, deliveries, commits, acknowledgements):
// every source (source/mqtt, source/mqtt3, source/jetstream) reports the
// same source.Event, so the metrics import package source only, never a
// source backend.
//
//	reg := prometheus.NewRegistry()
//	m := metrics.New(reg, "1.2.0", "abc123", "incidents", "meters")
//	eng, err := engine.New(ctx, store, engine.Options{Routes: routes, Observer: m})
//	m.Watch(eng)
//	m.WatchQuarantine(store)
//	defer m.Close() // once scrapes stop, before the store closes
//	consumer := mqtt.New(mqtt.Config{Observer: m, ...}, eng)
//
// A *Metrics is safe for concurrent use; its engine.Observer and
// source.Observer methods never block. The one goroutine it starts (a
// count of a shared store's windows that outlives the scrape that began
// it) is its own: Close cancels it and waits for it.
package metrics
