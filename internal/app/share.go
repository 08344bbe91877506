package app

import (
	"context"

	"github.com/replayguard/replayguard/config"
)

// shareMembership is how this run member records, in a group's store, that
// it holds its MQTT share group's subscription, and asks, as it stops, to
// leave it (engine.ShareMembership).
type shareMembership struct {
	join  func(context.Context) error
	quit  func(context.Context) error
	leave func(context.Context) (bool, error)
}

// shareMembership returns how the source joins and leaves its share group:
// it joins each time the broker grants the group's subscription, never
// before, since a member recorded as holding a subscription it does not
// hold yet would let the last member holding it leave. Zero when there is
// nothing to join: no mqtt.share_group, mqtt.feeds or JetStream, or a
// store that keeps no members.
func (a *App) shareMembership(cfg *config.Config) shareMembership {
	group := cfg.MQTT.ShareGroup
	sh := a.Store.Capabilities().Share
	if group == "" || sh == nil || cfg.Input == config.InputJetStream || len(cfg.MQTT.Feeds) > 0 {
		return shareMembership{}
	}
	return shareMembership{
		join:  func(ctx context.Context) error { return sh.JoinShare(ctx, group) },
		quit:  func(ctx context.Context) error { return sh.QuitShare(ctx, group) },
		leave: func(ctx context.Context) (bool, error) { return sh.LeaveShare(ctx, group) },
	}
}
