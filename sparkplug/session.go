package sparkplug

import (
	"cmp"
	"slices"

	"github.com/replayguard/replayguard/engine"
)

// tableOf builds the alias table of a birth's metrics.
func tableOf(sp *spMessage) engine.SparkplugTable {
	t := engine.SparkplugTable{Types: make(map[string]uint32, len(sp.p.Metrics))}
	for i, mt := range sp.p.Metrics {
		if mt.HasAlias {
			if t.Aliases == nil {
				t.Aliases = map[uint64]string{}
			}
			t.Aliases[mt.Alias] = sp.metrics[i].name
		}
		if mt.Datatype != 0 {
			t.Types[sp.metrics[i].name] = mt.Datatype
		}
	}
	return t
}

// attribute returns the index of the birth a data message belongs to: the
// newest whose NBIRTH is not later than the message's timestamp (a replay
// from an earlier session predates the current birth; every message but
// an NDEATH has a timestamp, checkPayload makes sure). -1: it predates
// every kept birth.
func attribute(s *engine.SparkplugState, sp *spMessage) int {
	for i, b := range s.Births {
		if b.Stamp <= sp.p.Timestamp {
			return i
		}
	}
	return -1
}

// findBirth returns the index of the kept birth of bdSeq with digest dg.
func findBirth(s *engine.SparkplugState, bdSeq int64, dg engine.Hash) int {
	for i, b := range s.Births {
		if b.BdSeq == bdSeq && b.Digest == dg {
			return i
		}
	}
	return -1
}

// Applied updates the edge's session after an effective decision: a new
// NBIRTH opens a birth (online, unless its session's NDEATH came first),
// NDEATH takes the edge offline, DBIRTH and DDEATH a device on or off; the
// highest message of a birth's window raises its HighStamp.
func (sp *spMessage) Applied(d *engine.Delivery, p *engine.Placement) bool {
	src := p.Window()
	if src == nil {
		return false
	}
	st := src.Sparkplug
	changed := false
	if st != nil && !st.Recorded {
		// A row of a build from before the NDEATH records: what it
		// applied unrecorded stays unproven, what this build applies is
		// recorded from now on.
		st.Unrecorded, st.Recorded = st.UnrecordedBelow(), true
		changed = true
	}
	if sp.birth >= 0 && st != nil && sp.typ != spNDeath {
		b := &st.Births[sp.birth]
		if w := src.Kept(b.Epoch); w != nil && w.High == sp.seq && sp.p.Timestamp > b.HighStamp {
			b.HighStamp = sp.p.Timestamp
			changed = true
		}
	}
	switch sp.typ {
	case spNBirth:
		if !sp.newBirth {
			return changed
		}
		if st == nil {
			st = &engine.SparkplugState{Recorded: true}
			src.Sparkplug = st
		}
		b := engine.SparkplugBirth{Epoch: sp.epoch, BdSeq: sp.bdSeq, Rebirth: sp.rebirth, Stamp: sp.p.Timestamp, HighStamp: sp.p.Timestamp,
			Digest: sp.digest, Time: p.Now().UTC(), Position: p.Position(), Node: st.SharedTable(tableOf(sp)), Ended: sp.ended, Death: sp.death}
		if len(st.Births) > sp.at && st.Births[sp.at].HighStamp > b.Stamp {
			b.Before = st.Births[sp.at].HighStamp // the birth before it applied its data
		}
		if len(st.Births) > sp.at && st.Births[sp.at].Held > b.Stamp {
			b.Held = st.Births[sp.at].Held // an NBIRTH held after it is still the newest
		}
		adoptDevices(&b, st.Births, sp.at)
		// The birth takes over the record of its session's NDEATH,
		// decided before it.
		st.Deaths = slices.DeleteFunc(st.Deaths, func(d engine.SparkplugDeath) bool { return d.BdSeq == sp.bdSeq })
		if len(st.Deaths) == 0 {
			st.Deaths = nil
		}
		if sp.at > 0 { // an older birth decided late: the session is as it was
			st.Births = slices.Insert(st.Births, sp.at, b)
		} else {
			st.BdSeq, st.Online = sp.bdSeq, !sp.ended
			st.Births = append([]engine.SparkplugBirth{b}, st.Births...)
		}
		keepBirths(st, src, sp.highs, p)
	case spNDeath:
		if st == nil || sp.past {
			return changed
		}
		// Its session's births record it, or Deaths when it has none: its
		// replay is found there once its key has left the key window.
		recordDeath(st, sp.bdSeq, sp.digest, p.KeepEpochs())
		changed = true
		if sp.bdSeq < st.BdSeq {
			return changed // an older session's death changes nothing else
		}
		st.Online = false
		if len(st.Births) > 0 {
			for name, dev := range st.Births[0].Devices {
				dev.Online = false
				st.Births[0].Devices[name] = dev
			}
		}
	case spDBirth:
		b := &st.Births[sp.birth]
		if dev, ok := b.Devices[sp.device]; ok && dev.Stamp > sp.p.Timestamp {
			// An earlier DBIRTH decided late: the device's last one stays,
			// and its table reads the DDATA sent under it.
			dev.Earlier = lateTable(dev.Earlier, engine.SparkplugDeviceTable{Stamp: sp.p.Timestamp, Table: st.SharedTable(tableOf(sp))}, p.KeepEpochs())
			b.Devices[sp.device] = dev
			return true
		}
		if b.Devices == nil {
			b.Devices = map[string]engine.SparkplugDevice{}
		}
		// A DDEATH stamped at or after it, decided before it (the broker
		// reordered them), ended it already.
		last, had := b.Devices[sp.device]
		dev := engine.SparkplugDevice{Online: last.Death < sp.p.Timestamp, Stamp: sp.p.Timestamp, Table: st.SharedTable(tableOf(sp)), Death: last.Death}
		if last.Held > sp.p.Timestamp {
			dev.Held = last.Held // a DBIRTH held after it is still the device's newest
		}
		if had {
			dev.Earlier = earlierTables(last, p.KeepEpochs())
		}
		b.Devices[sp.device] = dev
	case spDDeath:
		b := &st.Births[sp.birth]
		if dev, ok := b.Devices[sp.device]; ok && dev.Stamp <= sp.p.Timestamp {
			dev.Online, dev.Death = false, max(dev.Death, sp.p.Timestamp)
			b.Devices[sp.device] = dev
		}
	default:
		return changed
	}
	return true
}

