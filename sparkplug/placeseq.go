package sparkplug

import (
	"fmt"

	"github.com/replayguard/replayguard/engine"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// placeSeq sets d's epoch from the message's birth and unwraps its seq
// against the epoch window's highest sequence; a new birth's seq starts a
// window as it is. A message whose content was applied at a placement
// congruent to its seq is that message again (same key, same digest: a
// proven duplicate), however far behind the highest it is; otherwise it
// takes the nearest placement, unless that is ambiguous (half the ring
// away) or contradicts its timestamp (older than the highest's, yet above
// it: a replay more than half the ring behind).
func (sp *spMessage) placeSeq(d *engine.Delivery, p *engine.Placement, src *engine.SourceState) string {
	if sp.newBirth {
		sp.epoch, sp.epochInt = epochOf(sp.bdSeq, sp.rebirth)
		sp.seq = sp.seqRaw
		return ""
	}
	b := &src.Sparkplug.Births[sp.birth]
	sp.epoch, sp.epochInt = epochOf(b.BdSeq, b.Rebirth)
	if sp.loggedAt(d, p) {
		sp.logged = true
		return ""
	}
	w := src.Kept(sp.epoch)
	if w == nil {
		return fmt.Sprintf("%s: the window of session %s is no longer kept", engine.ReasonOldEpoch, sp.epoch)
	}
	h := w.High
	if h < 0 {
		sp.seq = sp.seqRaw
		return ""
	}
	s, ok := unwrap8(sp.seqRaw, h)
	older := sp.p.Timestamp < b.HighStamp
	below := h - ((h-sp.seqRaw)%256+256)%256 // its nearest placement behind the highest
	if !ok || s <= h || older {
		if c, found := sp.appliedAt(d, p, s, ok, h); found {
			sp.seq = c
			return ""
		}
	}
	if p.Recovered() && older && below >= 0 {
		// Sent before the highest, by its timestamp: its place is its
		// nearest placement behind the highest, or a ring or more below
		// where another message took that, whether that placement is
		// within half the ring of the highest or further (the other
		// members went on more than one and a half rings past it).
		if c, found := sp.untakenBelow(d, p, w, below); found {
			sp.seq = c
			return ""
		}
	}
	if p.Released() && !p.Recovered() && older && below >= max(0, w.First) {
		// An operator judged it genuine, sent before the highest by its
		// timestamp: its place is one behind the highest that no other
		// message took, if the windows can tell which.
		c, why := sp.releasedBehind(d, p, w, below)
		if why != "" {
			return why
		}
		sp.seq = c
		return ""
	}
	if older && (!ok || s > h) {
		// Behind the highest by its timestamp, more than half the ring:
		// when one placement congruent to its seq is left in the window
		// (none below it at or above the window's first), and the window
		// saw it, it is that message again, whose key has left the key
		// window: the window decides it a duplicate.
		if below >= 0 && below-256 < w.First && h-below < int64(p.SequenceSpan()) && seenIn(w, below) {
			sp.seq = below
			return ""
		}
	}
	if p.Released() && (!ok || s > h && older) {
		// An operator judged it genuine: its timestamp says on which side
		// of the highest it was sent, and the nearest placement there is
		// the likeliest (a message more than half the ring behind).
		if older && below >= 0 {
			sp.seq = below
			return ""
		}
		if !older && !ok {
			sp.seq = below + 256
			return ""
		}
	}
	switch {
	case !ok:
		return fmt.Sprintf("seq %d cannot be placed: 128 from the session's highest, %d (seq %d)", sp.seqRaw, h, h%256)
	case s < 0:
		return fmt.Sprintf("seq %d cannot be placed: it would come before the session's first (highest %d)", sp.seqRaw, h)
	case s > h && older:
		return fmt.Sprintf("seq %d cannot be placed: its timestamp %d predates that of the session's highest, %d (seq %d), "+
			"yet it would come after it: it is more than half the ring behind", sp.seqRaw, sp.p.Timestamp, h, h%256)
	case s <= h && sp.p.Timestamp > b.HighStamp:
		// Stamped after the highest yet placed at or below it: not this
		// birth's message (a birth's seq and timestamps grow together),
		// but the next birth's, whose NBIRTH is not decided yet (another
		// member holds it, or it was reordered). Placed here it would take
		// the key of this birth's own message at that seq, and its replay
		// after the NBIRTH would be applied again.
		return fmt.Sprintf("seq %d cannot be placed: its timestamp %d is later than that of the session's highest, %d (seq %d), "+
			"yet it would come at or before it: it waits for the NBIRTH of its birth", sp.seqRaw, sp.p.Timestamp, h, h%256)
	case s > h && sp.birth == 0 && !src.Sparkplug.Online:
		// The current session's NDEATH was applied: a message above its
		// highest is either the next session's, whose NBIRTH is not
		// decided yet (another member holds it, or it was reordered), or
		// one the dead session sent after its last. Placed in the dead
		// session it would be read with that session's aliases, and its
		// replay after the next NBIRTH applied again.
		return fmt.Sprintf("seq %d cannot be placed: edge %q is offline (%s) and it would come after "+
			"%s highest, %d (seq %d): it waits for the next NBIRTH", sp.seqRaw, sp.edge, offlineWhy(src.Sparkplug, b), whoseHighest(b), h, h%256)
	}
	sp.seq = s
	return ""
}

// untakenBelow places a delivery this member applied before its shared
// store lost the commit, decided again from its journal, older than the
// session's highest, whose nearest placement behind the highest, s (half
// the ring or more behind it, too), another message took since, its key
// held with other content (appliedAt found none with its own at a
// placement congruent to its seq): another member went on from what the
// store kept, so it was sent a ring or more before, and its place is the
// nearest below s, within the window, that no message took. found is
// false when s is not taken, when no placement below is free, and when
// one at or below s that the window saw has lost its key first: that may
// be this very message, which the broker delivered again to another
// member after the store lost this member's commit, applied there once
// (below it, it would be applied twice). An operator's release is not
// placed so, for the same reason.
func (sp *spMessage) untakenBelow(d *engine.Delivery, p *engine.Placement, w *engine.EpochWindow, s int64) (int64, bool) {
	other := func(c int64) bool {
		return p.HoldsKey(engine.SequencedKey(d.RouteName(), d.Source(), "n"+sp.epoch, c))
	}
	if !other(s) {
		return 0, false
	}
	low := max(0, w.High-int64(p.SequenceSpan()), w.First)
	for c := s - 256; c >= low; c -= 256 {
		switch {
		case other(c):
		case seenIn(w, c):
			return 0, false
		default:
			return c, true
		}
	}
	return 0, false
}

// releaseLow is the lowest placement of w's session that its window can
// still tell about (seen, or a gap): within the window's own span (its
// bitmap's, which a changed sequence_span does not widen) below its
// highest, above its Floor, at or above its First.
func releaseLow(p *engine.Placement, w *engine.EpochWindow) int64 {
	return max(0, w.High-int64(w.Span(p.SequenceSpan()))+1, w.Floor+1, w.First)
}

// belowWindowRings bounds how many placements below its window a release
// is looked for at.
const belowWindowRings = 64

// releasedBehind places a message an operator released, sent before the
// session's highest by its timestamp: its seq tells its place only up to
// a ring, and its timestamp only that it lies behind the highest. It
// looks at every placement congruent to its seq from the nearest behind
// the highest down to the session's first (up to belowWindowRings below
// the window), each looked up before one is chosen (on a shared store,
// each key read once, in one read of the rows):
//   - one whose key the key window holds with its content is that very
//     message: a duplicate there;
//   - one whose key it holds with other content is another message's, and
//     so is the highest (stamped after it): not its place;
//
// Its place is one of the others. When the window saw all of them (their
// keys gone), it is that very message again, decided a duplicate at the
// nearest; when it saw none, it is applied late at the nearest. When it
// saw some and not others, or one lies below the window, which tells
// nothing of it, whether it was applied cannot be told: it is held again,
// never applied twice nor decided a duplicate and lost. Held too when
// every placement is another message's.
func (sp *spMessage) releasedBehind(d *engine.Delivery, p *engine.Placement, w *engine.EpochWindow, below int64) (int64, string) {
	low, bottom := releaseLow(p, w), max(0, w.First)
	own, seen, gap, unknown := int64(-1), int64(-1), int64(-1), int64(-1)
	rings := 0
	for c := below; c >= bottom; c -= 256 {
		if c < low {
			if rings++; rings > belowWindowRings {
				if unknown < 0 {
					unknown = c // not looked at: nothing tells of it
				}
				break
			}
		}
		key := engine.SequencedKey(d.RouteName(), d.Source(), "n"+sp.epoch, c)
		mine, held := p.Holds(key, sp.digest), p.HoldsKey(key)
		switch {
		case mine:
			if own < 0 {
				own = c
			}
		case held || c == w.High: // another message's
		case c < low:
			if unknown < 0 {
				unknown = c
			}
		case seenIn(w, c):
			if seen < 0 {
				seen = c
			}
		case gap < 0:
			gap = c
		}
	}
	why := func(format string, args ...any) string {
		return fmt.Sprintf("seq %d cannot be placed: sent before the session's highest, %d (seq %d), ", sp.seqRaw, w.High, w.High%256) +
			fmt.Sprintf(format, args...)
	}
	switch {
	case own >= 0:
		return own, ""
	case unknown >= 0:
		return 0, why("it may lie below the window (sequence_span), at %d, where neither the window nor the key window "+
			"tells whether it was applied", unknown)
	case seen >= 0 && gap >= 0:
		return 0, why("it may be the message applied at %d, whose key has left the key window, or one never received, at %d: "+
			"which cannot be told", seen, gap)
	case seen >= 0:
		return seen, ""
	case gap >= 0:
		return gap, ""
	}
	return 0, why("each of its placements from %d down holds another message", below)
}

// Loggable reports whether the audit log may prove the released message
// applied (engine.LoggedPlacer): a message placed in a sequence window,
// not an NBIRTH nor an NDEATH.
func (sp *spMessage) Loggable() bool { return sp.typ != spNBirth && sp.typ != spNDeath }

// MayBeLogged reports whether an audit record at sequence seq may be the
// released message's own (engine.LoggedPlacer): at a placement congruent
// to its seq.
func (sp *spMessage) MayBeLogged(seq int64) bool { return seq >= 0 && seq%256 == sp.seqRaw }

// loggedAt looks, for a released message, for the placement where the
// audit log records its content applied (Placement.Logged): in any epoch
// of its edge (data decided before its NBIRTH is applied in the birth
// before), at a placement congruent to its seq. Its content holds its
// timestamp and seq: there it is that very message, whatever its windows
// still tell (its key gone from the key window, the placement below its
// window, the window no longer kept, another epoch than the one it is
// taken for now), and the engine decides it a duplicate the log proves.
// It sets the epoch and sequence it found.
func (sp *spMessage) loggedAt(d *engine.Delivery, p *engine.Placement) bool {
	for _, l := range p.Logged() {
		if l.Digest == sp.digest && l.Sequence%256 == sp.seqRaw &&
			l.Key == engine.SequencedKey(d.RouteName(), d.Source(), "n"+l.Epoch, l.Sequence) {
			sp.epoch, sp.seq = l.Epoch, l.Sequence
			return true
		}
	}
	return false
}

// appliedAt looks for a placement at or below h, congruent to the seq,
// whose key the key window holds with d's digest.
func (sp *spMessage) appliedAt(d *engine.Delivery, p *engine.Placement, s int64, ok bool, h int64) (int64, bool) {
	if !ok || s > h {
		s = h - ((h-sp.seqRaw)%256+256)%256
	}
	low := max(0, h-int64(p.SequenceSpan()))
	for c := s; c >= low; c -= 256 {
		if p.Holds(engine.SequencedKey(d.RouteName(), d.Source(), "n"+sp.epoch, c), sp.digest) {
			return c, true
		}
	}
	return 0, false
}

// resolve names every metric (by its name, or by its alias in table) and
// reads its value with its datatype (the payload's, or the birth's).
func (sp *spMessage) resolve(table *engine.SparkplugTable) string {
	n := len(sp.p.Metrics)
	if cap(sp.metrics) < n {
		sp.metrics = make([]spResolved, n)
	}
	sp.metrics = sp.metrics[:n]
	for i, mt := range sp.p.Metrics {
		name := mt.Name
		if name == "" {
			var ok bool
			if table != nil {
				name, ok = table.Aliases[mt.Alias]
			}
			if !ok {
				return fmt.Sprintf("alias %d of edge %q is not in its current birth certificate", mt.Alias, sp.edge)
			}
		} else if mt.HasAlias && table != nil && (sp.typ == spNData || sp.typ == spDData) {
			// Named one metric and aliased as another: which one the
			// edge meant cannot be told.
			if named, ok := table.Aliases[mt.Alias]; ok && named != name {
				whose := fmt.Sprintf("edge %q", sp.edge)
				if sp.typ == spDData {
					whose = fmt.Sprintf("device %q of %s", sp.device, whose)
				}
				return fmt.Sprintf("metric %q of %s has alias %d, which its birth certificate gives to %q: "+
					"which of the two it sets cannot be told", name, whose, mt.Alias, named)
			}
		}
		typ := mt.Datatype
		if typ == 0 && table != nil {
			typ = table.Types[name]
			if v := mt.Value; v.Kind == ValueNumber && v.Width > 0 && !inRange(v.Bits, v.Width, pb.DataType(typ)) {
				return fmt.Sprintf("metric %q: the integer %d is out of the range of its datatype %s from its birth", name, v.Bits, pb.DataType(typ))
			}
		}
		v, ok := engineValue(mt.Value, mt.Datatype == 0, typ)
		if !ok {
			return fmt.Sprintf("metric %q: %s is not a number", name, mt.Value.Text)
		}
		sp.metrics[i] = spResolved{name: name, typ: typ, val: v, hist: mt.Historical}
	}
	return ""
}
