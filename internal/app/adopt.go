package app

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source/mqtt"
	"github.com/replayguard/replayguard/source/mqtt3"
)

// adopter adopts the MQTT sessions of the members of this member's share
// group that are gone while the store records them as holding its
// subscription (engine.ShareAdopter): a member killed, or lost with its
// machine, cannot leave the group, and the broker would go on dealing it
// its share of the group's messages, which would wait in its session until
// it returns, and be dropped at the session's expiry. For each session it
// claims, it connects with the gone member's client id (mqtt.Config.Adopt),
// unsubscribes the group's filters, decides what the session delivers in
// this member's engine, as its own deliveries, and records the member out
// of the group once the session went quiet. A member that still reaches
// the store but lost its broker (a network cut between the two) marks its
// share lost instead of holding it: its session is adopted once it has
// stayed lost for lostWait, and only while this member's own connection
// has been up for as long (after an outage of the broker for everyone, the
// first member back does not adopt the others while they are still
// reconnecting). A member that returns takes its session back; its
// adoption is not tried again until it has recorded its share again under
// another lease holder or lost it again at another time, or held its
// lease again (the store no longer hands it over), and is gone again.
type adopter struct {
	group string
	store engine.ShareAdopter
	every time.Duration // between rounds of claims: a third of a claim's TTL
	base  mqtt.Config   // this member's consumer's configuration
	proc  mqtt.Processor
	// ready reports whether this member may adopt now: its own MQTT
	// connection is up and subscribed.
	ready func() bool
	// lostWait is how long a member's share stays marked lost before
	// its session is adopted (mqtt.adopt_lost_after), and how long this
	// member's own connection must have been up to adopt it; zero: a
	// member is adopted only once its lease is gone.
	lostWait time.Duration
	// upFor says how long this member's own MQTT connection has been
	// up; nil: not known, so no member is adopted for its loss alone.
	upFor func() time.Duration
	// lost is what the current round asks the store for (ClaimAdoptions'
	// lost): lostWait, or zero while this member's own connection has
	// been up for less; set by Run's goroutine before a round's claims.
	lost time.Duration
	// consumer returns the consumer of an adoption (cfg.Adopt set) in the
	// MQTT version this member's own connection speaks.
	consumer func(cfg mqtt.Config, p mqtt.Processor) (runner, error)
	log      *slog.Logger
	met      *metrics.Adoptions
	// feed names the path of mqtt.feeds whose sessions this adopter
	// adopts, whose deliveries they are; "" for a member's one session.
	feed string
	// returned holds, by member, the share (its lease holder and loss
	// time) whose adoption that member's return ended, until a round's
	// claims no longer hand that member over; only Run's goroutine uses
	// it. nil until the first return.
	returned map[string]returnedShare
}

// returnedShare is the share of a member whose adoption its return ended.
type returnedShare struct {
	holder string
	lost   time.Time
}

// of reports whether ad is the share the member returned from.
func (r returnedShare) of(ad engine.Adoption) bool {
	return r.holder == ad.Holder && r.lost.Equal(ad.Lost)
}

// Run adopts, every third of a claim's TTL, the sessions the store lets
// this member claim, one after the other, until ctx is done.
func (a *adopter) Run(ctx context.Context) {
	tick := time.NewTicker(a.every)
	defer tick.Stop()
	for {
		if a.ready() {
			a.round(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round claims the sessions of gone members and adopts each.
func (a *adopter) round(ctx context.Context) {
	a.lost = a.lostFor()
	claimed, err := a.store.ClaimAdoptions(ctx, a.group, a.lost)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("could not claim the sessions of the share group's gone members; trying again", "group", a.group, "err", err)
		}
		return
	}
	// A member the store no longer hands over holds its lease again: it
	// is back, and once gone again (killed, or cut off from its store
	// again) its session is adopted, though its lease holder, the same
	// process's, is the one its return was noted under.
	// A member returned from a loss is not handed over for it in a round
	// that asks for none: that says nothing of its return.
	for m, r := range a.returned {
		if (r.lost.IsZero() || a.lost > 0) && !slices.ContainsFunc(claimed, func(c engine.Adoption) bool { return c.Member == m }) {
			delete(a.returned, m)
		}
	}
	for i, ad := range claimed {
		if ctx.Err() != nil {
			return // Close releases the claims
		}
		switch {
		case i > 0 && !a.stillHandedOver(ctx, ad, claimed[i:]):
			// Not adopted: the next round asks again.
		case ad.ClientID == a.base.ClientID:
			// Its connection would take this member's own session.
			a.log.Warn("not adopting the session of a gone member of the share group: it has this member's own client id; give each member its own mqtt.client_id",
				"adopted_member", ad.Member, "client_id", ad.ClientID)
		case !a.returned[ad.Member].of(ad):
			a.adopt(ctx, ad, claimed[i:])
		}
		if err := a.store.ReleaseAdoption(context.WithoutCancel(ctx), ad.Member); err != nil {
			a.log.Warn("could not release the claim of an adopted session: it runs out", "adopted_member", ad.Member, "err", err)
		}
	}
}

// stillHandedOver asks again, before each adoption of a round after its
// first (which may have taken long), whether ad is still this member's to
// adopt: its own connection is up (for adopt_lost_after, for a member
// handed over for its loss), and the store still hands ad over as it did.
// A member lost from its broker that has joined again since is not: its
// connection is live, and adopting would take its session from it.
func (a *adopter) stillHandedOver(ctx context.Context, ad engine.Adoption, rest []engine.Adoption) bool {
	if !a.ready() {
		return false
	}
	a.lost = a.lostFor()
	claimed, err := a.claim(ctx, rest)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("could not claim the sessions of the share group's gone members again; trying in the next round", "group", a.group, "err", err)
		}
		return false
	}
	return slices.ContainsFunc(claimed, ad.Same)
}

