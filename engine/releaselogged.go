package engine

import (
	"context"
	"errors"
	"fmt"
)

// errLogFound ends a scan of the log at the record looked for.
var errLogFound = errors.New("found")

// loggedApplied returns the audit record that applied the message
// quarantine entry id holds, when the log the store keeps has one: a
// message held below its window or in an epoch no longer kept, whose key
// had left the key window, that was applied before (a copy a trailing
// path delivered, a replay). Released, it is that message again: a
// duplicate the log proves, never applied twice. Nil when the entry holds
// no key of its own (a conflict, whose release is always a duplicate; a
// message held before its kind could place it), or the log the store
// keeps holds none (records moved to the archive are not read). It reads
// the whole log, without the engine's lock.
func (e *Engine) loggedApplied(ctx context.Context, id uint64) (*AuditRecord, error) {
	q, err := e.store.Quarantined(ctx, id)
	if err != nil || q.Key == "" || q.Outcome == Conflict.String() {
		return nil, nil // the release reports what the store says of the entry
	}
	m := Message{Topic: q.Topic, Payload: q.Payload}
	d, err := e.decodeFresh(&m)
	if err != nil || d.placer != nil || d.key.IsZero() {
		return nil, nil
	}
	var found *AuditRecord
	look := func(r AuditRecord) error {
		if r.Key != d.key || r.Digest != d.digest {
			return nil
		}
		if o, _ := ParseOutcome(r.Outcome); !o.Effective() {
			return nil
		}
		found = &r
		return errLogFound
	}
	scan := func(fn func(AuditRecord) error) error { return e.store.ScanAudit(ctx, 1, fn) }
	if cs := e.caps.Chains; cs != nil {
		chains, err := cs.Chains(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the audit log for an earlier application of #%d: %w", id, err)
		}
		scan = func(fn func(AuditRecord) error) error {
			for _, c := range chains {
				if err := cs.ScanChain(ctx, c.Member, 1, fn); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if err := scan(look); err != nil && !errors.Is(err, errLogFound) {
		return nil, fmt.Errorf("read the audit log for an earlier application of #%d: %w", id, err)
	}
	return found, nil
}

// loggedAt names where the log holds r: its position, and its member's
// chain on a shared store.
func loggedAt(r *AuditRecord) string {
	if r.Member != "" {
		return fmt.Sprintf("audit position %d of member %s", r.Position, r.Member)
	}
	return fmt.Sprintf("audit position %d", r.Position)
}
