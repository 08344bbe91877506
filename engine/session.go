package engine

import (
	"maps"
	"slices"
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
	// Retired are births whose epoch window the source no longer keeps,
	// newest first, each with its window's last highest sequence (High):
	// a replay of their messages is read with their tables and found at
	// the placement whose key the key window still holds with its content,
	// a duplicate, however old its birth. At most window.keep_epochs + 1
	// of them; a later NBIRTH drops those retired longer than window.ttl
	// (RetiredAt is on the clock the key window ages by, Placement.KeyNow).
	Retired []SparkplugBirth `json:"retired,omitempty"`
	// Deaths are the NDEATHs applied when no kept or retired birth of
	// their session was there to record them (an older session's the edge
	// was never born in here, a late Will; a newer one's, decided before
	// its NBIRTH, whose birth then takes the record over), newest session
	// first, at most window.keep_epochs + 1 of them.
	Deaths []SparkplugDeath `json:"deaths,omitempty"`
	// Forgot is one past the newest session whose NDEATH record (its
	// births', or in Deaths) was dropped: an NDEATH of a session below it
	// that is found nowhere may have been applied.
	Forgot int64 `json:"forgot,omitempty"`
	// Recorded says the NDEATHs applied to the edge are recorded here
	// (Deaths, the births' Ended and Death). A row written by a build from
	// before the records has it false, and holds no record of the NDEATHs
	// that build applied; the first write of a build that records sets
	// it, and Unrecorded.
	Recorded bool `json:"recorded,omitempty"`
	// Unrecorded is one past the newest session whose NDEATH may have been
	// applied unrecorded, when the row was written by a build from before
	// the records: its current session if the edge was offline then, else
	// the one before. An NDEATH of a session below it that is found
	// nowhere may have been applied.
	Unrecorded int64 `json:"unrecorded,omitempty"`
}

// UnrecordedBelow is one past the newest session whose NDEATH the row may
// have no record of although it was applied: Unrecorded once a build that
// records wrote the row; for a row of a build from before (Recorded
// false), its current session if the edge is offline, else the one
// before; zero for an edge never born.
func (s *SparkplugState) UnrecordedBelow() int64 {
	switch {
	case s == nil:
		return 0
	case s.Recorded:
		return s.Unrecorded
	case len(s.Births) == 0 && len(s.Retired) == 0:
		return 0
	case s.Online:
		return s.BdSeq
	}
	return s.BdSeq + 1
}

// SparkplugDeath is an applied NDEATH of a session: its digest.
type SparkplugDeath struct {
	BdSeq  int64 `json:"bdseq"`
	Digest Hash  `json:"digest"`
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
	HighStamp uint64 `json:"high_stamp,omitempty"`
	// Before is the HighStamp of the birth before when this one was
	// applied, when later than its NBIRTH: its messages stamped up to it
	// may have been applied there (decided before the NBIRTH), and once
	// their keys leave the key window nothing tells them from new ones.
	Before uint64 `json:"before,omitempty"`
	// Ended says its session's NDEATH was applied, before or after it was;
	// Death is that NDEATH's content digest, unless it was applied before
	// any birth of its session and its key was all that told of it. A
	// replay of it whose key has left the key window is found here.
	// Held is the timestamp of the earliest NBIRTH stamped after this
	// one that was held (quarantined, malformed, or held on recovery)
	// while this was the edge's newest birth: the messages stamped from
	// it on, until the edge's next applied birth, belong to a birth whose
	// aliases and seq are not known, and are held rather than read here.
	// Zero when none was (and in rows of builds from before it).
	Held    uint64                     `json:"held,omitempty"`
	Ended   bool                       `json:"ended,omitempty"`
	Death   Hash                       `json:"death,omitzero"`
	Node    SparkplugTable             `json:"node"`
	Devices map[string]SparkplugDevice `json:"devices,omitempty"`
	// High and RetiredAt are a retired birth's (SparkplugState.Retired):
	// its window's highest sequence when the window left, and when.
	High      int64     `json:"high,omitempty"`
	RetiredAt time.Time `json:"retired_at,omitzero"`
}

// SparkplugDevice is a device of an edge, from its DBIRTH.
type SparkplugDevice struct {
	Online bool           `json:"online"`
	Stamp  uint64         `json:"stamp"` // the DBIRTH's timestamp, ms
	Table  SparkplugTable `json:"table"`
	// Death is the timestamp of the last DDEATH applied to it, ms: one at
	// or after its DBIRTH's ended it, in whatever order they were decided.
	Death uint64 `json:"death,omitempty"`
	// Held is the timestamp of the earliest DBIRTH of the device stamped
	// after Stamp that was held: its DDATA stamped from it on, until the
	// device's next applied DBIRTH, is held rather than read with Table.
	Held uint64 `json:"held,omitempty"`
	// Earlier are the tables of its DBIRTHs in this birth before the last
	// one, newest first, each with the timestamp from which it was the
	// device's (a run of DBIRTHs with one table is one entry): a DDATA
	// stamped before the last DBIRTH is read with the table it was sent
	// under. At most window.keep_epochs + 1 of them.
	Earlier []SparkplugDeviceTable `json:"earlier,omitempty"`
}

// SparkplugDeviceTable is a device's alias table from Stamp (a DBIRTH's
// timestamp, ms) until its next DBIRTH that gave another.
type SparkplugDeviceTable struct {
	Stamp uint64         `json:"stamp"`
	Table SparkplugTable `json:"table"`
	Held  uint64         `json:"held,omitempty"` // the device's Held while it was its table
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
	c.Deaths = slices.Clone(s.Deaths)
	if s.Retired != nil {
		c.Retired = append([]SparkplugBirth(nil), s.Retired...)
		for i := range c.Retired {
			c.Retired[i].Devices = maps.Clone(c.Retired[i].Devices)
		}
	}
	return &c
}
