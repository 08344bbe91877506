package forward

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/replayguard/replayguard/engine"
)

// Output delivers outbox entries of one kind (engine.OutputMQTT,
// engine.OutputWebhook, engine.OutputNATS) downstream.
//
// The drainer calls Deliver of one Output from one goroutine at a time,
// with entries in ID order; Close after the last Deliver has returned.
type Output interface {
	// Deliver sends entries downstream in order and returns how many of
	// them, from the first, the downstream acknowledged (a PUBACK, a 2xx, a
	// JetStream PubAck). n < len(entries) comes with an error: a
	// *RefusedError when entries[n] was refused for good (the drainer holds
	// it for an operator and goes on after it), any other error when the
	// rest may be delivered on a later call (the drainer backs off and
	// sends entries[n:] again). An entry may reach the downstream more than
	// once; every copy carries its key.
	Deliver(ctx context.Context, entries []engine.OutboxEntry) (n int, err error)
	// Close releases the output's connections.
	Close() error
}

// Unconfigured returns the Output of a kind this process has no
// configuration for: every Deliver fails with reason, so that entries of
// that kind an earlier configuration left in the outbox are reported
// (the lane failing at the first of them, in Status and the log) rather
// than passed over in silence. Status leaves its lane out while it has
// never had an entry to fail at.
func Unconfigured(reason string) Output { return unconfigured(reason) }

type unconfigured string

func (u unconfigured) Deliver(context.Context, []engine.OutboxEntry) (int, error) {
	return 0, errors.New(string(u))
}

func (unconfigured) Close() error { return nil }

// progressive is an Output that tells each acknowledgement as it comes:
// the drainer counts an entry delivered (replayguard_forwarded_total, its
// latency, the lane's status) then, rather than when the whole page has
// been delivered, which takes a page of POSTs for a webhook, and for the
// MQTT and NATS outputs waits for the page's last acknowledgement, or for
// the ack timeout when one does not come. The drainer checks for it at
// each Deliver; entries are still marked done a page at a time.
type progressive interface {
	// deliverEach is Deliver, calling acked(i) on Deliver's goroutine once
	// entries[i] is acknowledged, in order, before it returns.
	deliverEach(ctx context.Context, entries []engine.OutboxEntry, acked func(i int)) (n int, err error)
}

// The names of the metadata every forwarded copy carries: MQTT 5 user
// properties, HTTP headers of a webhook POST, NATS message headers.
const (
	HeaderKey      = "replayguard-key"      // the idempotency key, 64 hex digits
	HeaderRoute    = "replayguard-route"    // the route that decided the message
	HeaderSource   = "replayguard-source"   // the source parts, a JSON array of strings
	HeaderEpoch    = "replayguard-epoch"    // sequenced routes with an epoch
	HeaderSequence = "replayguard-sequence" // sequenced routes, decimal
)

// Property is one name and value of an entry's metadata.
type Property struct{ Name, Value string }

// Properties returns the metadata of e, in the order above: the key, the
// route and the source always; the epoch when the route has one, the
// sequence on a sequenced route. The source is rendered as a JSON array of
// its parts, ["fd","e7"], so that a part holding a comma or a quote stays
// one part.
func Properties(e engine.OutboxEntry) []Property {
	src, _ := json.Marshal(sourceParts(e.Source)) // strings only: cannot fail
	ps := []Property{
		{HeaderKey, e.Key.String()},
		{HeaderRoute, e.Route},
		{HeaderSource, string(src)},
	}
	if e.Sequence >= 0 {
		if e.Epoch != "" {
			ps = append(ps, Property{HeaderEpoch, e.Epoch})
		}
		ps = append(ps, Property{HeaderSequence, strconv.FormatInt(e.Sequence, 10)})
	}
	return ps
}

// sourceParts is never nil, so that an empty source renders as [].
func sourceParts(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
