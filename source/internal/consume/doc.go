// Package consume holds what every broker source of replayguard does the
// same way, whatever its protocol: the jittered backoff between attempts,
// the events a consumer reports to its Observer, the fault point between a
// batch's commit and its acknowledgements, the retry of a batch's commit,
// the settings' defaults, and, for the consumers fed by a client library's
// callback (MQTT), the delivery queue and the batching loop, and the MQTT
// consumers' broker URL and topic filter rules. A source (source/mqtt, source/mqtt3,
// source/jetstream) keeps only what its protocol makes its own: how it
// connects, receives and acknowledges.
//
//	retry := consume.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
//	for attempt := 1; ; attempt++ {
//		if try() == nil {
//			break
//		}
//		if !consume.Sleep(ctx.Done(), retry.Delay(attempt)) {
//			return ctx.Err()
//		}
//	}
//
// Concurrency: Backoff, Event and the functions of the package are safe for
// concurrent use; an Observer says itself what it allows.
package consume
