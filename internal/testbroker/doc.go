// Package testbroker runs real brokers and stores for tests: Mosquitto
// processes on free loopback ports with periodic persistence, which can be
// killed, restarted on the same database, frozen, or cloned from a snapshot
// of the database into a standby — the failover that replays already-acknowledged
// messages. A Publisher sends sequenced QoS 1 messages and records which ones
// the broker acknowledged, the ground truth of a failover test; MeasureLive
// and MeasureBacklog time a consumer against it.
//
// StartRedis and StartPostgres run the shared stores the same way: a
// redis-server with an append-only file synced on every write, and a
// PostgreSQL 15 server on a copy of a data directory that initdb makes once
// per test binary (as the OS user "postgres" when the test runs as root),
// both durable by default, with options for the settings a store must
// refuse. Kill (SIGKILL, every PostgreSQL backend included), Stop, Pause and
// Resume act on the process; Restart starts it again on the same port and
// directory, so that Redis replays its append-only file and PostgreSQL runs
// crash recovery:
//
//	func TestStoreSurvivesCrash(t *testing.T) {
//		pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
//		// … commit through a store opened on pg.URL() …
//		pg.Kill()
//		pg.Restart()
//		// … the commit is there …
//	}
//
// A TestMain that starts PostgreSQL calls CleanupPostgres after the tests to
// remove the template.
//
// A test that needs Mosquitto, Redis or PostgreSQL skips when the binary is
// missing, or fails when REPLAYGUARD_REQUIRE_SERVICES=1. The Mosquitto
// failover:
//
//	func TestFailover(t *testing.T) {
//		primary := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
//		pub := testbroker.NewPublisher(t, []string{primary.URL()}, testbroker.PublisherOptions{})
//		// … a consumer with a persistent session takes and acknowledges some messages …
//		snap := primary.SnapshotDB() // the standby's view: before the acks reached disk
//		primary.Kill()
//		standby := testbroker.StartFromSnapshot(t, snap)
//		// … the consumer fails over to standby.URL() and gets replays …
//		_ = pub.Acked() // every message the broker took responsibility for
//	}
//
// Helpers are called from the test goroutine and fail the test on error;
// everything they start is stopped at cleanup. Publisher is safe for
// concurrent use.
package testbroker
