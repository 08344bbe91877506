package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// chain builds sealed audit records that follow one another, as the engine
// would, so that every backend sees valid positions and hashes.
type chain struct {
	head   engine.AuditHead
	member string // whose chain: "" on a single-owner store
}

// records returns n sealed records following the chain's head and advances it.
func (c *chain) records(t testing.TB, n int) []engine.AuditRecord {
	t.Helper()
	out := make([]engine.AuditRecord, n)
	for i := range out {
		out[i] = auditRecord(c.head.Position + 1)
		out[i].Member = c.member
		if err := engine.Seal(&out[i], c.head.Hash); err != nil {
			t.Fatalf("seal record %d: %v", out[i].Position, err)
		}
		c.head = engine.AuditHead{Position: out[i].Position, Hash: out[i].Hash}
	}
	return out
}

func auditRecord(pos uint64) engine.AuditRecord {
	seq := int64(pos * 3)
	r := engine.AuditRecord{
		Position: pos,
		Time:     time.Unix(1_700_000_000, int64(pos)*1_000_003).UTC(),
		Route:    "incidents",
		Topic:    fmt.Sprintf("incidents/agency-%d/dev-%d", pos%3, pos%7),
		Source:   []string{fmt.Sprintf("agency-%d", pos%3), fmt.Sprintf("dev-%d", pos%7)},
		Epoch:    "boot-1",
		Sequence: &seq,
		Key:      keyHash(pos),
		Digest:   keyHash(pos + 1_000_000),
		Outcome:  engine.Outcomes()[pos%6].String(),
		Dup:      pos%2 == 0,
		Broker:   "tcp://127.0.0.1:1883",
	}
	if pos%4 == 0 {
		r.Gap = &engine.Range{From: seq - 2, To: seq - 1}
	}
	if pos%5 == 0 {
		r.Sequence, r.ID, r.Reason, r.Ref = nil, fmt.Sprintf("msg-%d", pos), "below_window", pos-1
	}
	return r
}

// keyHash is a deterministic, well spread hash for fixtures.
func keyHash(n uint64) engine.Hash {
	var h engine.Hash
	for i := range h {
		h[i] = byte(n>>(8*(i%8))) ^ byte(i*31)
	}
	return h
}

// keyEntriesAt returns entries with ordinals from..to inclusive, each
// applied at base plus its ordinal.
func keyEntriesAt(base int64, from, to uint64) []engine.KeyEntry {
	var out []engine.KeyEntry
	for o := from; o <= to; o++ {
		out = append(out, engine.KeyEntry{Ordinal: o, Key: keyHash(o), Digest: keyHash(o + 7), Time: base + int64(o)})
	}
	return out
}

// sourceState returns a source window; version changes its contents, not its identity.
func sourceState(route string, parts []string, version int64) engine.SourceState {
	return engine.SourceState{
		Route:  route,
		Source: parts,
		Epochs: []engine.EpochWindow{
			{Epoch: "7", Numeric: true, High: 4000 + version, Bitmap: []uint64{uint64(version), 0, 1 << 63}, Gaps: []engine.Range{{From: 10, To: 12 + version}}},
			{Epoch: "6", Numeric: true, High: 99, Floor: 35},
		},
		Seen: []string{"boot-a", fmt.Sprintf("boot-%d", version)},
	}
}

func entityState(name string, version int64) engine.EntityState {
	return engine.EntityState{Name: name, Fields: engine.Fields{
		{Name: "active", FieldValue: engine.FieldValue{Kind: engine.KindRaw, Str: "true"}},
		{Name: "casualties", FieldValue: engine.FieldValue{Kind: engine.KindNumber, Num: fmt.Sprintf("%d.25", version), Version: engine.Version{Ordinal: uint64(version)}}},
		{Name: "status", FieldValue: engine.FieldValue{Kind: engine.KindString, Str: "assigned", Version: engine.Version{Epoch: 7, Sequence: version, Ordinal: 3}}},
	}}
}

func quarantineEntry(id uint64, payload []byte) engine.QuarantineEntry {
	return engine.QuarantineEntry{
		ID:      id,
		Time:    time.Unix(1_700_000_000, int64(id)).UTC(),
		Outcome: engine.Conflict.String(),
		Reason:  "digest differs",
		Route:   "meters",
		Topic:   fmt.Sprintf("plant/meter-%d/energy", id),
		Key:     keyHash(id).String(),
		Dup:     id%2 == 1,
		Broker:  "tcp://127.0.0.1:1883",
		Payload: payload,
	}
}

// normalize puts a snapshot in a comparable form: sources and entities in
// identity order (their order in a snapshot is unspecified), times in UTC.
func normalize(s *engine.Snapshot) *engine.Snapshot {
	out := *s
	out.Sources = slices.Clone(s.Sources)
	slices.SortFunc(out.Sources, func(a, b engine.SourceState) int { return strings.Compare(a.ID(), b.ID()) })
	out.Entities = slices.Clone(s.Entities)
	slices.SortFunc(out.Entities, func(a, b engine.EntityState) int { return strings.Compare(a.Name, b.Name) })
	if len(out.Keys) == 0 {
		out.Keys = nil
	}
	if len(out.Sources) == 0 {
		out.Sources = nil
	}
	if len(out.Entities) == 0 {
		out.Entities = nil
	}
	return &out
}

func normalizeRecord(r engine.AuditRecord) engine.AuditRecord {
	r.Time = r.Time.UTC()
	return r
}

func normalizeEntry(q engine.QuarantineEntry) engine.QuarantineEntry {
	q.Time = q.Time.UTC()
	if len(q.Payload) == 0 {
		q.Payload = nil
	}
	return q
}

// sparkplugSource is the window of a Sparkplug edge node, with its session:
// births with alias tables and devices, kept with the window by every store.
func sparkplugSource() engine.SourceState {
	s := sourceState("plant", []string{"plant", "line-1"}, 3)
	table := engine.SparkplugTable{Aliases: map[uint64]string{1: "Energy", 2: "Node Control/Rebirth"},
		Types: map[string]uint32{"Energy": 10, "Node Control/Rebirth": 11}}
	s.Sparkplug = &engine.SparkplugState{BdSeq: 257, Online: true, Births: []engine.SparkplugBirth{
		{Epoch: "257", BdSeq: 257, Stamp: 1_700_000_000_123, Before: 1_700_000_000_150, Held: 1_700_000_000_400, Digest: keyHash(9),
			Time: time.Unix(1_700_000_000, 5).UTC(), Position: 41, Node: table, Devices: map[string]engine.SparkplugDevice{
				"pump": {Online: true, Stamp: 1_700_000_000_200, Held: 1_700_000_000_300, Table: table,
					Earlier: []engine.SparkplugDeviceTable{{Stamp: 1_700_000_000_130, Table: table, Held: 1_700_000_000_140}}}}},
		{Epoch: "256.1", BdSeq: 256, Rebirth: 1, Stamp: 1_600_000_000_000, Time: time.Unix(1_600_000_000, 0).UTC(), Position: 7, Node: table},
	}}
	return s
}
