// Package consumetest holds the test helpers the source packages share:
// a logger to testing.T, a consumer run in the background until the test
// ends, a Processor that records what it commits, an Observer that
// records events, and the scenarios every MQTT source runs (LeaveShare).
//
//	rec := consumetest.NewRecorder(t)
//	c, _ := mqtt.New(cfg, rec)
//	run := consumetest.Start(t, c)
//	consumetest.WaitFor(t, "consumer ready", 10*time.Second, c.Ready)
//	// publish, then check rec.Committed()
//	err := run.Stop()
//
// Concurrency: Recorder and Events are safe for concurrent use; a Run is
// stopped from the test's goroutine.
package consumetest
