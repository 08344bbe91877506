package embedded

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The codec names every field; a new field must be added to it.
func TestAuditCodecCoversEveryField(t *testing.T) {
	const known = "Position Time Route Topic Source Epoch Sequence ID Key Digest Outcome Reason Dup Broker Feed Connected Ref Operator Member Gap Effects Prev Hash"
	typ := reflect.TypeFor[engine.AuditRecord]()
	var names []string
	for i := range typ.NumField() {
		names = append(names, typ.Field(i).Name)
	}
	if got := strings.Join(names, " "); got != known {
		t.Fatalf("engine.AuditRecord has fields %q; appendAudit and decodeAudit handle %q", got, known)
	}
}

func roundTrip(t *testing.T, r engine.AuditRecord) {
	t.Helper()
	got, err := decodeAudit(r.Position, appendAudit(nil, &r))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	r.Time = r.Time.UTC()
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
	}
}

func TestAuditCodecRoundTrips(t *testing.T) {
	seq := int64(-1)
	hash := mustHash(t, strings.Repeat("0123456789abcdef", 4))
	cases := map[string]engine.AuditRecord{
		"a zero record":            {},
		"an empty, non-nil source": {Source: []string{}},
		"hashes":                   {Position: 7, Key: hash, Digest: hash, Prev: hash, Hash: hash, Time: time.Now()},
		"a zero key and digest":    {Prev: hash, Hash: hash},
		"everything set": {Position: 1 << 60, Time: time.Date(1, 1, 1, 0, 0, 0, 1, time.FixedZone("x", 3600)),
			Route: "r", Topic: "a/\xff/b", Source: []string{"", "x|y"}, Epoch: "e", Sequence: &seq, ID: "id",
			Outcome: "conflict", Reason: "digest differs", Dup: true, Broker: "tcp://h:1", Ref: 99, Prev: hash,
			Gap: &engine.Range{From: 3, To: -9}},
		"effects": {Position: 8, Outcome: "applied", Prev: hash, Hash: hash, Effects: []engine.Change{
			{Entity: "incident/7", Field: "casualties", Op: "add", Value: json.RawMessage("3"), After: json.RawMessage("5")},
			{Entity: "incident/7", Field: "status", Op: "set", Value: json.RawMessage(`"assigned"`), After: json.RawMessage(`"available"`), Lost: true},
			{Entity: "meter/m1", Field: "temp", Op: "set", Value: json.RawMessage("18"), After: json.RawMessage("25"), Historical: true},
			{Entity: "", Field: "", Op: ""},
		}},
		"a feed":             {Position: 9, Outcome: "duplicate", Feed: "b", Prev: hash, Hash: hash},
		"a feed and effects": {Position: 10, Outcome: "applied", Feed: "a", Prev: hash, Hash: hash, Effects: []engine.Change{{Entity: "m", Field: "kwh", Op: "add", Value: json.RawMessage("1"), After: json.RawMessage("1")}}},
		"a connection's first delivery": {Position: 11, Outcome: "applied", Broker: "tcp://h:1", Prev: hash, Hash: hash,
			Connected: time.Date(2026, 12, 5, 5, 14, 7, 468000001, time.UTC)},
		"a connection's first delivery on a feed, with effects": {Position: 12, Outcome: "applied", Feed: "a", Prev: hash, Hash: hash,
			Connected: time.Date(2026, 12, 5, 5, 14, 7, 0, time.UTC),
			Effects:   []engine.Change{{Entity: "m", Field: "kwh", Op: "add", Value: json.RawMessage("1"), After: json.RawMessage("1")}}},
		"a discard naming its operator": {Position: 6, Outcome: engine.OutcomeDiscarded, Reason: "bench rig noise",
			Ref: 4, Operator: "j.doe", Prev: hash, Hash: hash},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) { roundTrip(t, r) })
	}
}

// A store written when hashes were text may hold one as a string of hex
// digits (the flag clear): it decodes to the same hash; text no hash can
// hold is a corrupt record.
func TestAuditCodecReadsTextHashes(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	r := engine.AuditRecord{Prev: mustHash(t, hex), Hash: mustHash(t, hex), Key: mustHash(t, hex)}
	enc := appendAudit(nil, &r)
	// The record ends with key, digest, prev and hash; rewrite the key as text.
	tail := len(enc) - 1 - 32 - 32 // the key's 32 bytes precede an empty digest, prev and hash
	text := append(append(append([]byte{}, enc[:tail-32]...), byte(len(hex))), hex...)
	text = append(text, enc[tail:]...)
	text[1] &^= flagKeyRaw
	got, err := decodeAudit(0, text)
	if err != nil || got.Key != r.Key {
		t.Fatalf("text key: got %v, %v; want %v", got.Key, err, r.Key)
	}
	bad := append(append(append([]byte{}, enc[:tail-32]...), byte(len(hex))), strings.ToUpper(hex)...)
	bad = append(bad, enc[tail:]...)
	bad[1] &^= flagKeyRaw
	if _, err := decodeAudit(0, bad); err == nil {
		t.Fatal("upper-case hex, which no record's hash re-encodes to, decoded")
	}
}

