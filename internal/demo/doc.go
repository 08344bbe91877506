// Package demo plays replayguard's failover story end to end, in-process,
// with nothing to install: `replayguard demo`.
//
// Embedded mochi-mqtt brokers (the feed's primary and, from the failover,
// its standby; the COP broker of the clean stream) keep their sessions in
// bbolt files written synchronously (sessionStore, the demo's own mochi
// storage hook).
// A field gateway publishes an incident (a structure fire, three
// casualties, engine E7 assigned then released, ambulance M3) at QoS 1 to
// incidents/<agency>/<source>. Two consumers with persistent
// sessions read it side by side: a naive one that applies and acknowledges
// every delivery, and replayguard (source/mqtt over the engine, on an
// embedded store, opened the way `run` opens it, with the dashboard served
// meanwhile).
//
// replayguard's route forwards what it applies: its outbox drainer (package
// forward, as `run` runs it) publishes each applied report to
// clean/<topic> on a third broker, the COP broker of the dispatch centre,
// where a dispatch board, auto-acking like the naive console, builds its
// picture from the first copy of each replayguard-key. The COP broker is
// not part of the failover on purpose: the outbox is done with a copy once
// the broker it publishes to has PUBACKed it, so a clean stream through a
// broker pair that fails over to a stale checkpoint would be only as good
// as that checkpoint (a PUBACKed copy the standby never saw is lost, and
// nothing sends it again); the dispatch centre's own broker is where a
// user puts it. It is also the less fragile choice: the drainer's output
// keeps one connection through the story.
//
// The standby's state predates the consumers' acknowledgements, honestly:
// the first reports arrive while both consumers are offline, so the primary
// holds them in their sessions; the primary then stops for a moment to copy
// its store (the standby's checkpoint) and starts again on it; the consumers
// come back, apply and acknowledge. When the primary fails, the consumers
// reconnect to the standby started from the checkpoint, and the standby's
// own session resend redelivers reports both consumers already applied.
// Nothing is injected: every replay is a broker redelivery.
//
//	err := demo.Run(ctx, os.Stdout, demo.Options{Hold: 5 * time.Minute})
//
// Run narrates on stdout and ends with the three pictures (naive,
// replayguard, dispatch board) next to the truth. It returns nil only when
// replayguard's and the board's pictures are exact, the board's distinct
// keys are the reports replayguard applied, and the naive picture is
// wrong. Every listener is on 127.0.0.1; Run owns every goroutine it
// starts and returns after all have stopped. Concurrent calls are
// independent: each has its own brokers, store, directories and ports.
package demo
