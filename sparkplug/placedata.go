package sparkplug

import (
	"fmt"

	"github.com/replayguard/replayguard/engine"
)

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
			if why := sp.placeSeq(d, p, src); why == "" && (sp.logged || p.Holds(engine.SequencedKey(d.RouteName(), d.Source(), "n"+sp.epoch, sp.seq), sp.digest)) {
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
	if why := sp.placeSeq(d, p, src); why != "" || sp.logged {
		return why // placed by the log: that very message, read as it was applied
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
