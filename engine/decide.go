package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// decideOne decodes, decides and records one message. ref is the
// quarantine entry an operator releases (0: a delivery) and by the
// operator's name.
func (e *Engine) decideOne(m *Message, now time.Time, ref uint64, by string) Decision {
	d, err := e.decode(m)
	if len(e.unacked) > 0 && ref == 0 && m.recovery == 0 {
		if q, ok := e.redeliveredHeld(m); ok {
			return e.record(m, unackedDuplicate(d, err, m.Topic, q), now, 0, by)
		}
	}
	if err != nil {
		var de *decodeError
		if !errors.As(err, &de) {
			de = &decodeError{reason: err.Error()}
		}
		dec := Decision{Outcome: Malformed, Reason: de.reason, Sequence: -1}
		if d != nil {
			var why string
			dec.Route = d.route.Name
			dec.Source, why = d.malformedSource(m.Topic)
			dec.Reason = sourceReason(dec.Reason, why)
		}
		return e.record(m, dec, now, ref, by)
	}
	if d.placer != nil {
		// A delivery first applied, decided again from the journal, was
		// acknowledged as genuine: its kind places it as a release.
		if dec, stop := e.place(d, m, now, ref != 0 || m.recovery == recoveredApplied, m.recovery == recoveredApplied); stop {
			if dec.Outcome.Held() {
				e.heldPlaced(d, m.Topic, now)
			}
			return e.record(m, dec, now, ref, by)
		}
		if m.loggedKind != nil {
			m.logged = nil // of an earlier try, placed elsewhere
		}
		for i := range m.loggedKind { // placed where the log records it applied: that very message
			if l := &m.loggedKind[i]; l.Key == d.key && l.Digest == d.digest {
				m.logged = &AuditRecord{Position: l.Position, Member: l.Member, Key: l.Key, Digest: l.Digest}
				break
			}
		}
	}
	dec := e.decide(d, now, ref != 0, m.keyApplied || m.logged != nil, m.recovery)
	if dec.Outcome.Held() && ref == 0 { // a delivery, or one decided again from the journal
		if id, ok := e.heldAgain(m, &dec); ok {
			dup := heldDuplicate(dec, id)
			if m.recovery != 0 {
				dup.Reason = joinReason(dup.Reason, reasonRecovered)
			}
			return e.record(m, dup, now, 0, by)
		}
	}
	if dec.Outcome.Held() && d.placer != nil {
		e.heldPlaced(d, m.Topic, now)
	}
	if m.recovery != 0 {
		dec.Reason = joinReason(dec.Reason, reasonRecovered)
	}
	var note string // what the effects add to the reason
	if dec.Outcome.Effective() {
		late := dec.Outcome == AppliedLate || ref != 0 || m.recovery != 0
		dec.changes, note = e.project(d, dec.version, late)
		if d.placer != nil {
			e.placed(d, m.Topic, now)
		}
		if m.Feed != "" {
			e.fedBy(d, m.Feed)
		}
		if n := e.external(m, d, now); n != "" {
			note = joinReason(note, n)
		}
	}
	if ref != 0 {
		why := dec.Reason
		dec.Reason = fmt.Sprintf("%s #%d", reasonReleased, ref)
		switch {
		case dec.Outcome == Duplicate && m.keyApplied: // held as a conflict
			dec.Reason += ": its key was applied with other content before it was held"
		case dec.Outcome == Duplicate && m.logged != nil:
			dec.Reason += fmt.Sprintf(": the audit log records its key applied with the same content at %s, "+
				"after which the key left the key window", loggedAt(m.logged))
		case dec.Outcome == Duplicate && why == reasonSeqSeen: // placed where the window saw a message whose key is gone
			dec.Reason += ": its window saw it, and its key has left the key window"
		case dec.Outcome == Duplicate:
			dec.Reason += ": its key was applied meanwhile"
		case dec.Outcome.Held() && why != "": // its sql effect was refused again: held anew
			dec.Reason += ": " + why
		}
	}
	if note != "" {
		dec.Reason = joinReason(dec.Reason, note)
	}
	return e.record(m, dec, now, ref, by)
}

