package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/replayguard/replayguard/audit"
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
		Logger:     a.Log,
	})
}

// retainEvery runs pass now and then every interval until ctx is done.
// pass returns the errors of the chains it failed on, one each: each is
// logged (the next pass tries again) and, when m is not nil, counted,
// and a pass that failed on none is timed. A pass cut short by ctx is
// neither: the stop ended it.
func retainEvery(ctx context.Context, every time.Duration, log *slog.Logger, m *metrics.Retention, pass func(context.Context) []error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		errs := pass(ctx)
		if ctx.Err() == nil {
			for _, err := range errs {
				log.Error("audit retention", "err", err)
			}
			if m != nil {
				m.Pass(time.Now(), len(errs))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
