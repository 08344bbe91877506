// Package consume holds what every broker source of replayguard does the
// same way, whatever its protocol: the jittered backoff between attempts
// and the rule that tells a failover from a flap (Proved), the fault point
// between a batch's commit and its acknowledgements, the retry of a
// batch's commit and the messages it passes (Messages), the settings'
// defaults, and, for the consumers fed by a client library's callback
// (MQTT), the delivery queue, the batching loop with its report of the
// acknowledgements (Batches.ReportAcks), the MQTT consumers' broker URL
// and topic filter rules, and their adoption of a gone member's session
// (Adoption). The events a source reports are package source's
// (source.Event, source.Observer), public so that the metrics can hear
// them without importing a source; how an MQTT consumer dials its broker
// is package internal/mqttconn's, shared with the MQTT output. A source
// (source/mqtt, source/mqtt3, source/jetstream) keeps only what its
// protocol makes its own: how it connects, receives and acknowledges.
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
// Concurrency: Backoff and the functions of the package are safe for
// concurrent use; a Committer, a Queue and a Batches say themselves what
// they allow.
package consume
