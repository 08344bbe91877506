package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/web"
)

// newDrainer builds the forward effects' drainer over st, with an output
// for each kind the routes forward to or the file names under outputs;
// nil when there is none. A store without an outbox is left to the
// engine to refuse, naming the route. Every other kind gets an output
// that fails, naming the setting (unsetOutput): entries of it that an
// earlier configuration left pending are then reported as waiting, and
// never pass silently.
func newDrainer(cfg *config.Config, st Store, member string, opts Options) (*forward.Drainer, error) {
	ob := st.Capabilities().Outbox
	kinds := cfg.OutputKinds()
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
	forwarded := cfg.ForwardKinds()
	for _, k := range kinds {
		out, err := newOutput(cfg, k, opts)
		switch {
		case err != nil && slices.Contains(forwarded, k):
			closeAll()
			return nil, fmt.Errorf("outputs.%s: %w", k, err)
		case err != nil: // named, and no route forwards to it: its entries wait, saying why
			out = forward.Unconfigured(fmt.Sprintf("the outbox holds %s entries left pending by an earlier configuration, and no route forwards to %s: outputs.%s cannot deliver them: %v", k, k, k, err))
		}
		outputs[k] = out
	}
	for _, k := range []string{engine.OutputMQTT, engine.OutputWebhook, engine.OutputNATS} {
		if outputs[k] == nil {
			outputs[k] = unsetOutput(k)
		}
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

// unsetOutput is the output of a kind no route forwards to and the file
// does not name under outputs: its entries, which a configuration that
// forwarded to it left pending, are never sent, and every attempt fails
// saying so (forward.Unconfigured).
func unsetOutput(k string) forward.Output {
	return forward.Unconfigured(fmt.Sprintf("the outbox holds %s entries left pending by an earlier configuration, and no route forwards to %s nor does the file name outputs.%s: "+
		"name outputs.%s (or forward to it again) to deliver them, or hold and drop them (outbox hold, outbox drop)", k, k, k, k))
}

// warnUndrained logs a warning when no drainer was built (no route
// forwards, and the file names no output) while member's outbox holds
// entries an earlier configuration left pending: nothing delivers them.
func (a *App) warnUndrained(ctx context.Context, member string) {
	ob := a.Store.Capabilities().Outbox
	if a.Forward != nil || ob == nil {
		return
	}
	if n, err := ob.OutboxDepth(ctx, member); err == nil && n > 0 {
		a.Log.Warn("the outbox holds entries left pending by an earlier configuration, and no route forwards nor does the file name an output: "+
			"they are not delivered; name their output under outputs (outbox list names the oldest) to deliver them, or hold and drop them (outbox hold, outbox drop)",
			"pending", n)
	}
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
