// Package demo plays replayguard's failover story end to end, in-process,
// with nothing to install: `replayguard demo`.
//
// Two embedded mochi-mqtt brokers keep their sessions in bbolt files
// written synchronously (sessionStore, the demo's own mochi storage hook).
// A field gateway publishes an incident (a structure fire, three
// casualties, engine E7 assigned then released, ambulance M3) at QoS 1 to
// incidents/<agency>/<source>. Two consumers with persistent
// sessions read it side by side: a naive one that applies and acknowledges
// every delivery, and replayguard (source/mqtt over the engine, on an
// embedded store, with the dashboard served meanwhile).
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
// Run narrates on stdout and ends with the two pictures next to the truth.
// It returns nil only when replayguard's picture is exact and the naive one
// is wrong. Every listener is on 127.0.0.1; Run owns every goroutine it
// starts and returns after all have stopped. Concurrent calls are
// independent: each has its own brokers, store, directories and ports.
package demo
