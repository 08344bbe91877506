package sparkplug

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/replayguard/replayguard/engine"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
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

// placeData places NDATA, DBIRTH, DDATA and DDEATH in the birth their
// timestamp falls in, and resolves their aliases with its tables.
func (sp *spMessage) placeData(d *engine.Delivery, p *engine.Placement, src *engine.SourceState, st *engine.SparkplugState) string {
	if st == nil || len(st.Births) == 0 {
		return fmt.Sprintf("no birth certificate seen for edge %q of group %q: an NBIRTH comes first", sp.edge, sp.group)
	}
	i := attribute(st, sp)
	if i < 0 {
		if sp.placedRetired(d, p, st) {
			return ""
		}
		return fmt.Sprintf("%s: timestamp %d predates every kept birth of edge %q", engine.ReasonOldEpoch, sp.p.Timestamp, sp.edge)
	}
	if sp.placedBefore(d, p, src, i) {
		return ""
	}
	sp.birth = i
	birth := &st.Births[i]
	sp.bdSeq = birth.BdSeq
	table, ok := sp.tableIn(birth)
	if !ok {
		return fmt.Sprintf("no DBIRTH seen for device %q of edge %q in its session %s", sp.device, sp.edge, birth.Epoch)
	}
	why := sp.resolve(table)
	if sp.typ == spDData && sp.predatesTables(birth) && sp.readsTable() {
		// Sent under an earlier DBIRTH of its device, whose table the
		// device's later DBIRTHs replaced and no longer keep: read with
		// the oldest kept, an alias may name another metric, or none.
		// Only a proven duplicate is placed; anything else waits for a
		// person.
		if why == "" {
			sp.digest = sp.contentDigest()
			if why := sp.placeSeq(d, p, src); why == "" && p.Holds(engine.SequencedKey(d.RouteName(), d.Source(), "n"+sp.epoch, sp.seq), sp.digest) {
				return ""
			}
		}
		return fmt.Sprintf("%s of device %q: its timestamp %d predates the device's last DBIRTH (%d) in session %s, "+
			"whose aliases may name other metrics: the DBIRTH it was sent under is no longer kept", sp.typ, sp.device,
			sp.p.Timestamp, birth.Devices[sp.device].Stamp, birth.Epoch)
	}
	if why != "" {
		return why
	}
	sp.digest = sp.contentDigest()
	if why := sp.placeSeq(d, p, src); why != "" {
		return why
	}
	if sp.p.Timestamp <= birth.Before && !p.Released() && !seenIn(src.Kept(sp.epoch), sp.seq) {
		// Not found in the birth before (placedBefore), yet it may have
		// been applied there, decided before its NBIRTH, with a key the
		// key window no longer holds: its own window never saw it, and
		// applied there it could be applied twice.
		return fmt.Sprintf("seq %d of session %s is stamped %d, not after the last message the birth before applied (%d): "+
			"it may have been applied there, decided before its NBIRTH, and its key is not in the key window",
			sp.seqRaw, birth.Epoch, sp.p.Timestamp, birth.Before)
	}
	what, mark := sp.heldAfter(birth)
	key := engine.SequencedKey(d.RouteName(), d.Source(), "n"+sp.epoch, sp.seq)
	if mark == 0 || p.Holds(key, sp.digest) {
		return ""
	}
	// Sent after a birth that was held, it is that birth's: the aliases
	// it is sent by are that birth's, not the ones it would be read with
	// here. Released, it is read with those of the birth that replaced
	// the held one (the next applied), and keeps its placement here;
	// applied so, its redelivery is found there, a duplicate.
	if next := sp.replacement(src.Sparkplug, i, what); next != nil {
		why := sp.resolve(next)
		if why == "" {
			if dg := sp.contentDigest(); p.Released() || p.Holds(key, dg) {
				sp.digest = dg
				return ""
			}
		} else if p.Released() {
			return why
		}
	}
	return fmt.Sprintf("%s seq %d is stamped %d, at or after a %s of %s that was held (stamped %d): it is that birth's, "+
		"whose aliases are not known, and read with those of session %s it could set other metrics; release it once "+
		"that %s is released, or replaced by a later one, whose aliases it is then read with", sp.typ, sp.seqRaw,
		sp.p.Timestamp, what, sp.heldWhose(what), mark, birth.Epoch, what)
}

