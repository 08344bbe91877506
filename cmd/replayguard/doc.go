// Command replayguard gives exactly-once effect on top of at-least-once
// feeds: `replayguard demo` plays a broker failover end to end, `run`
// consumes MQTT, `ingest` decides a captured feed, and `state`, `sources`,
// `audit` and `quarantine` let an operator and an after-action reviewer see
// and decide what happened. See README.md, or `replayguard help`.
//
// The command only turns a command line into a call and its result into
// an exit status: main.go sets up the signals; cli.go parses the flags,
// loads the configuration (package config) and maps errors to exit codes
// (0 ok, 1 error, 2 a command-line mistake: app.ErrUsage); each verb's
// flags and arguments are read in its command_<verb>.go, which hands them
// to internal/app as plain values: app.Run for `run`, an app.Tool
// (configuration, logger, stdout, stderr, API token) for the one-shot
// commands, app.Bench for `bench`, and internal/demo for `demo`. Stores,
// sources, the engine, the audit log and the HTTP API are internal/app's:
// the command imports none of them (internal/arch checks it).
package main
