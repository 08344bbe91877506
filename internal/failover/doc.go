// Package failover holds the end-to-end proof of replayguard's MQTT consumer
// against real Mosquitto brokers: it has no code of its own, only tests.
//
// Each test starts Mosquitto processes on free loopback ports with periodic
// persistence (see internal/testbroker), a publisher that stamps per-source
// sequences and records which publishes the broker acknowledged, and the
// consumer: in the test process (engine over the embedded store, behind the
// MQTT source) where a test must hold commits back, or `replayguard run` as
// a child process where it must be killed with SIGKILL. The tests then
// crash and swap brokers under it:
//
//   - a restart of the broker from a snapshot of its database that predates
//     the consumer's acknowledgements, and a failover to a standby started
//     on another port from such a snapshot: already-applied messages come
//     back, most with DUP=0, and are suppressed as duplicates, while
//     messages the broker acknowledged to the publisher and then lost show
//     up as gaps;
//   - `replayguard run` killed with SIGKILL at random moments, several times;
//   - all of it in one run of more than 20,000 messages from several sources;
//   - a consumer group: three `replayguard run` members in one MQTT share
//     group on one shared store (PostgreSQL, Redis), a sequenced route and
//     an id route, through a failover to an older standby, members killed,
//     and the store's server killed and started again (TestGroupFailover);
//   - a member of a group killed with SIGKILL while it holds its share of
//     the group's subscription: the live member adopts its session and
//     applies every message once, and a member returning during its
//     adoption takes its session back, over MQTT 5 and 3.1.1
//     (adopt_test.go);
//   - a Sparkplug B edge node whose Will is its NDEATH: seq across 255 → 0
//     with copies on both sides of the wrap while the broker is killed and
//     restarted, a rebirth with the next bdSeq and swapped aliases with the
//     old session replayed, consumer kills between commit and ack, and the
//     Will published when the edge's connection dies
//     (TestSparkplugThroughFailures).
//
// The ground truth is the publisher's record. After every run the store must
// show each acknowledged sequence applied exactly once or inside a gap the
// source reports, no sequence applied twice, entity state equal to the
// applied set, an audit record for every committed delivery, and an intact
// audit chain. Every test also checks that replays really happened, or it
// would prove nothing. Random kill points come from a seed the test logs.
//
// Run it with
//
//	go test ./internal/failover
//
// It skips when mosquitto is missing, and TestGroupFailover's subtests when
// PostgreSQL or Redis is (each fails instead with
// REPLAYGUARD_REQUIRE_SERVICES=1), and under -short. REPLAYGUARD_SOAK=1 makes
// the combined run ten times longer (200,000 messages), with more kills;
// REPLAYGUARD_SEED=N repeats the random points of a logged run.
// BenchmarkConsumeRate compares `replayguard run` with a no-op consumer on
// the same backlog (REPLAYGUARD_BENCH_MESSAGES, default 50,000):
//
//	go test ./internal/failover -run '^$' -bench ConsumeRate -benchtime 1x
//
// The tests run one at a time: each starts brokers and consumers of its own.
package failover
