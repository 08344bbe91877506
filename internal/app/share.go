package app

import (
	"context"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
)

// shareMembership is how this run member records, in a group's store, that
// it holds its MQTT share group's subscription, and asks, as it stops, to
// leave it (engine.ShareMembership); and how it adopts the sessions of
// the members gone while they held it (engine.ShareAdopter).
type shareMembership struct {
	join  func(context.Context) error
	quit  func(context.Context) error
	leave func(context.Context) (bool, error)
	// hold, once this member's lease has run out, says why its consumers
	// must not connect (mqtt.Config.Hold); nil when no member adopts
	// another's session.
	hold func() string
	// group and adopt, when adopt is set, adopt the sessions of group's
	// gone members; claimTTL is how long a claim of one holds; lostWait
	// how long a member's share stays lost, its broker lost while it
	// reaches the store, before its session is adopted
	// (mqtt.adopt_lost_after).
	group    string
	adopt    engine.ShareAdopter
	claimTTL time.Duration
	lostWait time.Duration
	// paths, set for a member of mqtt.feeds instead of join, quit, leave
	// and adopt, records its share on each path, and adopts the gone
	// members' sessions there (newFeedsSource).
	paths engine.SharePaths
}

// shareMembership returns how the source joins and leaves its share group:
// it joins each time the broker grants the group's subscription, never
// before, since a member recorded as holding a subscription it does not
// hold yet would let the last member holding it leave. The store records
// the session's client id with it, for a member that adopts the session
// once this one is gone. A member of mqtt.feeds records its share path
// by path, and adopts path by path (paths); it never asks to leave. Zero
// when there is nothing to join: no mqtt.share_group, or JetStream, or a
// store that keeps no members (with mqtt.feeds: none that keeps them path
// by path, or hands out no claims).
func (a *App) shareMembership(cfg *config.Config) shareMembership {
	group := cfg.MQTT.ShareGroup
	caps := a.Store.Capabilities()
	sh := caps.Share
	if group == "" || sh == nil || cfg.Input == config.InputJetStream {
		return shareMembership{}
	}
	if len(cfg.MQTT.Feeds) > 0 {
		if caps.Paths == nil || caps.Claims == nil || caps.Claims.ClaimTTL() <= 0 {
			return shareMembership{}
		}
		return shareMembership{group: group, paths: caps.Paths, claimTTL: caps.Claims.ClaimTTL(), hold: a.leaseLapsed,
			lostWait: time.Duration(cfg.MQTT.AdoptLostAfter)}
	}
	client := cfg.MQTT.ClientID
	m := shareMembership{
		join:     func(ctx context.Context) error { return sh.JoinShare(ctx, group, client) },
		quit:     func(ctx context.Context) error { return sh.QuitShare(ctx, group) },
		leave:    func(ctx context.Context) (bool, error) { return sh.LeaveShare(ctx, group) },
		group:    group,
		adopt:    caps.Adopt,
		lostWait: time.Duration(cfg.MQTT.AdoptLostAfter),
	}
	if caps.Claims != nil {
		m.claimTTL = caps.Claims.ClaimTTL()
	}
	if m.claimTTL <= 0 {
		m.adopt = nil
	}
	if m.adopt != nil {
		m.hold = a.leaseLapsed
	}
	return m
}

// leaseLapsed says why this member keeps off its brokers once its lease
// has run out: no renewal has reached the store for the lease's whole
// ttl (the store, or the way to it, is down), so the group's live members
// may adopt its session, and a connection of its own would take the
// session back while it can commit nothing. "" while the lease holds, or
// since a renewal succeeded again. The ttl runs from when the last
// renewal's answer came, after the store started it: the member keeps
// off a round trip after the store's lease ended, and an adopter that
// comes in between takes the session from it once.
func (a *App) leaseLapsed() string {
	rep := a.Store.Capabilities().Stats
	if rep == nil {
		return ""
	}
	st := rep.SharedStats()
	if st.LeaseError == "" || st.LeaseRenewed.IsZero() {
		return ""
	}
	if since := time.Since(st.LeaseRenewed); since >= st.LeaseTTL {
		return fmt.Sprintf("this member's lease ran out: no renewal has reached the store for %v (%s); "+
			"the share group's live members adopt its session meanwhile, and it connects again once a renewal succeeds",
			since.Round(time.Second), st.LeaseError)
	}
	return ""
}
