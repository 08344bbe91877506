package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/web"
)

// newDrainer builds the forward effects' drainer over st, with an output
// for each kind the routes forward to; nil when no route forwards. A
// store without an outbox is left to the engine to refuse, naming the
// route.
func newDrainer(cfg *config.Config, st Store, member string, opts Options) (*forward.Drainer, error) {
	kinds := cfg.ForwardKinds()
	ob := st.Capabilities().Outbox
	if len(kinds) == 0 || ob == nil {
		return nil, nil
	}
	outputs := map[string]forward.Output{}
	closeAll := func() {
		for _, o := range outputs {
			o.Close()
		}
	}
	fo := forward.Options{Store: ob, Member: member, MaxEntries: cfg.Outbox.MaxEntries, Logger: opts.Logger,
		Observer: opts.ForwardObserver, MaxBackoffs: map[string]time.Duration{}}
	for _, k := range kinds {
		out, err := newOutput(cfg, k, opts)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("outputs.%s: %w", k, err)
		}
		outputs[k] = out
	}
	if w := cfg.Outputs.Webhook; w != nil {
		fo.MaxBackoffs[engine.OutputWebhook] = time.Duration(w.MaxBackoff)
	}
	fo.Outputs = outputs
	if c, ok := st.(forward.Claimer); ok && opts.ClaimOutboxes {
		fo.Claimer = c
	}
	d, err := forward.New(fo)
	if err != nil {
		closeAll()
		return nil, err
	}
	return d, nil
}

func newOutput(cfg *config.Config, kind string, opts Options) (forward.Output, error) {
	switch kind {
	case engine.OutputMQTT:
		o := cfg.Outputs.MQTT
		if o == nil {
			return nil, fmt.Errorf("no configuration") // SetDefaults fills it
		}
		mo := forward.MQTTOptions{Brokers: o.Brokers, ClientID: o.ClientID, Username: o.Username,
			KeepAlive: time.Duration(o.KeepAlive), Logger: opts.Logger}
		if mo.ClientID == "" {
			mo.ClientID = opts.OutputClientID
		}
		var err error
		_, label := outputPasswordSetting(cfg)
		if mo.Password, err = secretOf(strings.TrimPrefix(label, "outputs.mqtt."), o.PasswordEnv, o.PasswordFile); err != nil {
			return nil, err
		}
		if mo.TLS, err = clientTLS(o.TLS); err != nil {
			return nil, err
		}
		return forward.NewMQTT(mo)
	case engine.OutputWebhook:
		wo := forward.WebhookOptions{}
		if w := cfg.Outputs.Webhook; w != nil {
			wo.Timeout = time.Duration(w.Timeout)
			var err error
			if wo.TLS, err = clientTLS(w.TLS); err != nil {
				return nil, err
			}
		}
		return forward.NewWebhook(wo)
	case engine.OutputNATS:
		n := cfg.Outputs.NATS
		if n == nil {
			return nil, fmt.Errorf("no configuration")
		}
		no := forward.NATSOptions{URL: n.URL, Logger: opts.Logger}
		var err error
		if no.TLS, err = clientTLS(n.TLS); err != nil {
			return nil, err
		}
		if no.TLS == nil && strings.HasPrefix(n.URL, "tls://") {
			no.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		return forward.NewNATS(no)
	}
	return nil, fmt.Errorf("output kind %q is not one of mqtt, webhook, nats", kind)
}

// RunForward runs the drainer until ctx is done; a no-op without one.
func (a *App) RunForward(ctx context.Context) {
	if a.Forward != nil {
		a.Forward.Run(ctx, a.Engine)
	}
}

// startForward runs the drainer in a goroutine until ctx is done or stop
// is called, and returns stop, which stops it and waits; safe to call more
// than once. A no-op without a drainer.
func (a *App) startForward(ctx context.Context) (stop func()) {
	if a.Forward == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // stopped and waited for by stop
		defer close(done)
		a.RunForward(ctx)
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// FlushForward waits up to timeout for the outbox to empty while
// RunForward delivers, and says how many entries are left for a later run.
func (a *App) FlushForward(ctx context.Context, timeout time.Duration) (pending int, err error) {
	if a.Forward == nil {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return a.Forward.Drain(ctx)
}

// ForwardStatus is the drainer's state for the web server's Deps.Forward;
// nil when no route forwards.
func (a *App) ForwardStatus() func() web.ForwardStatus {
	d := a.Forward
	if d == nil {
		return nil
	}
	return func() web.ForwardStatus {
		st := d.Status()
		out := web.ForwardStatus{Member: st.Member, Depth: st.Depth, MaxEntries: st.MaxEntries, Full: st.Full,
			FullSince: st.FullSince, Outputs: make([]web.ForwardOutput, len(st.Outputs))}
		for i, o := range st.Outputs {
			out.Outputs[i] = web.ForwardOutput{Output: o.Output, Member: o.Member, Delivered: o.Delivered, Held: o.Held,
				Failures: o.Failures, Failing: o.Failing, Since: o.Since, Attempts: o.Attempts, LastError: o.LastError,
				Stuck: web.ForwardStuck(o.Stuck)}
		}
		return out
	}
}

// readiness combines a shared store's status (storeStatus, nil on a
// single-owner store) with the drainer's: a full outbox is an error, a
// failing output a warning.
func (a *App) readiness(storeStatus func() web.StoreStatus) func() web.StoreStatus {
	if a.Forward == nil {
		return storeStatus
	}
	return func() web.StoreStatus {
		var st web.StoreStatus
		if storeStatus != nil {
			st = storeStatus()
		}
		fs := a.Forward.Status()
		st.Error = joinNonEmpty(st.Error, fs.Blocked())
		st.Warning = joinNonEmpty(st.Warning, fs.Warning())
		return st
	}
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