// replacement is the table a message sent after a held birth (what, in
// birth i) is read with when released: that of the birth applied after
// the held one, nil when none is yet.
func (sp *spMessage) replacement(st *engine.SparkplugState, i int, what string) *engine.SparkplugTable {
	if what == "NBIRTH" {
		if i == 0 {
			return nil
		}
		next := &st.Births[i-1]
		if sp.typ != spDData {
			return &next.Node
		}
		if dev, ok := next.Devices[sp.device]; ok {
			if n := len(dev.Earlier); n > 0 {
				return &dev.Earlier[n-1].Table
			}
			return &dev.Table
		}
		return nil
	}
	dev := st.Births[i].Devices[sp.device]
	for k := range dev.Earlier {
		if dev.Earlier[k].Stamp <= sp.p.Timestamp {
			if k == 0 {
				return &dev.Table
			}
			return &dev.Earlier[k-1].Table
		}
	}
	return nil // read with the device's last table: none replaced it yet
}

// heldAfter returns the held birth the message may belong to: the
// NBIRTH held after birth, or the device's DBIRTH held after the table it
// is read with, when it is stamped at or after it (0 when none).
func (sp *spMessage) heldAfter(birth *engine.SparkplugBirth) (string, uint64) {
	ts := sp.p.Timestamp
	if birth.Held != 0 && ts >= birth.Held {
		return "NBIRTH", birth.Held
	}
	if sp.typ != spDData {
		return "", 0
	}
	dev := birth.Devices[sp.device]
	mark := dev.Held
	if ts < dev.Stamp {
		mark = 0
		for _, e := range dev.Earlier {
			if e.Stamp <= ts {
				mark = e.Held
				break
			}
		}
	}
	if mark != 0 && ts >= mark {
		return "DBIRTH", mark
	}
	return "", 0
}

// heldWhose names whose birth a held birth of what type was.
func (sp *spMessage) heldWhose(what string) string {
	if what == "DBIRTH" {
		return fmt.Sprintf("device %q of edge %q", sp.device, sp.edge)
	}
	return fmt.Sprintf("edge %q", sp.edge)
}

// seenIn reports whether window w saw seq: at or below its highest, at or
// above its first, and in none of its gaps.
func seenIn(w *engine.EpochWindow, seq int64) bool {
	if w == nil || seq > w.High || seq < w.First {
		return false
	}
	for _, g := range w.OpenGaps() {
		if seq >= g.From && seq <= g.To {
			return false
		}
	}
	return true
}

// readsTable reports whether resolving the message reads its birth's
// table: a metric by alias, or without a datatype.
func (sp *spMessage) readsTable() bool {
	for _, mt := range sp.p.Metrics {
		if mt.Name == "" || mt.Datatype == 0 {
			return true
		}
	}
	return false
}

// retiredBirth places an NBIRTH of session sp.bdSeq that matches a
// retired birth's content, and whose key the key window holds with it:
// that birth again, a proven duplicate, though its window is gone.
func (sp *spMessage) retiredBirth(d *engine.Delivery, p *engine.Placement, st *engine.SparkplugState) bool {
	for i := range st.Retired {
		r := &st.Retired[i]
		if r.BdSeq != sp.bdSeq || r.Digest != sp.digest {
			continue
		}
		epoch, v := epochOf(r.BdSeq, r.Rebirth)
		if p.Holds(engine.SequencedKey(d.RouteName(), d.Source(), "n"+epoch, sp.seqRaw), sp.digest) {
			sp.epoch, sp.epochInt, sp.seq = epoch, v, sp.seqRaw
			return true
		}
	}
	return false
}

// placedRetired places a message that predates every kept birth in the
// retired birth its timestamp falls in, read with that birth's tables, at
// the placement congruent to its seq at or below the birth's last highest
// whose key the key window holds with its content: that message again, a
// proven duplicate, however old its birth. Applied in a retired birth
// before that one (decided before its NBIRTH: placedBefore), it is found
// there. Found nowhere, it stays held.
func (sp *spMessage) placedRetired(d *engine.Delivery, p *engine.Placement, st *engine.SparkplugState) bool {
	for i := range st.Retired {
		r := &st.Retired[i]
		if r.Stamp > sp.p.Timestamp {
			continue
		}
		if table, ok := sp.tableIn(r); ok && sp.resolve(table) == "" {
			sp.digest = sp.contentDigest()
			sp.epoch, sp.epochInt = epochOf(r.BdSeq, r.Rebirth)
			if c, found := sp.appliedAt(d, p, 0, false, r.High); found {
				sp.bdSeq, sp.seq = r.BdSeq, c
				return true
			}
		}
		for j := i + 1; j < len(st.Retired); j++ {
			if b := &st.Retired[j]; sp.appliedInBirth(d, p, b, b.High) {
				return true
			}
		}
		return false
	}
	return false
}

