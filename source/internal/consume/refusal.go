package consume

import (
	"errors"
	"log/slog"
	"slices"
	"time"
)

// Refusal is what a SUBACK did not grant as asked: the topic filters it
// refused, granted at QoS 0 or left without an answer, and why.
type Refusal struct {
	Topics []string // the filters, as subscribed (with any $share prefix)
	Routes []string // the routes that asked for them
	Err    error    // one error per filter, each naming it, its routes and the broker's answer
	// Passing: the broker gave a passing reason for every one (see
	// PassingSuback), so trying again on the same connection may succeed.
	Passing bool
	errs    []error
}

// Add notes that the broker did not grant topic, the filter as subscribed
// in share group group, with err saying why; passing when its reason is a
// passing one.
func (r *Refusal) Add(filters []Filter, group, topic string, passing bool, err error) {
	r.Passing = passing && (r.Passing || len(r.Topics) == 0)
	r.Topics = append(r.Topics, topic)
	for _, route := range Routes(filters, group, topic) {
		if !slices.Contains(r.Routes, route) {
			r.Routes = append(r.Routes, route)
		}
	}
	r.errs = append(r.errs, err)
}

// Done returns r with Err set, or nil when nothing was refused.
func (r *Refusal) Done() *Refusal {
	if len(r.errs) == 0 {
		return nil
	}
	r.Err = errors.Join(r.errs...)
	return r
}

// PassingSuback reports whether an MQTT 5 SUBACK reason code refuses for a
// reason that passes by itself: 0x91 (mochi-mqtt answers it while its own
// deliveries use the SUBSCRIBE's packet id) and 0x97 (quota exceeded).
func PassingSuback(code byte) bool { return code == 0x91 || code == 0x97 }

// LogRefusal logs a refusal of subscriptions after a Run's first grant
// (a reconnect's), which the consumer tries again after wait: at ERROR,
// naming the routes, the filters and the broker's answer, since those
// routes receive nothing from this broker until it grants them; at WARN
// when every reason given passes by itself.
func LogRefusal(log *slog.Logger, broker string, r *Refusal, attempt int, wait time.Duration) {
	args := []any{"broker", broker, "routes", r.Routes, "filters", r.Topics, "err", r.Err, "attempt", attempt, "wait", wait}
	if r.Passing {
		log.Warn("mqtt broker refused a subscription for a passing reason; trying again", args...)
		return
	}
	log.Error("mqtt broker refused a subscription on a reconnect (its access control changed, or this broker's differs): "+
		"the routes named may receive nothing from it, and run is not ready until it grants them; trying again", args...)
}
