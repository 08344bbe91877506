package mqttprobe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"
)

// Choice is what mqtt.protocol asks for.
type Choice string

// The choices of mqtt.protocol.
const (
	Only5   Choice = "5"
	Only311 Choice = "3.1.1"
	Auto    Choice = "auto"
)

// versions are the versions a choice tries, in order.
func (c Choice) versions() []Version {
	switch c {
	case Only5:
		return []Version{V5}
	case Only311:
		return []Version{V311}
	}
	return []Version{V5, V311}
}

// Retry bounds the jittered, doubling wait between rounds while no broker
// answers. Defaults of Negotiate: 250ms and 30s, the consumers' reconnect
// backoff.
type Retry struct{ Min, Max time.Duration }

// Negotiate finds the version to speak with brokers. It asks each broker
// in turn, in the order of the list, for the versions of choice, in order;
// the first broker that accepts one decides the version for the whole
// list (the brokers of one list are one service: a primary and its
// standbys), and that is logged at Info with the broker. Brokers that
// cannot be probed (WebSocket) are taken to speak the first version of
// choice, unprobed. While no broker answers and not every one refused,
// Negotiate waits (growing, jittered) and asks again, until ctx is done: a
// broker that is down is waited for. When every broker answered and
// refused every version tried, it returns an error wrapping
// ErrNotNegotiable that names the versions tried, each broker's answer and
// what to set.
func Negotiate(ctx context.Context, brokers []string, choice Choice, o Options, r Retry, log *slog.Logger) (Version, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r.Min, r.Max = cmpOr(r.Min, 250*time.Millisecond), cmpOr(r.Max, 30*time.Second)
	wait := r.Min
	for round := 1; ; round++ {
		v, refusals, err := negotiateRound(ctx, brokers, choice, o, log)
		if err == nil {
			return v, nil
		}
		if len(refusals) == len(brokers) {
			return 0, notNegotiable(choice, brokers, refusals, cmp.Or(o.Setting, "mqtt"))
		}
		d := wait/2 + rand.N(wait/2+1)
		log.Warn("mqtt protocol not negotiated yet: no broker answered; retrying",
			"protocol", string(choice), "round", round, "wait", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, r.Max)
	}
}

// negotiateRound asks every broker once. It returns the version of the
// first broker that accepts one, or the refusals by broker index and the
// last error.
func negotiateRound(ctx context.Context, brokers []string, choice Choice, o Options, log *slog.Logger) (Version, map[int][]error, error) {
	refusals := map[int][]error{}
	var last error
	for i, b := range brokers {
		u, err := url.Parse(b)
		if err != nil {
			return 0, nil, err // checked by the configuration
		}
		if !Probeable(u) {
			v := choice.versions()[0]
			log.Info("mqtt protocol chosen without a probe: a WebSocket broker cannot be probed",
				"protocol", v.String(), "broker", u.Redacted(), "brokers", len(brokers))
			return v, nil, nil
		}
		for _, v := range choice.versions() {
			err = Probe(ctx, u, v, o)
			if err == nil {
				log.Info("mqtt protocol negotiated: used for every broker of the list",
					"protocol", v.String(), "broker", u.Redacted(), "asked", string(choice), "brokers", len(brokers))
				return v, nil, nil
			}
			if !errors.Is(err, ErrRefused) {
				break // down: the next broker
			}
			log.Info("mqtt broker refused a protocol version", "broker", u.Redacted(), "protocol", v.String(), "err", err)
			refusals[i] = append(refusals[i], err)
		}
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		if len(refusals[i]) < len(choice.versions()) {
			delete(refusals, i)
			last = err
		}
	}
	if last == nil {
		last = errors.New("every broker refused")
	}
	return 0, refusals, last
}

func notNegotiable(choice Choice, brokers []string, refusals map[int][]error, setting string) error {
	tried := make([]string, 0, 2)
	for _, v := range choice.versions() {
		tried = append(tried, "MQTT "+v.String())
	}
	var answers []string
	for i, b := range brokers {
		var why []string
		for _, e := range refusals[i] {
			why = append(why, strings.TrimPrefix(e.Error(), ErrRefused.Error()+": "))
		}
		answers = append(answers, fmt.Sprintf("%s: %s", redact(b), strings.Join(why, "; ")))
	}
	fix := "check that " + setting + ".brokers name MQTT listeners"
	switch choice {
	case Only5:
		fix = "set " + setting + ".protocol to 3.1.1 (or auto) if the brokers speak only MQTT 3.1.1, or " + fix
	case Only311:
		fix = "set " + setting + ".protocol to 5 (or auto) if the brokers speak only MQTT 5, or " + fix
	}
	return fmt.Errorf("%w (tried %s): %s; %s", ErrNotNegotiable, strings.Join(tried, " and "), strings.Join(answers, "; "), fix)
}

func redact(b string) string {
	if u, err := url.Parse(b); err == nil {
		return u.Redacted()
	}
	return b
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