// tableIn returns the alias table a data message resolves with in birth:
// the node's, or the one its device had at the message's timestamp, the
// oldest kept if none (false when the birth has no DBIRTH of it).
func (sp *spMessage) tableIn(birth *engine.SparkplugBirth) (*engine.SparkplugTable, bool) {
	switch sp.typ {
	case spNData:
		return &birth.Node, true
	case spDData, spDDeath:
		dev, ok := birth.Devices[sp.device]
		if !ok || sp.p.Timestamp >= dev.Stamp || len(dev.Earlier) == 0 {
			return &dev.Table, ok
		}
		for i := range dev.Earlier {
			if dev.Earlier[i].Stamp <= sp.p.Timestamp {
				return &dev.Earlier[i].Table, true
			}
		}
		return &dev.Earlier[len(dev.Earlier)-1].Table, true
	}
	return nil, true
}

// predatesTables reports whether a device message is stamped before every
// table birth keeps of its device: the DBIRTH it was sent under is gone.
func (sp *spMessage) predatesTables(birth *engine.SparkplugBirth) bool {
	dev := birth.Devices[sp.device]
	if n := len(dev.Earlier); n > 0 {
		return sp.p.Timestamp < dev.Earlier[n-1].Stamp
	}
	return sp.p.Timestamp < dev.Stamp
}

// placedBefore looks for the message in the births before birth i whose
// window applied a message stamped at or after it: data of birth i that
// was decided before its NBIRTH (another member held the NBIRTH) was
// placed in the birth before, above its highest. Applied there with the
// same content, it is that message again, a proven duplicate: it takes
// that placement instead of being applied a second time in birth i. The
// birth before may be retired since (birth i is the oldest kept): it is
// looked for there too, at or below the retired window's last highest.
func (sp *spMessage) placedBefore(d *engine.Delivery, p *engine.Placement, src *engine.SourceState, i int) bool {
	st := src.Sparkplug
	for j := i + 1; j < len(st.Births); j++ {
		b := &st.Births[j]
		if b.HighStamp < sp.p.Timestamp {
			continue
		}
		w := src.Kept(b.Epoch)
		if w == nil || w.High < 0 || !sp.appliedInBirth(d, p, b, w.High) {
			continue
		}
		sp.birth = j
		return true
	}
	for j := range st.Retired {
		if r := &st.Retired[j]; sp.appliedInBirth(d, p, r, r.High) {
			return true
		}
	}
	return false
}

// appliedInBirth places the message in birth b, whose window's highest is
// high, when b's window applied a message stamped at or after it and the
// key window holds the message's key there, at a placement congruent to
// its seq, with its content read with b's tables.
func (sp *spMessage) appliedInBirth(d *engine.Delivery, p *engine.Placement, b *engine.SparkplugBirth, high int64) bool {
	if b.HighStamp < sp.p.Timestamp {
		return false
	}
	table, ok := sp.tableIn(b)
	if !ok || sp.resolve(table) != "" {
		return false
	}
	sp.digest = sp.contentDigest()
	sp.epoch, sp.epochInt = epochOf(b.BdSeq, b.Rebirth)
	c, found := sp.appliedAt(d, p, 0, false, high)
	if found {
		sp.bdSeq, sp.seq = b.BdSeq, c
	}
	return found
}

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

// Sparkplug datatypes the engine reads again from a birth.
const (
	spInt8  = 1
	spInt16 = 2
	spInt32 = 3
	spInt64 = 4
)

// engineValue turns a decoded value into the engine's; reread applies
// the birth's signed integer type to an integer whose payload left its
// datatype out.
func engineValue(v MetricValue, reread bool, typ uint32) (engine.Value, bool) {
	switch v.Kind {
	case ValueNumber:
		text := v.Text
		if reread && v.Width > 0 && typ >= spInt8 && typ <= spInt64 {
			text = strconv.FormatInt(signed(v.Bits, typ), 10)
		}
		n, err := engine.NumberValue(text)
		return n, err == nil
	case ValueString:
		return engine.StringValue(v.Text), true
	case ValueBool:
		return engine.BoolValue(v.Text == "true"), true
	case ValueNull:
		return engine.NullValue(), true
	}
	return engine.OpaqueValue(v.Text), true
}

func signed(bits uint64, typ uint32) int64 {
	switch typ {
	case spInt8:
		return int64(int8(bits))
	case spInt16:
		return int64(int16(bits))
	case spInt32:
		return int64(int32(bits))
	}
	return int64(bits)
}

