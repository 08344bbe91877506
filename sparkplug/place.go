package sparkplug

import (
	"fmt"
	"strconv"

	"github.com/replayguard/replayguard/engine"
)

// Place gives a Sparkplug message its identity against the edge's
// committed session, at decide time: its epoch (the session, from bdSeq or
// from the birth it belongs to), its sequence (seq unwrapped in that
// epoch's window), its metrics' names (aliases resolved with that birth's
// tables), then its values, key and digest. A message that cannot be
// placed is held; nothing is ever guessed.
func (sp *spMessage) Place(d *engine.Delivery, p *engine.Placement) (hold string, err error) {
	if sp.bad != nil {
		return "", sp.bad
	}
	sp.birth, sp.newBirth, sp.rebirth, sp.bdSeq, sp.at, sp.ended, sp.death, sp.past = -1, false, 0, 0, 0, false, engine.Hash{}, false
	sp.logged = false
	sp.seq, sp.epoch, sp.epochInt = -1, "", 0
	src := p.Window()
	var st *engine.SparkplugState
	if src != nil {
		st = src.Sparkplug
	}
	var why string
	switch sp.typ {
	case spNBirth:
		why = sp.placeBirth(d, p, src, st)
	case spNDeath:
		why = sp.placeDeath(d, p, st)
	default:
		why = sp.placeData(d, p, src, st)
	}
	if why != "" {
		return why, nil
	}
	if sp.newBirth {
		// An NBIRTH decided after its session's NDEATH (the broker
		// reordered them, or another member decided the NDEATH first)
		// opens a session that has already ended: the key window holds
		// the NDEATH's key, or, once it has left, another birth of the
		// session records it.
		if death, ok := deathRecord(st, sp.bdSeq); ok {
			sp.ended, sp.death = true, death
		} else {
			sp.ended = p.HoldsKey(deathKey(d, sp.bdSeq))
		}
	}
	sp.highs = sp.highs[:0]
	if sp.newBirth && src != nil { // the windows it may retire: their highest sequence, for Applied
		for _, w := range src.Epochs {
			sp.highs = append(sp.highs, epochHigh{epoch: w.Epoch, high: w.High})
		}
	}
	d.SetPlace(sp.epoch, sp.epochInt, sp.seq)
	if sp.at > 0 {
		d.SetOlderEpoch()
	}
	if err := p.SetReadings(sp.pathValue); err != nil {
		return "", err
	}
	if sp.typ == spNDeath {
		d.SetKey(deathKey(d, sp.bdSeq), sp.digest)
	} else {
		d.SetKey(engine.SequencedKey(d.RouteName(), d.Source(), "n"+sp.epoch, sp.seq), sp.digest)
	}
	return "", nil
}

// deathKey is the key of the NDEATH of d's edge's session bdSeq.
func deathKey(d *engine.Delivery, bdSeq int64) engine.Hash {
	return engine.EpochEndKey(d.RouteName(), d.Source(), "n"+strconv.FormatInt(bdSeq, 10))
}

// placeBirth places an NBIRTH: a newer bdSeq starts a session, the same
// bdSeq with a later timestamp is a rebirth in it, one matching a kept
// birth's content is that birth again (its replay), and one stamped
// between two kept births is a birth decided late (olderBirth). Anything
// else is held.
func (sp *spMessage) placeBirth(d *engine.Delivery, p *engine.Placement, src *engine.SourceState, st *engine.SparkplugState) string {
	if why := sp.resolve(nil); why != "" {
		return why
	}
	sp.digest = sp.contentDigest()
	raw := int64(sp.p.BdSeq)
	if st == nil || len(st.Births) == 0 {
		sp.bdSeq, sp.newBirth = raw, true
		return sp.placeSeq(d, p, nil)
	}
	b, why := unwrapBdSeq(raw, st, "bdSeq")
	if why != "" {
		return why
	}
	sp.bdSeq = b
	if i := findBirth(st, b, sp.digest); i >= 0 {
		sp.birth = i
		return sp.placeSeq(d, p, src)
	}
	cur := st.Births[0]
	switch {
	case b > st.BdSeq:
		sp.newBirth = true
	case b == cur.BdSeq && sp.p.Timestamp > cur.Stamp:
		sp.newBirth, sp.rebirth = true, cur.Rebirth+1
		if sp.rebirth >= 1<<20 {
			return fmt.Sprintf("session %d has had too many rebirths to number another", b)
		}
	default:
		if sp.retiredBirth(d, p, st) {
			return ""
		}
		if !sp.olderBirth(st, b) {
			return fmt.Sprintf("%s (bdSeq %d, raw %d) is neither a kept birth of the edge, nor newer than its current one (%s), "+
				"nor a birth between two kept ones", engine.ReasonOldEpoch, b, raw, cur.Epoch)
		}
	}
	return sp.placeSeq(d, p, nil)
}

