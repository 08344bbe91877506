package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/mqttprobe"
	"github.com/replayguard/replayguard/metrics"
	rgsource "github.com/replayguard/replayguard/source" // events; app has a type named source
	"github.com/replayguard/replayguard/source/jetstream"
	"github.com/replayguard/replayguard/source/mqtt"
)

// source is what run consumes from: the MQTT consumer (5 or 3.1.1, see
// mqttSource) or the JetStream one.
type source interface {
	// Run consumes until ctx is done, then commits and acknowledges what
	// is in hand; it returns early on a permanent refusal.
	Run(ctx context.Context) error
	// Ready reports whether the source is connected and committing; safe
	// from any goroutine.
	Ready() bool
	// NotReady says why Ready is false ("" when it is true): what /readyz
	// answers when the store and the outbox leave nothing to say.
	NotReady() string
}

// RunMember is the member id run writes a shared store's chain under when
// store.member is not set: mqtt.client_id (with mqtt.feeds and no
// mqtt.client_id, the first feed's), or the JetStream consumer.
func RunMember(cfg *config.Config) string { return cfg.RunMember() }

// newSource builds the consumer that cfg.Input names, feeding p; share is
// how the MQTT consumer joins its share group once subscribed and asks to
// leave it as it stops (App.shareMembership); marks, a single-owner
// store's, keeps where the JetStream consumer stands in its stream (nil:
// not kept).
func newSource(cfg *config.Config, log *slog.Logger, m *metrics.Metrics, reg prometheus.Registerer, p mqtt.Processor,
	share shareMembership, marks engine.StreamMarks) (source, error) {
	if cfg.Input == config.InputJetStream {
		jc, err := jetStreamConfig(cfg, log, m.JetStream(reg))
		if err != nil {
			return nil, err
		}
		jc.Marks = marks
		return jetstream.New(jc, p)
	}
	if len(cfg.MQTT.Feeds) > 0 {
		var met *metrics.Adoptions
		if share.paths != nil && cfg.Store.Shared() {
			met = m.Adoptions(reg)
		}
		return newFeedsSource(cfg, log, m, p, share, met)
	}
	mc, err := consumerConfig(cfg, log, m)
	if err != nil {
		return nil, err
	}
	mc.JoinShare, mc.QuitShare, mc.LeaveShare, mc.Hold = share.join, share.quit, share.leave, share.hold
	if share.adopt == nil || !cfg.Store.Shared() {
		return newMQTTSource(mqttprobe.Choice(cfg.MQTT.Protocol), mc, p, log)
	}
	clock := &connClock{next: mc.Observer}
	mc.Observer = clock
	one := &oneCaller{p: p}
	src, err := newMQTTSource(mqttprobe.Choice(cfg.MQTT.Protocol), mc, one, log)
	if err != nil {
		return nil, err
	}
	ad := &adopter{group: share.group, store: share.adopt, every: share.claimTTL / 3, base: mc, proc: one,
		ready: src.Ready, lostWait: share.lostWait, upFor: clock.upFor, consumer: src.adoption, log: log, met: m.Adoptions(reg)}
	return &adoptingSource{mqttSource: src, ad: ad}, nil
}

func jetStreamConfig(cfg *config.Config, log *slog.Logger, obs rgsource.Observer) (jetstream.Config, error) {
	j := cfg.JetStream
	c := jetstream.Config{URL: j.URL, CredsFile: j.CredsFile, Stream: j.Stream, Consumer: j.Consumer,
		Subjects: j.Subjects, MaxAckPending: j.MaxAckPending, AckWait: time.Duration(j.AckWait),
		BatchSize: j.BatchSize, BatchLinger: time.Duration(j.BatchLinger), Alone: !cfg.Store.Shared(), Logger: log, Observer: obs}
	for _, r := range cfg.Routes {
		c.Routes = append(c.Routes, jetstream.Route{Name: r.Name, Topic: r.Topic})
	}
	tlsCfg, err := clientTLS(j.TLS)
	if err != nil {
		return c, fmt.Errorf("jetstream: %w", err)
	}
	c.TLS = tlsCfg
	return c, nil
}