// place has d's kind place it against its source's committed state; stop
// says it could not be (held, or malformed), with the decision to record.
func (e *Engine) place(d *Delivery, m *Message, now time.Time, released, recovered bool) (dec Decision, stop bool) {
	d.seq, d.epoch, d.epochNum, d.epochInt, d.older, d.seen = -1, "", true, 0, false, false
	p := d.placement(e, m.Topic, now)
	p.released, p.recovered, p.logged = released, recovered, m.loggedKind
	hold, err := d.placer.Place(d, p)
	switch {
	case err != nil:
		return Decision{Outcome: Malformed, Reason: err.Error(), Route: d.route.Name, Source: d.source, Sequence: -1}, true
	case hold != "":
		return Decision{Outcome: Quarantined, Reason: hold, Route: d.route.Name, Source: d.source, Sequence: -1}, true
	}
	return Decision{}, false
}

// placed tells d's kind that d was applied, and commits its source's
// window when the kind changed its state.
func (e *Engine) placed(d *Delivery, topic string, now time.Time) {
	p := d.placement(e, topic, now)
	if d.placer.Applied(d, p) {
		if src := p.Window(); src != nil { // the window Applied changed, looked up once
			e.pending.touched(src)
		}
	}
}

// heldPlaced tells d's kind, when it keeps a record of what it held, that
// d was held, and commits its source's window when the kind changed its
// state.
func (e *Engine) heldPlaced(d *Delivery, topic string, now time.Time) {
	h, ok := d.placer.(HeldPlacer)
	if !ok {
		return
	}
	p := d.placement(e, topic, now)
	if h.Held(d, p) {
		if src := p.Window(); src != nil {
			e.pending.touched(src)
		}
	}
}

// fedBy notes feed as the path that delivered the last message applied of
// d's source.
func (e *Engine) fedBy(d *Delivery, feed string) {
	if src := e.lookupSource(d); src != nil && src.Feed != feed {
		src.Feed = feed
		e.pending.touched(src)
	}
}

// lookupSource returns the window of d's (route, source), or nil.
func (e *Engine) lookupSource(d *Delivery) *SourceState {
	var buf [128]byte
	id := appendSourceID(buf[:0], d.route.Name, d.source)
	if s := e.sources[string(id)]; s != nil || e.rows == nil {
		if s != nil {
			s.usedIn = e.pending.gen
		}
		return s
	}
	return e.readSource(id)
}