// olderBirth places an NBIRTH of session b that is older than the edge's
// current birth and matches no kept one: in a group, a birth another
// member decided after a newer one (a rebirth's NBIRTH after the next
// session's). Stamped between two kept births, it is kept between them as
// it would have been in order: a rebirth of the birth before when it has
// the same bdSeq, else its session's first birth. Its epoch must sort
// between theirs (no kept birth took that number), or it cannot be placed.
// Its messages take keys of an epoch no window ever held, and the data of
// it that was applied in the birth before, decided before it, is still
// found there (placedBefore).
func (sp *spMessage) olderBirth(st *engine.SparkplugState, b int64) bool {
	ts := sp.p.Timestamp
	k := 1
	for k < len(st.Births) && st.Births[k].Stamp >= ts {
		k++
	}
	if k == len(st.Births) || st.Births[k-1].Stamp <= ts {
		return false // older than every kept birth, or stamped with a newer one
	}
	before, after := &st.Births[k], &st.Births[k-1]
	rebirth := 0
	if b == before.BdSeq {
		rebirth = before.Rebirth + 1
	}
	_, v := epochOf(b, rebirth)
	_, lo := epochOf(before.BdSeq, before.Rebirth)
	_, hi := epochOf(after.BdSeq, after.Rebirth)
	if v <= lo || v >= hi || rebirth >= 1<<20 {
		return false
	}
	sp.bdSeq, sp.rebirth, sp.newBirth, sp.at = b, rebirth, true, k
	return true
}

// unwrapBdSeq places raw, a message's 8-bit bdSeq (named what in the
// reason), next to the edge's current session; a reason when it cannot.
func unwrapBdSeq(raw int64, st *engine.SparkplugState, what string) (int64, string) {
	b, ok := unwrap8(raw, st.BdSeq)
	switch {
	case !ok:
		return 0, fmt.Sprintf("%s %d cannot be placed: 128 from the edge's current session %d", what, raw, st.BdSeq)
	case b < 0:
		return 0, fmt.Sprintf("%s %d cannot be placed: it would come before the edge's first session", what, raw)
	}
	return b, ""
}

