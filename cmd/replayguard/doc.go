// Command replayguard gives exactly-once effect on top of at-least-once
// feeds: `replayguard demo` plays a broker failover end to end, `run`
// consumes MQTT, `ingest` decides a captured feed, and `state`, `sources`,
// `audit` and `quarantine` let an operator and an after-action reviewer see
// and decide what happened. See README.md, or `replayguard help`.
//
// main.go only sets up signals; cli.go parses flags and the configuration;
// each command lives in a command_<verb>.go file.
package main