func mustHash(t testing.TB, s string) engine.Hash {
	t.Helper()
	h, err := engine.ParseHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func FuzzAuditCodec(f *testing.F) {
	hash := strings.Repeat("ab", 32)
	f.Add(uint64(1), int64(1700000000), int64(5), "incidents", "incidents/a/b", "agency|dev", "1", true, "applied", hash, true, uint64(0), "")
	f.Add(uint64(0), int64(-62135596800), int64(-1), "", "", "", "", false, "", "", false, uint64(1<<63), "")
	f.Add(uint64(6), int64(1700000000), int64(-1), "meters", "plant/m1/energy", "", "", false, "discarded", hash, false, uint64(4), "j.doe")
	f.Fuzz(func(t *testing.T, pos uint64, nanos, seq int64, route, topic, source, epoch string, hasSeq bool, outcome, hash string, dup bool, ref uint64, operator string) {
		var key, digest, lower engine.Hash
		copy(key[:], hash)
		copy(digest[:], hash[:len(hash)/2])
		copy(lower[:], strings.ToLower(hash))
		r := engine.AuditRecord{Position: pos, Time: time.Unix(0, nanos), Route: route, Topic: topic,
			Epoch: epoch, Outcome: outcome, Dup: dup, Ref: ref, Operator: operator, Key: key, Digest: digest, Prev: key, Hash: lower}
		if source != "" {
			r.Source = strings.Split(source, "|")
		}
		if hasSeq {
			r.Sequence = &seq
			r.Gap = &engine.Range{From: seq, To: nanos}
		}
		r.Feed = epoch
		if operator != "" {
			r.Effects = []engine.Change{{Entity: source, Field: operator, Op: "set",
				Value: rawOrNil(strings.ToLower(hash)), After: rawOrNil(epoch), Lost: dup}}
		}
		roundTrip(t, r)
		// Any bytes decode to a record or an error, never a panic.
		_, _ = decodeAudit(pos, []byte(topic))
		_, _ = decodeAudit(pos, append([]byte{auditFormat}, source...))
		enc := appendAudit(nil, &r)
		for n := range len(enc) { // a record with its effects cut short is corrupt
			if _, err := decodeAudit(pos, enc[:n]); err == nil && len(r.Effects) > 0 {
				t.Fatalf("a record cut to %d of %d bytes decoded", n, len(enc))
			}
		}
	})
}

// rawOrNil is what an effect's value decodes to: nil when empty.
func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// BenchmarkAuditCodec compares the binary codec with encoding/json on a
// typical record.
func BenchmarkAuditCodec(b *testing.B) {
	seq := int64(42)
	hash := mustHash(b, strings.Repeat("0123456789abcdef", 4))
	r := engine.AuditRecord{Position: 1234567, Time: time.Now(), Route: "incidents", Topic: "incidents/agency-7/unit-12",
		Source: []string{"agency-7", "dev-000123"}, Epoch: "1700000000", Sequence: &seq, Key: hash, Digest: hash,
		Outcome: "applied", Broker: "tcp://127.0.0.1:1883", Prev: hash, Hash: hash}
	bin := appendAudit(nil, &r)
	js, _ := json.Marshal(&r)
	b.Run("encode binary", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = appendAudit(buf[:0], &r)
		}
	})
	b.Run("encode json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(&r)
		}
	})
	b.Run("decode binary", func(b *testing.B) {
		for b.Loop() {
			_, _ = decodeAudit(1, bin)
		}
	})
	b.Run("decode json", func(b *testing.B) {
		for b.Loop() {
			var out engine.AuditRecord
			_ = json.Unmarshal(js, &out)
		}
	})
}

// testdata/pre-operator.bin.hex holds six records (a release and a discard
// among them) as the codec wrote them before records could name an
// operator: they decode, re-encode to the same bytes and still chain.
func TestAuditCodecReadsRecordsFromBeforeOperators(t *testing.T) {
	raw, err := os.ReadFile("testdata/pre-operator.bin.hex")
	if err != nil {
		t.Fatal(err)
	}
	var prev engine.Hash
	for i, line := range strings.Fields(string(raw)) {
		enc, err := hex.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeAudit(uint64(i+1), enc)
		if err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
		if r.Operator != "" || !bytes.Equal(appendAudit(nil, &r), enc) {
			t.Fatalf("record %d does not round-trip as written: %+v", i+1, r)
		}
		if h, _ := engine.ChainHash(r); r.Prev != prev || h != r.Hash {
			t.Fatalf("record %d no longer chains", i+1)
		}
		prev = r.Hash
	}
}