var _ engine.HeldPlacer = (*spMessage)(nil)

// Held records a held NBIRTH stamped after the edge's newest birth on
// that birth, and a held DBIRTH stamped after its device's last DBIRTH on
// the device (the earliest such, when several were): the data sent after
// it, which would be placed in the birth before above its highest and
// read with its aliases, is held instead (placeData), until a birth
// stamped after it is applied. A birth stamped before them was not
// the one their data follows, and changes nothing.
func (sp *spMessage) Held(d *engine.Delivery, p *engine.Placement) bool {
	if !sp.typ.birth() {
		return false
	}
	src := p.Window()
	if src == nil || src.Sparkplug == nil || len(src.Sparkplug.Births) == 0 {
		return false // its data finds no birth to be read in: held
	}
	st, ts := src.Sparkplug, sp.p.Timestamp
	if sp.typ == spNBirth {
		b := &st.Births[0]
		if ts <= b.Stamp || b.Held != 0 && b.Held <= ts {
			return false
		}
		b.Held = ts
		return true
	}
	i := attribute(st, sp)
	if i < 0 {
		return false
	}
	b := &st.Births[i]
	dev, ok := b.Devices[sp.device]
	if !ok || ts <= dev.Stamp || dev.Held != 0 && dev.Held <= ts {
		return false // a device without a DBIRTH has its data held already
	}
	dev.Held = ts
	b.Devices[sp.device] = dev
	return true
}

// recordDeath records the applied NDEATH of session bdSeq, with digest, on
// its session's kept and retired births, or, when it has none, in
// s.Deaths, whose oldest past keep + 1 it forgets.
func recordDeath(s *engine.SparkplugState, bdSeq int64, digest engine.Hash, keep int) {
	found := false
	for _, births := range [][]engine.SparkplugBirth{s.Births, s.Retired} {
		for i := range births {
			if b := &births[i]; b.BdSeq == bdSeq {
				found = true
				if !b.Ended {
					b.Ended, b.Death = true, digest
				}
			}
		}
	}
	if found || slices.ContainsFunc(s.Deaths, func(d engine.SparkplugDeath) bool { return d.BdSeq == bdSeq }) {
		return
	}
	s.Deaths = append(s.Deaths, engine.SparkplugDeath{BdSeq: bdSeq, Digest: digest})
	slices.SortFunc(s.Deaths, func(a, b engine.SparkplugDeath) int { return cmp.Compare(b.BdSeq, a.BdSeq) })
	for len(s.Deaths) > keep+1 {
		s.Forgot = max(s.Forgot, s.Deaths[len(s.Deaths)-1].BdSeq+1)
		s.Deaths = slices.Clip(s.Deaths[:len(s.Deaths)-1])
	}
}