// decide is the decision proper, on a decoded message: the key window, then
// the source window for sequenced routes. An effective outcome updates the
// windows and runs the effects. release waives the below-window and
// old-epoch rules and turns a conflict into a duplicate: a released message
// is applied at most once. keyApplied says a released message was held as
// a conflict: its key was applied, with other content, before it was held;
// the key window may have forgotten that since (ttl, max_entries), the
// quarantine entry has not. recovery says how a delivery decided again
// from the journal was first decided: one first applied has those rules
// waived alone; one not applied (a duplicate, or held) is held rather than
// applied, as its first copy's key may have left the window since.
func (e *Engine) decide(d *Delivery, now time.Time, release, keyApplied bool, recovery uint8) Decision {
	dec := Decision{Route: d.route.Name, Key: d.key, Digest: d.digest, Source: d.source,
		Epoch: d.epoch, Sequence: d.seq, ID: d.id}
	dg, hit := e.keys.lookup(d.key)
	if !hit && e.unread != nil {
		e.unread.key(d.key)
	}
	if hit || keyApplied {
		switch {
		case dg == digest64(d.digest) || release:
			dec.Outcome, dec.Reason = Duplicate, reasonKeySeen
		default:
			dec.Outcome, dec.Reason = Conflict, reasonConflict
		}
		return dec
	}
	if d.seen {
		dec.Outcome, dec.Reason = Duplicate, reasonStateSeen
		return dec
	}
	ver := Version{Ordinal: e.tail.Position + 1, Source: sourceTag(d.route.Name, d.source)}
	refusal, refused := e.refused[d.key]
	switch {
	case refused:
	case recovery == recoveredHeld:
		refusal, refused = reasonNotAppliedFirst, true
	case recovery == recoveredStale:
		refusal, refused = reasonStale, true
	}
	if d.seq >= 0 { // a sequenced route's message (a Sparkplug NDEATH has none)
		src := e.source(d)
		if refused { // decide on a copy: a refused message leaves the window as it is
			c := src.clone()
			src = &c
		}
		v := src.checkSequence(d, e.opts.SequenceSpan, e.opts.KeepEpochs, release || recovery == recoveredApplied)
		if refused && v.outcome.Effective() {
			dec.Outcome, dec.Reason = Quarantined, refusal
			return dec
		}
		dec.Outcome, dec.Reason, dec.Gap = v.outcome, v.reason, v.gap
		if !v.outcome.Effective() {
			return dec
		}
		e.pending.touched(src)
		ver.Epoch, ver.Sequence = releasedEpochRank(d), d.seq
		if v.epoch != nil {
			ver.Epoch = v.epoch.Value
		}
	} else {
		dec.Outcome = Applied
		if refused {
			dec.Outcome, dec.Reason = Quarantined, refusal
			return dec
		}
	}
	aged, stamp := now.UnixNano(), now.UnixNano() // what the window ages the key by, and the time stored with it
	switch {
	case e.ages != nil:
		aged = e.ages.last
	case e.group != nil:
		aged, stamp = e.keyStamp, e.keyStamp
	}
	ord := e.keys.insert(d.key, d.digest, aged)
	e.pending.batch.Keys = append(e.pending.batch.Keys, KeyEntry{Ordinal: ord, Key: d.key, Digest: d.digest, Time: stamp})
	if e.groupOrder {
		// Audit positions are per member; key ordinals follow time across
		// the group, so unsequenced `set` writers are ordered by when
		// they were applied, whichever member applied them.
		ver.Ordinal = ord
	}
	dec.version = ver
	return dec
}

// external adds the sql statements and outbox entries of an effective
// message to the pending batch; its audit record comes next, at
// e.tail.Position+1. note is what they add to the decision's reason: a sql
// effect run once for each of several values of a path.
func (e *Engine) external(m *Message, d *Delivery, now time.Time) (note string) {
	r := d.route
	if r.sqls == 0 && r.forwards == 0 {
		return ""
	}
	pos := e.tail.Position + 1
	b := &e.pending.batch
	for i, ef := range r.effects {
		switch {
		case ef.sql != nil:
			runs, paths, _ := d.sqlRuns(ef.sql) // checked when placed (checkRuns)
			if runs == 1 {
				b.SQL = append(b.SQL, SQLStatement{Key: d.key, Route: r.Name, Effect: i, SQL: ef.sql.stmt, Args: sqlArgs(ef.sql, d, m.Topic, 0, 1)})
				continue
			}
			for j := range runs {
				b.SQL = append(b.SQL, SQLStatement{Key: d.key, Route: r.Name, Effect: i, SQL: ef.sql.stmt,
					Args: sqlArgs(ef.sql, d, m.Topic, j, runs), Run: j + 1, Runs: runs})
			}
			note = joinReason(note, d.sqlRunsNote(i, runs, paths))
		case ef.fwd != nil && d.targets[i] != "":
			b.Outbox = append(b.Outbox, OutboxEntry{ID: OutboxID(pos, ef.fwd.index), Output: ef.fwd.output,
				Target: d.targets[i], Route: r.Name, Topic: m.Topic, Source: cloneStrings(d.source), Key: d.key,
				Epoch: strings.Clone(d.epoch), Sequence: d.seq, Time: now.UTC(), Payload: append([]byte(nil), m.Payload...)})
		case ef.fwd != nil && !ef.fwd.skipped.Swap(true):
			// Skipped like an entity effect naming an absent field; said
			// once, for a misspelt path skips every message.
			e.log.Warn("forward skipped: its template names a field the message lacks (absent or null); "+
				"each applied message without it goes without this copy, and this is logged once",
				"route", r.Name, "effect", i, "output", ef.fwd.output, "template", ef.fwd.tmpl,
				"field", r.absentField(ef.fwd, d.vals), "topic", m.Topic, "key", d.key.String())
		}
	}
	return note
}