// adopt adopts one gone member's session, renewing the claims of its
// round's adoptions still to end (ad's among them) meanwhile.
func (a *adopter) adopt(ctx context.Context, ad engine.Adoption, round []engine.Adoption) {
	log := a.log.With("adopted_member", ad.Member, "client_id", ad.ClientID, "group", ad.Group)
	if !ad.Lost.IsZero() {
		log = log.With("broker_lost_since", ad.Lost.UTC().Format(time.RFC3339Nano))
	}
	var received atomic.Uint64
	cfg := a.base
	cfg.ClientID, cfg.Adopt, cfg.Adopted, cfg.CleanStart = ad.ClientID, true, ad.Member, false
	cfg.JoinShare, cfg.QuitShare, cfg.LeaveShare = nil, nil, nil
	cfg.Filters = withRecorded(cfg.Filters, ad.Filters)
	if ad.Path != "" && !slices.Equal(ad.Brokers, redactedBrokers(cfg.Brokers)) {
		log.Warn("the gone member recorded other brokers for this path than this member's configuration names: adopting its session through this member's",
			"recorded_brokers", ad.Brokers)
	}
	cfg.Logger, cfg.Observer = log, a.met.Observer(&received)
	if a.feed != "" {
		cfg.Observer = a.met.FeedObserver(a.feed, &received)
	}
	c, err := a.consumer(cfg, a.proc)
	if err != nil {
		log.Error("cannot adopt the session of a gone member of the share group", "err", err)
		return
	}
	log.Warn("adopting the session of a member gone while it held the share group's subscription: its share is decided here, not left waiting in its session")
	began := time.Now()
	renewing := a.renewClaims(ctx, log, round)
	err = c.Run(ctx)
	renewing()
	n := received.Load()
	took := time.Since(began).Round(time.Millisecond)
	switch {
	case err == nil || errors.Is(err, mqtt.ErrNoSession) || errors.Is(err, mqtt3.ErrNoSession):
		a.adopted(ctx, log, ad, err != nil, n, took)
	case errors.Is(err, mqtt.ErrTakenOver) || ctx.Err() == nil && a.memberBack(ctx, ad, round):
		if a.returned == nil {
			a.returned = map[string]returnedShare{}
		}
		a.returned[ad.Member] = returnedShare{holder: ad.Holder, lost: ad.Lost}
		a.met.Ended(metrics.AdoptionTakenOver)
		log.Warn("adoption ended: the gone member returned and took its session back, with what was not acknowledged; not adopted again until it is gone again",
			"messages", n, "took", took)
	default:
		a.met.Ended(metrics.AdoptionInterrupted)
		log.Warn("adoption ended before the session went quiet: what it holds waits in it, and it is adopted again", "messages", n, "took", took, "err", err)
	}
}

// memberBack reports whether ad's member is back, once the adopted
// session's connection was lost: the store no longer hands its session
// over as recorded, for the member took its lease again (which clears its
// share) before it connected. Mosquitto 2.0.11 closes the connection of a
// session another connection takes without saying why (no DISCONNECT
// with reason 0x8E), and MQTT 3.1.1 has no DISCONNECT from the broker,
// so the store tells a member's return from a connection lost otherwise.
func (a *adopter) memberBack(ctx context.Context, ad engine.Adoption, round []engine.Adoption) bool {
	claimed, err := a.claim(ctx, round)
	return err == nil && !slices.ContainsFunc(claimed, ad.Same)
}

