package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/mqttprobe"
	"github.com/replayguard/replayguard/source/mqtt"
	"github.com/replayguard/replayguard/source/mqtt3"
)

// mqttSource is run's MQTT source: the MQTT 5 consumer or the MQTT 3.1.1
// one, whichever version the brokers speak. Both are built (and so their
// configuration validated) before anything starts; the one chosen once the
// version is negotiated runs.
type mqttSource struct {
	v5   *mqtt.Consumer
	v311 *mqtt3.Consumer
	cfg  mqtt.Config
	want mqttprobe.Choice
	log  *slog.Logger
	cur  atomic.Pointer[source]
	// setting is where the configuration sets this source's brokers and
	// protocol when it is not mqtt itself: mqtt.feeds[N], a feed's.
	setting string
}

func newMQTTSource(want mqttprobe.Choice, mc mqtt.Config, p mqtt.Processor, log *slog.Logger) (*mqttSource, error) {
	v5, err := mqtt.New(mc, p)
	if err != nil {
		return nil, err
	}
	v311, err := mqtt3.New(mqtt3Config(mc), p)
	if err != nil {
		return nil, err
	}
	return &mqttSource{v5: v5, v311: v311, cfg: mc, want: want, log: log}, nil
}

// mqtt3Config is the MQTT 3.1.1 consumer's share of the MQTT 5 consumer's
// configuration: 3.1.1 has no session expiry and no receive maximum.
func mqtt3Config(mc mqtt.Config) mqtt3.Config {
	c := mqtt3.Config{Brokers: mc.Brokers, ClientID: mc.ClientID, CleanStart: mc.CleanStart, ShareGroup: mc.ShareGroup, FormerShareGroups: mc.FormerShareGroups, FormerFilters: mc.FormerFilters,
		JoinShare: mc.JoinShare, QuitShare: mc.QuitShare, LeaveShare: mc.LeaveShare, Hold: mc.Hold, Username: mc.Username, Password: mc.Password, TLS: mc.TLS, KeepAlive: mc.KeepAlive,
		BatchSize: mc.BatchSize, BatchLinger: mc.BatchLinger, Logger: mc.Logger, Observer: mc.Observer}
	c.Filters = append(c.Filters, mc.Filters...)
	return c
}

// Ready reports whether the chosen consumer is ready; false until the
// version is negotiated.
func (s *mqttSource) Ready() bool {
	if c := s.cur.Load(); c != nil {
		return (*c).Ready()
	}
	return false
}

// NotReady says why Ready is false; "" when it is true. A feed's names
// its own settings and brokers: mqtt.brokers is empty when feeds are set.
func (s *mqttSource) NotReady() string {
	c := s.cur.Load()
	switch {
	case s.setting == "" && c == nil:
		return "the MQTT version is not yet negotiated with the brokers (mqtt.protocol)"
	case s.setting == "":
		return (*c).NotReady()
	case c == nil:
		return fmt.Sprintf("the MQTT version is not yet negotiated with the brokers (%s.brokers: %s; %s.protocol)",
			s.setting, s.brokers(), s.setting)
	case !s.connected():
		return fmt.Sprintf("not connected to a broker (%s.brokers: %s)", s.setting, s.brokers())
	}
	return (*c).NotReady()
}

// connected reports whether the chosen consumer holds a connection.
func (s *mqttSource) connected() bool {
	if c := s.cur.Load(); c != nil && *c == source(s.v311) {
		return s.v311.Connected()
	}
	return s.v5.Connected()
}

// Connected reports whether the source holds a connection to a broker,
// whatever its commits: what a feed's status shows.
func (s *mqttSource) Connected() bool { return s.cur.Load() != nil && s.connected() }

// brokers lists the source's broker URLs, their passwords redacted.
func (s *mqttSource) brokers() string {
	out := make([]string, len(s.cfg.Brokers))
	for i, b := range s.cfg.Brokers {
		out[i] = b
		if u, err := url.Parse(b); err == nil {
			out[i] = u.Redacted()
		}
	}
	return strings.Join(out, ", ")
}

// Run negotiates the MQTT version with the brokers (mqtt.protocol: 5,
// 3.1.1, or auto: 5 first), then runs the consumer of that version until
// ctx is done. It returns an error wrapping mqttprobe.ErrNotNegotiable,
// naming the versions tried and what to set, when every broker refused
// every version tried; brokers that are down are waited for.
func (s *mqttSource) Run(ctx context.Context) error {
	timeout := s.cfg.ConnectTimeout
	if timeout == 0 {
		timeout = mqtt.DefaultConnectTimeout
	}
	opts := mqttprobe.Options{ClientID: s.cfg.ClientID + config.ProbeClientIDSuffix, Username: s.cfg.Username, Password: s.cfg.Password,
		TLS: s.cfg.TLS, Timeout: timeout, Setting: s.setting}
	v, err := mqttprobe.Negotiate(ctx, s.cfg.Brokers, s.want, opts,
		mqttprobe.Retry{Min: mqtt.DefaultConnectRetryMin, Max: mqtt.DefaultConnectRetryMax}, s.log)
	if ctx.Err() != nil {
		return nil // stopped while waiting for a broker
	}
	if err != nil {
		return fmt.Errorf("mqtt: %w", err)
	}
	var c source = s.v5
	if v == mqttprobe.V311 {
		c = s.v311
	}
	s.cur.Store(&c)
	return c.Run(ctx)
}
