// Package forward delivers the outbox — the forward effects the engine
// writes in the same commit as their decisions — downstream: to an MQTT
// broker (QoS 1), to a webhook (HTTP POST) and to NATS JetStream.
//
// Delivery is at least once, in commit order per output, every copy
// carrying the message's idempotency key (MQTT 5 user properties, HTTP
// headers, NATS headers named replayguard-key, replayguard-route,
// replayguard-source, and on sequenced routes replayguard-epoch and
// replayguard-sequence; Idempotency-Key on a webhook, Nats-Msg-Id on
// NATS), so that a downstream consumer keying on it sees each effect
// exactly once. The payload is the original message's bytes. An entry
// leaves the outbox (engine.OutboxStore.OutboxDone) only after the
// downstream acknowledged it: a PUBACK, a 2xx, a JetStream PubAck. A
// downstream that refuses an entry for good (a webhook's 4xx, an MQTT copy
// over the broker's Maximum Packet Size) has it held
// for an operator through engine.Engine.HoldForward, which audits it as
// forward_held; a failing one is retried with capped, jittered backoff,
// logged, and shown by Status (readiness) and the metrics. An entry an
// operator retries (engine.Engine.RetryForward) is pending again under its
// own ID and is delivered like the others: the drainer hears of a retry
// committed by its own engine at once, and of one by another process at
// its next poll.
//
// A downstream that refuses one entry with a passing error for ever (a
// webhook's 503 to it alone) stops its output there: Status names that
// entry (OutputStatus.Stuck), and an operator who holds it while pending
// (engine.Engine.HoldPending) has the output go on after it, at the next
// poll.
//
// The MQTT output dials its broker, over TCP or TLS by the URL's scheme,
// through package internal/mqttconn, as the MQTT consumers do.
//
// Backpressure instead of loss: Drainer.Admit, set as the engine's
// Options.Admit, holds batches back while the outbox is full (counting the
// entries of the batches the engine decided and has not committed yet), so
// the consumer stops acknowledging upstream until the drainer made room.
//
//	d, _ := forward.New(forward.Options{Store: store,
//		Outputs: map[string]forward.Output{engine.OutputMQTT: out}})
//	eng, _ := engine.New(ctx, store, engine.Options{Routes: routes, Observer: d, Admit: d.Admit})
//	go d.Run(ctx, eng) // eng holds refused entries; Run returns when ctx is done
//	…
//	d.Close()          // after Run returned
//
// A Drainer runs one goroutine per output kind and drained member outbox,
// owned by Run; Committed, OutboxCommitted, OutboxResolved, OutboxHolds, Admit, Depth,
// Drain and Status are safe to call from any goroutine while it runs.
package forward
