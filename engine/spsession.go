package engine

import (
	"maps"
	"time"
)

// SparkplugState is an edge node's Sparkplug session state, kept in its
// source window (source [group, edge]) and committed with it.
type SparkplugState struct {
	BdSeq  int64 `json:"bdseq"`  // the current session's bdSeq, unwrapped (it grows past 255)
	Online bool  `json:"online"` // an NBIRTH came, and no NDEATH of its session since
	// Births are the NBIRTHs of the kept epochs, newest first, one per
	// epoch window of the source.
	Births []SparkplugBirth `json:"births"`
}

// SparkplugBirth is one NBIRTH: an epoch of the edge and the alias tables
// its messages are read with.
type SparkplugBirth struct {
	Epoch    string    `json:"epoch"`   // "5" for session 5's first NBIRTH, "5.1" for its first rebirth
	BdSeq    int64     `json:"bdseq"`   // unwrapped
	Rebirth  int       `json:"rebirth"` // 0 for the session's first NBIRTH
	Stamp    uint64    `json:"stamp"`   // the payload's timestamp, ms
	Digest   Hash      `json:"digest"`  // its content: a replay of it is recognised
	Time     time.Time `json:"time"`    // when it was applied
	Position uint64    `json:"position"`
	// HighStamp is the timestamp of the message at its window's highest
	// sequence: a message older than it cannot be placed above it.
	HighStamp uint64                     `json:"high_stamp,omitempty"`
	Node      SparkplugTable             `json:"node"`
	Devices   map[string]SparkplugDevice `json:"devices,omitempty"`
}

// SparkplugDevice is a device of an edge, from its DBIRTH.
type SparkplugDevice struct {
	Online bool           `json:"online"`
	Stamp  uint64         `json:"stamp"` // the DBIRTH's timestamp, ms
	Table  SparkplugTable `json:"table"`
}

// SparkplugTable maps a birth certificate's aliases to metric names and
// names to datatypes. A birth replaces a table; one is never changed in
// place.
type SparkplugTable struct {
	Aliases map[uint64]string `json:"aliases,omitempty"`
	Types   map[string]uint32 `json:"types,omitempty"`
}

// Clone copies the state deeply enough that neither copy sees the other's
// changes (tables are never changed in place: they are shared).
func (s *SparkplugState) Clone() *SparkplugState {
	if s == nil {
		return nil
	}
	c := *s
	c.Births = append([]SparkplugBirth(nil), s.Births...)
	for i := range c.Births {
		c.Births[i].Devices = maps.Clone(c.Births[i].Devices)
	}
	return &c
}

// tableOf builds the alias table of a birth's metrics.
func tableOf(sp *spMessage) SparkplugTable {
	t := SparkplugTable{Types: make(map[string]uint32, len(sp.p.Metrics))}
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
// from an earlier session predates the current birth); without a
// timestamp, the current one. -1: it predates every kept birth.
func (s *SparkplugState) attribute(sp *spMessage) int {
	if !sp.p.HasTimestamp {
		return 0
	}
	for i, b := range s.Births {
		if b.Stamp <= sp.p.Timestamp {
			return i
		}
	}
	return -1
}

// findBirth returns the index of the kept birth of bdSeq with digest dg.
func (s *SparkplugState) findBirth(bdSeq int64, dg Hash) int {
	for i, b := range s.Births {
		if b.BdSeq == bdSeq && b.Digest == dg {
			return i
		}
	}
	return -1
}

// sparkplugApplied updates the edge's session after an effective
// decision: a new NBIRTH opens a birth, NDEATH takes the edge offline,
// DBIRTH and DDEATH a device on or off.
func (e *Engine) sparkplugApplied(d *decoded, now time.Time) {
	sp := d.sp
	src := e.lookupSource(d)
	if src == nil {
		return
	}
	st := src.Sparkplug
	if sp.birth >= 0 && st != nil && sp.typ != spNDeath {
		b := &st.Births[sp.birth]
		if i := src.find(b.Epoch, true); i >= 0 && src.Epochs[i].High == d.seq && sp.p.Timestamp > b.HighStamp {
			b.HighStamp = sp.p.Timestamp
			e.pending.sources[src] = struct{}{}
		}
	}
	switch sp.typ {
	case spNBirth:
		if !sp.newBirth {
			return
		}
		if st == nil {
			st = &SparkplugState{}
			src.Sparkplug = st
		}
		b := SparkplugBirth{Epoch: d.epoch, BdSeq: sp.bdSeq, Rebirth: sp.rebirth, Stamp: sp.p.Timestamp, HighStamp: sp.p.Timestamp, Digest: d.digest,
			Time: now.UTC(), Position: e.tail.Position + 1, Node: tableOf(sp)}
		st.BdSeq, st.Online = sp.bdSeq, true
		st.Births = append([]SparkplugBirth{b}, st.Births...)
		st.keepBirths(src)
	case spNDeath:
		if st == nil || sp.bdSeq < st.BdSeq {
			return // an older session's death changes nothing
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
		if b.Devices == nil {
			b.Devices = map[string]SparkplugDevice{}
		}
		b.Devices[sp.device] = SparkplugDevice{Online: true, Stamp: sp.p.Timestamp, Table: tableOf(sp)}
	case spDDeath:
		b := &st.Births[sp.birth]
		if dev, ok := b.Devices[sp.device]; ok {
			dev.Online = false
			b.Devices[sp.device] = dev
		}
	default:
		return
	}
	e.pending.sources[src] = struct{}{}
}

// keepBirths drops the births whose epoch window the source no longer keeps.
func (s *SparkplugState) keepBirths(src *SourceState) {
	kept := s.Births[:0]
	for _, b := range s.Births {
		if src.find(b.Epoch, true) >= 0 {
			kept = append(kept, b)
		}
	}
	s.Births = kept
}

// lookupSource returns the window of d's (route, source), or nil.
func (e *Engine) lookupSource(d *decoded) *SourceState {
	var buf [128]byte
	return e.sources[string(appendSourceID(buf[:0], d.route.Name, d.source))]
}