// digest covers the resolved content: type, device, timestamp, seq, and
// each metric's resolved name, datatype, timestamp and value, in order,
// with its is_historical flag (a set reads a historical value otherwise):
// a flagged metric's value code has its top bit set, so an unflagged one's
// digest is what it was before the flag was read.
func (sp *spMessage) contentDigest() engine.Hash {
	h := sha256.New()
	var buf [1024]byte // written to h whenever the next metric might not fit
	b := append(buf[:0], byte(sp.typ))
	b = appendField(b, sp.device)
	b = binary.BigEndian.AppendUint64(b, sp.p.Timestamp)
	b = binary.BigEndian.AppendUint64(b, uint64(sp.seqRaw))
	for i, mt := range sp.p.Metrics {
		r := &sp.metrics[i]
		if len(b)+3*binary.MaxVarintLen64+13+len(r.name)+len(r.val.Text())+len(mt.Value.Content) > cap(b) {
			h.Write(b)
			b = b[:0]
		}
		b = appendField(b, r.name)
		b = binary.BigEndian.AppendUint32(b, r.typ)
		b = binary.BigEndian.AppendUint64(b, mt.Timestamp)
		code := r.val.Code()
		if r.hist {
			code |= historicalCode
		}
		b = append(b, code)
		b = appendField(b, r.val.Text())
		b = appendField(b, mt.Value.Content)
	}
	h.Write(b)
	var out engine.Hash
	h.Sum(out[:0])
	return out
}

// historicalCode marks a historical metric's value code in the digest.
const historicalCode = 0x80

// pathValue is the value of one path of the route: the payload's
// timestamp or seq, or what it reads of a metric (metricField): of its last
// occurrence in the payload, and when the payload carries it more than once
// (an edge forwarding what it stored during an outage) or flagged
// historical, of each of them in order, with which are historical
// (engine.Placement.SetReadings). A metric's value, timestamp and flag
// are read alike, so a sql effect run once for each of a metric's values
// takes each with its own timestamp and flag.
func (sp *spMessage) pathValue(segs []string) (engine.Value, []engine.Reading) {
	if len(segs) == 1 {
		switch segs[0] {
		case "timestamp":
			if sp.p.HasTimestamp {
				n, _ := engine.NumberValue(strconv.FormatUint(sp.p.Timestamp, 10))
				return n, nil
			}
		case "seq":
			if sp.seqRaw >= 0 {
				n, _ := engine.NumberValue(strconv.FormatInt(sp.seqRaw, 10))
				return n, nil
			}
		}
		return engine.Value{}, nil
	}
	n, last := 0, -1
	for i := range sp.metrics {
		if sp.metrics[i].name == segs[1] {
			n, last = n+1, i
		}
	}
	switch {
	case n == 0:
		return engine.Value{}, nil
	case n == 1 && !sp.metrics[last].hist:
		return sp.metricField(segs[0], last), nil
	}
	rs := make([]engine.Reading, 0, n) // a store-and-forward payload's: rare
	for i := range sp.metrics {
		if r := &sp.metrics[i]; r.name == segs[1] {
			rs = append(rs, engine.Reading{Value: sp.metricField(segs[0], i), Historical: r.hist})
		}
	}
	return sp.metricField(segs[0], last), rs
}

// metricField is what a path whose first segment is root (metricPaths)
// reads of metric i: its value, its own timestamp (absent when it has
// none), or its is_historical flag.
func (sp *spMessage) metricField(root string, i int) engine.Value {
	switch root {
	case "metrics":
		return sp.metrics[i].val
	case "timestamp":
		if mt := &sp.p.Metrics[i]; mt.HasTimestamp {
			n, _ := engine.NumberValue(strconv.FormatUint(mt.Timestamp, 10))
			return n
		}
		return engine.Value{}
	}
	return engine.BoolValue(sp.metrics[i].hist)
}

// appendField appends s, length-prefixed, as the engine's digests do.
func appendField(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// offlineWhy says which NDEATH took the edge offline while b was its
// current birth: b's session's own, or a later session's (the Will of a
// connection that died before its NBIRTH), recorded in st.Deaths.
func offlineWhy(st *engine.SparkplugState, b *engine.SparkplugBirth) string {
	if b.Ended {
		return fmt.Sprintf("its session %s's NDEATH came", b.Epoch)
	}
	for _, d := range st.Deaths { // newest first
		if d.BdSeq > b.BdSeq {
			return fmt.Sprintf("an NDEATH of its later session %d came, whose NBIRTH is not decided", d.BdSeq)
		}
	}
	return fmt.Sprintf("an NDEATH ended its session %s", b.Epoch)
}

// whoseHighest names the session whose highest sequence offlineWhy's
// message would come after.
func whoseHighest(b *engine.SparkplugBirth) string {
	if b.Ended {
		return "that session's"
	}
	return "session " + b.Epoch + "'s"
}