// claim takes or renews this member's claims of the sessions of the
// share group's gone members, as the store hands them over, and gives up
// at once each it took that is not among round, the adoptions its round
// has still to end: a member gone since the round claimed its sessions is
// left to the next round of whichever member claims it first. Held here,
// no other live member could adopt it before the claim ran out (the
// lease's ttl), however long this member took to come to it, or if it
// never did: its own connection lost with the adoption's (a broker
// restarted), or its adoptions stopped.
func (a *adopter) claim(ctx context.Context, round []engine.Adoption) ([]engine.Adoption, error) {
	claimed, err := a.store.ClaimAdoptions(ctx, a.group, a.lost)
	if err != nil {
		return nil, err
	}
	for _, c := range claimed {
		if slices.ContainsFunc(round, func(r engine.Adoption) bool { return r.Member == c.Member }) {
			continue
		}
		if err := a.store.ReleaseAdoption(context.WithoutCancel(ctx), c.Member); err != nil {
			a.log.Warn("could not release the claim of a gone member's session this member does not adopt now: it runs out",
				"adopted_member", c.Member, "err", err)
		}
	}
	return claimed, nil
}

// adopted records ad's member out of the share group, its session
// drained (or absent at the broker).
func (a *adopter) adopted(ctx context.Context, log *slog.Logger, ad engine.Adoption, absent bool, n uint64, took time.Duration) {
	outcome := metrics.AdoptionDrained
	if absent {
		outcome = metrics.AdoptionNoSession
	}
	a.met.Ended(outcome)
	out, err := a.store.ShareAdopted(context.WithoutCancel(ctx), ad)
	switch {
	case err != nil:
		log.Warn("adoption ended, but the store did not record the gone member out of the share group: its session is adopted again", "messages", n, "took", took, "err", err)
	case absent:
		log.Warn("adoption ended: the broker holds no session of the gone member, nothing of the group's waits for it; recorded out of the share group",
			"recorded", out)
	default:
		log.Info("adoption ended: the gone member's session delivered nothing more of the share group; recorded out of the share group",
			"messages", n, "took", took, "recorded", out)
	}
}

// withRecorded is filters with each topic filter of recorded, the group's
// filters a gone member recorded on its path, that filters lacks: the
// adoption unsubscribes the session from the group's form of each, also
// one a change of the routes has since taken from this member's.
func withRecorded(filters []mqtt.Filter, recorded []string) []mqtt.Filter {
	out := filters
	for _, topic := range recorded {
		if !slices.ContainsFunc(filters, func(f mqtt.Filter) bool { return !f.Unshared && f.Topic == topic }) {
			out = append(slices.Clip(out), mqtt.Filter{Topic: topic, QoS: 1})
		}
	}
	return out
}

// renewClaims renews this member's claims of round's sessions every
// a.every until the returned function is called, which waits for it to
// stop.
func (a *adopter) renewClaims(ctx context.Context, log *slog.Logger, round []engine.Adoption) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(a.every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := a.claim(ctx, round); err != nil && ctx.Err() == nil {
				log.Warn("could not renew the claim of the adopted session", "err", err)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// adoptingSource is the member's own MQTT source with, beside it, the
// adoption of the sessions of its share group's gone members.
type adoptingSource struct {
	*mqttSource
	ad *adopter
}

// Run runs the source until ctx is done, and the adoptions until it
// returns.
func (s *adoptingSource) Run(ctx context.Context) error {
	actx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.ad.Run(actx) })
	err := s.mqttSource.Run(ctx)
	cancel()
	wg.Wait()
	return err
}

// runner is a consumer that runs until its context is done, or it ends on
// its own (an adoption, see mqtt.Config.Adopt).
type runner interface {
	Run(ctx context.Context) error
}

// adoption returns the consumer adopting the session cfg names
// (cfg.Adopt), in the MQTT version this source negotiated: the brokers of
// a group are one service, which every member and adoption reaches alike.
func (s *mqttSource) adoption(cfg mqtt.Config, p mqtt.Processor) (runner, error) {
	if c := s.cur.Load(); c != nil && *c == source(s.v311) {
		c3 := mqtt3Config(cfg)
		c3.Adopt, c3.Adopted = cfg.Adopt, cfg.Adopted
		return mqtt3.New(c3, p)
	}
	return mqtt.New(cfg, p)
}

// oneCaller passes the batches of the member's own consumer and of an
// adopted session to p one call at a time: a Processor's calls must not
// overlap.
type oneCaller struct {
	mu sync.Mutex
	p  mqtt.Processor
}

func (o *oneCaller) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.p.Process(ctx, msgs)
}

// Prepare decodes ahead of Process when p can: each consumer calls it
// on its own goroutine, as the feeds of mqtt.feeds do.
func (o *oneCaller) Prepare(msgs []engine.Message) {
	if p, ok := o.p.(interface{ Prepare([]engine.Message) }); ok {
		p.Prepare(msgs)
	}
}

// lostFor is what a round asks the store for (ClaimAdoptions' lost):
// lostWait once this member's own connection has been up for as long,
// else zero, which hands over the members whose lease is gone alone.
func (a *adopter) lostFor() time.Duration {
	if a.lostWait <= 0 || a.upFor == nil || a.upFor() < a.lostWait {
		return 0
	}
	return a.lostWait
}
