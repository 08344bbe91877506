package app

import (
	"context"
	"fmt"
	"log/slog"
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
	c := mqtt3.Config{Brokers: mc.Brokers, ClientID: mc.ClientID, CleanStart: mc.CleanStart, ShareGroup: mc.ShareGroup,
		Username: mc.Username, Password: mc.Password, TLS: mc.TLS, KeepAlive: mc.KeepAlive,
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

// NotReady says why Ready is false; "" when it is true.
func (s *mqttSource) NotReady() string {
	if c := s.cur.Load(); c != nil {
		return (*c).NotReady()
	}
	return "the MQTT version is not yet negotiated with the brokers (mqtt.protocol)"
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
		TLS: s.cfg.TLS, Timeout: timeout}
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
