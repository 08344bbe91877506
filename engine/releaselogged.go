package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// errLogFound ends a scan of the log at the record looked for.
var errLogFound = errors.New("found")

// loggedApplied returns the audit record that applied the message
// quarantine entry id holds, when the log the store keeps has one: a
// message held below its window or in an epoch no longer kept, whose key
// had left the key window, that was applied before (a copy a trailing
// path delivered, a replay). Released, it is that message again: a
// duplicate the log proves, never applied twice. Nil when the entry holds
// no key of its own (a conflict, whose release is always a duplicate), or
// the log the store keeps holds none (records moved to the archive are not
// read). A message whose kind places it at decide time (its key follows
// from its place) has no key yet: for a LoggedPlacer's, it returns instead
// the records of its route and source the kind may find it among, the
// last maxLoggedKind. It reads the whole log, without the engine's lock.
func (e *Engine) loggedApplied(ctx context.Context, id uint64) (*AuditRecord, []LoggedApplication, error) {
	q, err := e.store.Quarantined(ctx, id)
	if err != nil || q.Outcome == Conflict.String() {
		return nil, nil, nil // the release reports what the store says of the entry
	}
	m := Message{Topic: q.Topic, Payload: q.Payload}
	d, err := e.decodeFresh(&m)
	if err != nil {
		return nil, nil, nil
	}
	var look func(r AuditRecord) error
	var found *AuditRecord
	var kind []LoggedApplication
	switch lp, ok := d.placer.(LoggedPlacer); {
	case d.placer == nil && q.Key != "" && !d.key.IsZero():
		look = func(r AuditRecord) error {
			if r.Key != d.key || r.Digest != d.digest {
				return nil
			}
			if o, ok := ParseOutcome(r.Outcome); !ok || !o.Effective() {
				return nil
			}
			found = &r
			return errLogFound
		}
	case ok && lp.Loggable():
		next := 0 // where the next is kept once maxLoggedKind are: over the oldest
		look = func(r AuditRecord) error {
			if r.Sequence == nil || r.Key.IsZero() || r.Route != d.route.Name || !slices.Equal(r.Source, d.source) || !lp.MayBeLogged(*r.Sequence) {
				return nil
			}
			if o, ok := ParseOutcome(r.Outcome); !ok || !o.Effective() {
				return nil
			}
			l := LoggedApplication{Epoch: r.Epoch, Sequence: *r.Sequence, Key: r.Key, Digest: r.Digest, Position: r.Position, Member: r.Member}
			if len(kind) < maxLoggedKind {
				kind = append(kind, l)
				return nil
			}
			kind[next] = l
			next = (next + 1) % maxLoggedKind
			return nil
		}
	default:
		return nil, nil, nil
	}
	scan := func(fn func(AuditRecord) error) error { return e.store.ScanAudit(ctx, 1, fn) }
	if cs := e.caps.Chains; cs != nil {
		chains, err := cs.Chains(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("read the audit log for an earlier application of #%d: %w", id, err)
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
		return nil, nil, fmt.Errorf("read the audit log for an earlier application of #%d: %w", id, err)
	}
	return found, kind, nil
}

// maxLoggedKind bounds the records loggedApplied keeps for a kind to look
// among (a Sparkplug edge's at one seq: one in 256 of its records). The
// last ones read are kept (of a group's chains, each read in turn: the
// last chains' last); a release whose own record lies before them is
// decided as the windows tell, held again where they cannot.
const maxLoggedKind = 1 << 16

// loggedAt names where the log holds r: its position, and its member's
// chain on a shared store.
func loggedAt(r *AuditRecord) string {
	if r.Member != "" {
		return fmt.Sprintf("audit position %d of member %s", r.Position, r.Member)
	}
	return fmt.Sprintf("audit position %d", r.Position)
}
