// Package testbroker runs real MQTT brokers for tests: Mosquitto processes on
// free loopback ports with periodic persistence, which can be killed,
// restarted on the same database, frozen, or cloned from a snapshot of the
// database into a standby — the failover that replays already-acknowledged
// messages. A Publisher sends sequenced QoS 1 messages and records which ones
// the broker acknowledged, the ground truth of a failover test; MeasureLive
// and MeasureBacklog time a consumer against it.
//
// A test that needs Mosquitto skips when the binary is missing, or fails when
// REPLAYGUARD_REQUIRE_SERVICES=1:
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