// placeDeath places an NDEATH by its bdSeq: its identity is (source,
// session, NDEATH), so a replayed one is a duplicate while the key window
// holds its key. Once the key has left, the births of its session, kept
// or retired, record the NDEATH that ended it: one with its content is
// that NDEATH again, a proven duplicate; one with other content, or one
// of a session whose births are no longer kept (it may have been applied
// and recorded there), or stamped before a birth of an earlier session
// (a replay from bdSeq's previous turn, which its 8-bit bdSeq places in
// a session to come) is held. Nothing but the current session's, or a
// newer one's, death changes the edge's state.
func (sp *spMessage) placeDeath(d *engine.Delivery, p *engine.Placement, st *engine.SparkplugState) string {
	raw := int64(sp.p.BdSeq)
	sp.bdSeq = raw
	if st != nil && len(st.Births) > 0 {
		b, why := unwrapBdSeq(raw, st, "NDEATH bdSeq")
		if why != "" {
			return why
		}
		sp.bdSeq = b
		for i, birth := range st.Births {
			if birth.BdSeq == b {
				sp.birth = i
				break
			}
		}
	}
	sp.epoch, sp.epochInt = strconv.FormatInt(sp.bdSeq, 10), sp.bdSeq<<20
	var node *engine.SparkplugTable
	if sp.birth >= 0 {
		node = &st.Births[sp.birth].Node
	}
	if why := sp.resolve(node); why != "" {
		return why
	}
	sp.digest = sp.contentDigest()
	if st == nil || len(st.Births) == 0 || p.HoldsKey(deathKey(d, sp.bdSeq)) {
		return "" // the key window decides it
	}
	why := sp.unprovenDeath(d, st)
	switch {
	case why == "":
		return ""
	case p.Released(): // an operator judged it genuine: applied, it changes no state
		sp.past = true
		return ""
	}
	return why
}

// unprovenDeath decides an NDEATH of session sp.bdSeq whose key the key
// window does not hold: "" to apply it (after SetSeen on d, as a
// duplicate), else why it is held.
func (sp *spMessage) unprovenDeath(d *engine.Delivery, st *engine.SparkplugState) string {
	b := sp.bdSeq
	if sp.p.HasTimestamp {
		for _, births := range [][]engine.SparkplugBirth{st.Births, st.Retired} {
			for i := range births {
				if x := &births[i]; x.BdSeq < b && x.Stamp > sp.p.Timestamp {
					return fmt.Sprintf("%s: NDEATH of session %d (bdSeq %d) is stamped %d, before the NBIRTH of session %s (%d): "+
						"it is not that session's, but a replay of an earlier one with the same bdSeq", engine.ReasonOldEpoch,
						b, b%256, sp.p.Timestamp, x.Epoch, x.Stamp)
				}
			}
		}
	}
	if death, ok := deathRecord(st, b); ok {
		if death == sp.digest {
			d.SetSeen()
			return ""
		}
		return fmt.Sprintf("NDEATH of session %d: the session's NDEATH was applied with other content, or before its NBIRTH, "+
			"and its key has left the key window: this one cannot be proven a duplicate", b)
	}
	if b < st.Forgot && b < st.BdSeq && !hasBirth(st, b) {
		return fmt.Sprintf("%s: NDEATH of session %d, whose record is no longer kept: it may have been applied, "+
			"and its key is not in the key window", engine.ReasonOldEpoch, b)
	}
	if b < st.UnrecordedBelow() {
		return fmt.Sprintf("%s: NDEATH of session %d, decided by a build that kept no record of the NDEATHs it applied: "+
			"it may have been applied, and its key is not in the key window", engine.ReasonOldEpoch, b)
	}
	return "" // never applied: an applied NDEATH is recorded
}

// deathRecord returns the digest of the NDEATH of session bdSeq the state
// records as applied (zero when its births know it by its key alone).
func deathRecord(st *engine.SparkplugState, bdSeq int64) (engine.Hash, bool) {
	if st == nil {
		return engine.Hash{}, false
	}
	for _, d := range st.Deaths {
		if d.BdSeq == bdSeq {
			return d.Digest, true
		}
	}
	found := false
	for _, births := range [][]engine.SparkplugBirth{st.Births, st.Retired} {
		for i := range births {
			if b := &births[i]; b.BdSeq == bdSeq && b.Ended {
				if !b.Death.IsZero() {
					return b.Death, true
				}
				found = true
			}
		}
	}
	return engine.Hash{}, found
}

// hasBirth reports whether a kept or retired birth of session bdSeq is
// there to record its NDEATH.
func hasBirth(st *engine.SparkplugState, bdSeq int64) bool {
	for _, births := range [][]engine.SparkplugBirth{st.Births, st.Retired} {
		for i := range births {
			if births[i].BdSeq == bdSeq {
				return true
			}
		}
	}
	return false
}