// source returns the window of d's (route, source), creating it.
func (e *Engine) source(d *Delivery) *SourceState {
	var buf [128]byte
	id := appendSourceID(buf[:0], d.route.Name, d.source)
	s := e.sources[string(id)] // no allocation for the lookup
	if s == nil && e.rows != nil {
		if s = e.readSource(id); s == nil {
			e.rows.sources++
		}
	}
	if s == nil {
		// Copies, not d.srcBuf and substrings of the payload: they would
		// keep the message alive.
		s = &SourceState{Route: d.route.Name, Source: cloneStrings(d.source), unstored: true}
		key := string(id)
		e.sources[key] = s
		if e.rows != nil {
			e.pending.fresh.sources = append(e.pending.fresh.sources, key)
		}
	}
	s.usedIn = e.pending.gen
	return s
}

// record appends the decision's audit record (and quarantine entry) to the
// pending batch.
func (e *Engine) record(m *Message, dec Decision, now time.Time, ref uint64, by string) Decision {
	dec.Position = e.tail.Position + 1
	r := AuditRecord{Position: dec.Position, Time: now.UTC(), Route: dec.Route, Topic: m.Topic,
		Source: dec.Source, Epoch: dec.Epoch, ID: dec.ID, Outcome: dec.Outcome.String(),
		Reason: dec.Reason, Dup: m.Dup, Broker: m.Broker, Feed: m.Feed, Connected: m.Connected.UTC(), Ref: ref, Operator: by, Gap: dec.Gap}
	if len(dec.changes) > 0 {
		r.Effects = dec.changes
	}
	if dec.Sequence >= 0 {
		// The batch's sequences share a slab instead of an allocation each;
		// a full slab is left to the records that point into it, and the
		// next is twice its size, up to 1024 (a one-message batch, a release,
		// takes 64 bytes, not 8 KiB).
		seqs := &e.pending.seqs
		if len(*seqs) == cap(*seqs) {
			*seqs = make([]int64, 0, min(1024, max(8, 2*cap(*seqs))))
		}
		*seqs = append(*seqs, dec.Sequence)
		r.Sequence = &(*seqs)[len(*seqs)-1]
	}
	if !dec.Key.IsZero() {
		r.Key, r.Digest = dec.Key, dec.Digest
	}
	e.appendAudit(&r)
	b := &e.pending.batch
	if dec.Outcome.Held() {
		key := ""
		if !dec.Key.IsZero() {
			key = dec.Key.String()
		}
		dec.Held = e.qbase + dec.Position
		b.Quarantine = append(b.Quarantine, e.noteHeldEntry(QuarantineEntry{ID: dec.Held, Time: r.Time,
			Outcome: r.Outcome, Reason: dec.Reason, Route: dec.Route, Topic: m.Topic, Key: key,
			Dup: m.Dup, Broker: m.Broker, Feed: m.Feed, Payload: append([]byte(nil), m.Payload...)}, dec.Key))
	}
	return dec
}

func (e *Engine) appendAudit(r *AuditRecord) {
	r.Position = e.tail.Position + 1
	r.Member = e.member
	h := seal(r, e.tail.Hash)
	e.tail = AuditHead{Position: r.Position, Hash: h}
	e.pending.batch.Audit = append(e.pending.batch.Audit, *r)
}

