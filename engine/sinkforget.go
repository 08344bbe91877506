package engine

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// OutcomeSinkForgotten is the audit record of an operator's word that an
// audit sink is gone for good (`replayguard audit forget-sink`): its
// cursors, which held audit retention back, are dropped once the record
// is committed. Reason names the sink, its cursors and why.
const OutcomeSinkForgotten = "sink_forgotten"

// RecordSinkForgotten writes the audit record of an operator forgetting
// an audit sink, reason saying which, its cursors and why (required),
// operator who. The caller drops the sink's cursors once it returns nil:
// a failure in between leaves them, and forgetting again finishes it.
func (e *Engine) RecordSinkForgotten(ctx context.Context, reason, operator string) (AuditRecord, error) {
	if strings.TrimSpace(reason) == "" {
		return AuditRecord{}, fmt.Errorf("%w: forgetting an audit sink needs a reason", ErrConfig)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.ready(ctx); err != nil {
		return AuditRecord{}, err
	}
	var r AuditRecord
	err := e.act(ctx, nil, func(now time.Time) {
		r = AuditRecord{Time: now.UTC(), Outcome: OutcomeSinkForgotten, Reason: reason, Operator: operator}
		e.appendAudit(&r)
	})
	return r, err
}
