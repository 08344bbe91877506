// Package app wires replayguard's components from a configuration and owns
// their lifecycle: the store opens first and closes last, after the engine
// and any source using it have stopped.
//
// Its seams toward cmd/replayguard take a configuration and plain values
// and write to an io.Writer:
//
//   - Run is `replayguard run`: it checks the configuration, wires the
//     metrics into the App it opens, and serves the source, the forward
//     drainer, audit retention and sinks and the HTTP API until its
//     context is done (see daemon.serve for the stop order).
//   - Tool runs the one-shot commands: State, Sources, AuditExport,
//     AuditVerify, QuarantineList and QuarantineResolve, OutboxList and
//     OutboxResolve, Report, StoreLoss and AcceptLoss, and Ingest. Each
//     opens the store for itself and closes it before returning; when a
//     running `run` holds the store, it works through that process's API
//     instead.
//   - Bench measures durable decisions on a generated feed; CheckSQL
//     checks sql effects against the database for `lint`.
//
// An error wrapping ErrUsage is a mistake on the command line. Open and App
// are the lower seam, for the demo, tests and benchmarks.
//
// An App is used by one command at a time; its engine is safe for
// concurrent use. A Tool is used by one goroutine at a time.
//
//	t := &app.Tool{Config: cfg, Out: os.Stdout}
//	if err := t.Ingest(ctx, app.IngestOptions{Input: feed, Name: "capture.jsonl", DrainTimeout: 30 * time.Second}); err != nil {
//		return err
//	}
//	return t.State(ctx, false) // entity state, one line each
package app