// Release decides a quarantined message again with the below-window and
// old-epoch rules waived: it is applied once, or is a duplicate when its key
// was applied meanwhile. A message that is still malformed stays held and
// Release returns ErrStillMalformed. operator names who released it; the
// audit record carries it (empty: nobody named).
func (e *Engine) Release(ctx context.Context, id uint64, operator string) (Decision, error) {
	logged, loggedKind, err := e.loggedApplied(ctx, id) // a read of the log, while the consumer goes on
	if err != nil {
		return Decision{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	q, done, err := e.held(ctx, id)
	if err != nil {
		return Decision{}, err
	}
	defer done()
	m := Message{Topic: q.Topic, Payload: q.Payload, Dup: q.Dup, Broker: q.Broker, Feed: q.Feed,
		keyApplied: q.Outcome == Conflict.String(), loggedKind: loggedKind}
	if m.prepared, m.prepErr = e.decodeFresh(&m); m.prepErr != nil { // decideOne reuses it
		return Decision{}, fmt.Errorf("%w: #%d: %v", ErrStillMalformed, id, m.prepErr)
	}
	if d := m.prepared; logged != nil && d.key == logged.Key && d.digest == logged.Digest {
		m.logged = logged
	}
	var dec Decision
	release := func(now time.Time) {
		dec = e.decideOne(&m, now, id, operator)
		e.pending.batch.Resolved = append(e.pending.batch.Resolved, id)
	}
	if err := e.act(ctx, []Message{m}, release); err != nil {
		return Decision{}, err
	}
	e.forgetUnacked(id)
	e.forgetHeld(id)
	return dec, nil
}

// held returns quarantine entry id for an operator's action, and done to
// call once the action is committed or failed. Called with e.mu held. On a
// single-owner store act lets the lock go while the commit runs: a second
// action on the entry meanwhile still finds it held in the store (a
// release would apply a message just discarded), and is refused here.
func (e *Engine) held(ctx context.Context, id uint64) (q QuarantineEntry, done func(), err error) {
	if err := e.ready(ctx); err != nil {
		return QuarantineEntry{}, nil, err
	}
	if q, err = e.store.Quarantined(ctx, id); err != nil {
		return QuarantineEntry{}, nil, err
	}
	if e.acting[id] {
		return QuarantineEntry{}, nil, fmt.Errorf("%w: quarantine entry #%d is being released or discarded by another request", ErrInProgress, id)
	}
	if e.acting == nil {
		e.acting = map[uint64]bool{}
	}
	e.acting[id] = true
	return q, func() { delete(e.acting, id) }, nil
}

// act records an operator's action on msgs (what it decides again) with
// fill and commits it. Called with e.mu held; on a single-owner store it is
// released while the commit runs.
func (e *Engine) act(ctx context.Context, msgs []Message, fill func(now time.Time)) error {
	return e.win.act(ctx, msgs, fill)
}

// Discard removes a quarantined message for good, auditing who (operator)
// said why (reason, required).
func (e *Engine) Discard(ctx context.Context, id uint64, reason, operator string) (Decision, error) {
	if reason == "" {
		return Decision{}, fmt.Errorf("%w: discard needs a reason", ErrConfig)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	q, done, err := e.held(ctx, id)
	if err != nil {
		return Decision{}, err
	}
	defer done()
	var key Hash
	if q.Key != "" {
		if key, err = ParseHash(q.Key); err != nil {
			return Decision{}, fmt.Errorf("quarantine entry #%d: key: %w", id, err)
		}
	}
	var r AuditRecord
	discard := func(now time.Time) {
		r = AuditRecord{Time: now.UTC(), Route: q.Route, Topic: q.Topic, Key: key,
			Outcome: OutcomeDiscarded, Reason: reason, Dup: q.Dup, Broker: q.Broker, Feed: q.Feed, Ref: id, Operator: operator}
		e.appendAudit(&r)
		e.pending.batch.Resolved = append(e.pending.batch.Resolved, id)
	}
	if err := e.act(ctx, nil, discard); err != nil {
		return Decision{}, err
	}
	e.forgetUnacked(id)
	e.forgetHeld(id)
	return Decision{Outcome: Quarantined, Reason: reason, Position: r.Position, Route: q.Route, Sequence: -1}, nil
}

// OutcomeDiscarded is the audit outcome of an operator's discard.
const OutcomeDiscarded = "discarded"

// OutcomeReleased names an operator's release in a member's journal (its
// audit record has the outcome of deciding the message again, with Ref).
const OutcomeReleased = "released"

// releasedEpochRank orders the `set` writes of a released message whose
// epoch window is gone: an integer epoch by its value, a string one below
// every kept epoch, so that it never overwrites newer state.
func releasedEpochRank(d *Delivery) int64 {
	if d.epochNum {
		return d.epochInt
	}
	return math.MinInt64
}
