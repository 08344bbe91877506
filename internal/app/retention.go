package app

import (
	"context"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/audit"
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
		Head:       func(context.Context) (uint64, error) { return a.auditHead(), nil },
		Logger:     a.Log,
	})
}