// earlierTables are the tables a device's next DBIRTH keeps of dev, its
// last: dev's own before those it kept (unless the one before it gave the
// same, which then stays in effect for dev's time too), at most keep + 1.
func earlierTables(dev engine.SparkplugDevice, keep int) []engine.SparkplugDeviceTable {
	if len(dev.Earlier) > 0 && dev.Earlier[0].Table.Equal(dev.Table) && dev.Held == 0 && dev.Earlier[0].Held == 0 {
		return dev.Earlier
	}
	out := make([]engine.SparkplugDeviceTable, 0, min(len(dev.Earlier)+1, keep+1))
	out = append(out, engine.SparkplugDeviceTable{Stamp: dev.Stamp, Table: dev.Table, Held: dev.Held})
	return append(out, dev.Earlier[:min(len(dev.Earlier), keep)]...)
}

// lateTable puts the table of a DBIRTH decided after a later one among a
// device's earlier tables, at its timestamp's place, keeping keep + 1.
func lateTable(earlier []engine.SparkplugDeviceTable, t engine.SparkplugDeviceTable, keep int) []engine.SparkplugDeviceTable {
	at := len(earlier)
	for i, e := range earlier {
		if e.Stamp <= t.Stamp {
			at = i
			break
		}
	}
	out := slices.Insert(slices.Clone(earlier), at, t)
	return slices.Clip(out[:min(len(out), keep+1)])
}

// adoptDevices gives birth b, about to take index at among births, the
// devices the birth before it holds from DBIRTHs stamped at or after its
// NBIRTH (and before the birth after it): DBIRTHs of b decided before b's
// NBIRTH (the broker reordered them, or another member held the NBIRTH),
// applied in the birth before, above its highest. Without them b's device
// data would find no DBIRTH in b and be held, and the DBIRTHs' replays are
// duplicates of where they were applied. They are online, the NDEATH that
// came since having ended the birth before, not them, unless a DDEATH of
// b (stamped at or after the device's DBIRTH, and before the birth after
// b), decided before b's NBIRTH too, ended them there.
func adoptDevices(b *engine.SparkplugBirth, births []engine.SparkplugBirth, at int) {
	if at >= len(births) {
		return
	}
	for name, dev := range births[at].Devices {
		if dev.Stamp < b.Stamp || at > 0 && dev.Stamp >= births[at-1].Stamp {
			continue
		}
		if b.Devices == nil {
			b.Devices = map[string]engine.SparkplugDevice{}
		}
		dev.Online = dev.Death < dev.Stamp || at > 0 && dev.Death >= births[at-1].Stamp
		b.Devices[name] = dev
	}
}

// keepBirths retires the births whose epoch window the source no longer
// keeps, with the highest sequence their window had (highs, read before
// the birth applied now opened or placed its own), and forgets retired
// births past window.keep_epochs + 1 of them, and those retired longer
// than window.ttl ago: no key of theirs is left in the key window then.
// Both times are read on the key window's clock, which a step of the wall
// clock does not move: stepped forward, it would forget births whose keys
// the key window still holds.
func keepBirths(s *engine.SparkplugState, src *engine.SourceState, highs []epochHigh, p *engine.Placement) {
	kept := s.Births[:0]
	var retired []engine.SparkplugBirth
	for _, b := range s.Births {
		if src.Kept(b.Epoch) != nil {
			kept = append(kept, b)
			continue
		}
		forgot := true
		for _, h := range highs {
			if h.epoch == b.Epoch && h.high >= 0 {
				b.High, b.RetiredAt = h.high, p.KeyNow()
				retired = append(retired, b)
				forgot = false
			}
		}
		if forgot {
			s.Forgot = max(s.Forgot, b.BdSeq+1)
		}
	}
	s.Births = kept
	if retired == nil && len(s.Retired) == 0 {
		return
	}
	retired = append(retired, s.Retired...) // those retired now are newer than those retired before
	cutoff := p.KeyCutoff()
	n := 0
	for _, b := range retired {
		if n <= p.KeepEpochs() && !b.RetiredAt.Before(cutoff) {
			retired[n] = b
			n++
		} else {
			s.Forgot = max(s.Forgot, b.BdSeq+1) // the record of its session's NDEATH goes with it
		}
	}
	s.Retired = slices.Clip(retired[:n])
	if n == 0 {
		s.Retired = nil
	}
}
