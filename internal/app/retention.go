package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/metrics"
)

// Retention returns the audit retention audit.retention asks for on the
// app's single-owner store, or nil when it is off. It needs the engine
// (the committed chain head): open the app for writing. A shared store's
// chains are trimmed each by its own retention, over the chains the
// member claims (run and ingest do it).
func (a *App) Retention() (*audit.Retention, error) {
	ac := a.Config.Audit
	if !ac.Retention.Enabled() {
		return nil, nil
	}
	st, ok := a.Store.(audit.RetainStore)
	if !ok || a.Engine == nil || a.Config.Store.Shared() {
		return nil, fmt.Errorf("audit.retention: the %s store cannot trim its audit log here", a.Config.Store.Kind)
	}
	return audit.NewRetention(st, audit.RetentionOptions{
		Archive:    ac.Archive,
		MaxAge:     time.Duration(ac.Retention.MaxAge),
		MaxRecords: uint64(ac.Retention.MaxRecords),
		Head:       a.retainHead,
		Cursors:    a.retainCursors,
		Ages:       a.ages,
		Logger:     a.Log,
	})
}

// retainEvery runs pass now and then every interval until ctx is done.
// pass returns what the audit sinks held of each chain it trimmed beyond
// audit.retention.max_records (nil when it read none: what the last pass
// found stands), and the errors of the chains it failed on,
// one each: each error is logged (the next pass tries again) and, when m
// is not nil, counted, and a pass that failed on none is timed; what the
// sinks held goes to held (nil: nowhere), which says it, and to m. A pass
// cut short by ctx is none of these: the stop ended it.
func retainEvery(ctx context.Context, every time.Duration, log *slog.Logger, m *metrics.Retention, held *heldBySinks,
	pass func(context.Context) ([]chainHeld, []error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		found, errs := pass(ctx)
		if ctx.Err() == nil {
			for _, err := range errs {
				log.Error("audit retention", "err", err)
			}
			if held != nil && (found != nil || len(errs) == 0) { // nil with errors: no chain was read, the last pass's stands
				held.note(found)
			}
			if m != nil {
				m.Pass(time.Now(), len(errs))
				if held != nil {
					m.Held(held.bySink())
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sinkNames are the names of the sinks audit.sinks configures.
func sinkNames(cfg *config.Config) []string {
	var out []string
	for _, s := range cfg.Audit.Sinks {
		out = append(out, s.Name)
	}
	return out
}
