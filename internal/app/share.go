package app

import (
	"context"
	"fmt"

	"github.com/replayguard/replayguard/config"
)

// joinShare records in a group's store that this run member holds its
// MQTT share group's subscription, and returns how its source asks, as it
// stops, to leave it (engine.ShareMembership). nil when there is nothing
// to leave: no mqtt.share_group, mqtt.feeds or JetStream, or a store that
// keeps no members.
func (a *App) joinShare(ctx context.Context, cfg *config.Config) (func(context.Context) (bool, error), error) {
	group := cfg.MQTT.ShareGroup
	sh := a.Store.Capabilities().Share
	if group == "" || sh == nil || cfg.Input == config.InputJetStream || len(cfg.MQTT.Feeds) > 0 {
		return nil, nil
	}
	if err := sh.JoinShare(ctx, group); err != nil {
		return nil, fmt.Errorf("join share group %q: %w", group, err)
	}
	return func(ctx context.Context) (bool, error) { return sh.LeaveShare(ctx, group) }, nil
}
