package app

import (
	"context"
	"errors"

	"github.com/replayguard/replayguard/engine"
)

// errRecalled ends the scan of recall once past the head it read.
var errRecalled = errors.New("recalled")

// recall tells the twin timing which feed delivered each of the messages
// the last recentArrivals audit records of this process's log applied
// (fewer messages than that: duplicates and held ones take records too; on
// a shared store, the member's chain): after a restart, a twin that comes
// on the other path and is applied again, its key gone from the key
// window, is counted, timed and logged as one, as it was before the
// restart, rather than pass unseen. Records of no feed (written before
// mqtt.feeds, or by ingest) are passed over. Call it before Run.
func (s *feedsSource) recall(ctx context.Context, st engine.Store, member string) error {
	if s.one == nil {
		return nil
	}
	byName := make(map[string]*FeedProcessor, len(s.feeds))
	for _, f := range s.feeds {
		byName[f.name] = f.proc
	}
	var head uint64
	scan := func(from uint64, fn func(engine.AuditRecord) error) error { return st.ScanAudit(ctx, from, fn) }
	if cs := st.Capabilities().Chains; cs != nil {
		chains, err := cs.Chains(ctx)
		if err != nil {
			return err
		}
		for _, c := range chains {
			if c.Member == member {
				head = c.Head.Position
			}
		}
		scan = func(from uint64, fn func(engine.AuditRecord) error) error { return cs.ScanChain(ctx, member, from, fn) }
	} else {
		h, err := auditHead(ctx, st)
		if err != nil {
			return err
		}
		head = h.Position
	}
	if head == 0 {
		return nil
	}
	from := uint64(1)
	if head > recentArrivals {
		from = head - recentArrivals + 1
	}
	s.one.timeMu.Lock()
	defer s.one.timeMu.Unlock()
	err := scan(from, func(r engine.AuditRecord) error {
		if r.Position > head {
			return errRecalled
		}
		o, ok := engine.ParseOutcome(r.Outcome) // not an operator's outbox action: a decision
		f := byName[r.Feed]
		if f == nil || r.Key.IsZero() || !ok || !o.Effective() {
			return nil
		}
		// As the live timing does: a twin applied again keeps its first
		// copy's arrival; the same feed's applying again renews it.
		if first, known := s.one.firsts.at[r.Key]; !known || first.feed == f {
			s.one.firsts.add(r.Key, arrival{feed: f, at: r.Time})
		}
		return nil
	})
	if errors.Is(err, errRecalled) {
		return nil
	}
	return err
}
