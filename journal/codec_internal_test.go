package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

var seed = flag.Uint64("journal.seed", 0, "seed of the codec's property test; 0: the clock")

// randomEntry is an entry of any kind, with any bytes where the format
// allows them.
func randomEntry(r *rand.Rand) engine.JournalEntry {
	text := func(max int) string {
		b := make([]byte, r.IntN(max+1))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return string(b)
	}
	hash := func() (h engine.Hash) {
		for i := range h {
			h[i] = byte(r.UintN(256))
		}
		return h
	}
	e := engine.JournalEntry{
		Kind:  engine.JournalKind(1 + r.IntN(3)),
		Head:  engine.AuditHead{Position: r.Uint64() >> r.UintN(64), Hash: hash()},
		First: r.Uint64() >> r.UintN(64),
		Time:  time.Unix(0, r.Int64()-r.Int64()),
		Lost:  engine.AuditHead{Position: r.Uint64() >> r.UintN(64), Hash: hash()},
	}
	if r.IntN(2) == 0 {
		e.KeyTime = time.Unix(0, 1+r.Int64N(1<<62)).UTC()
	}
	for range r.IntN(4) * r.IntN(4) {
		e.Messages = append(e.Messages, engine.Message{Topic: text(40), Payload: []byte(text(600)),
			Dup: r.IntN(2) == 0, Broker: text(30), Invalid: text(r.IntN(2) * 20), Feed: text(r.IntN(2) * 8)})
		if r.IntN(3) == 0 {
			e.Messages[len(e.Messages)-1].Connected = time.Unix(0, r.Int64()-r.Int64()).UTC()
		}
	}
	if r.IntN(2) == 0 {
		e.Action = text(20)
	}
	if r.IntN(2) == 0 {
		e.Redecides = engine.AuditHead{Position: 1 + r.Uint64()>>(1+r.UintN(63)), Hash: hash()}
	}
	return e
}

// sameEntries reports how a and b differ, "" when they do not; with
// messages false it leaves the messages out.
func sameEntries(a, b engine.JournalEntry, messages bool) string {
	switch {
	case a.Kind != b.Kind:
		return fmt.Sprintf("kind %d, want %d", a.Kind, b.Kind)
	case a.Head != b.Head:
		return fmt.Sprintf("head %v, want %v", a.Head, b.Head)
	case a.First != b.First:
		return fmt.Sprintf("first %d, want %d", a.First, b.First)
	case !a.Time.Equal(b.Time):
		return fmt.Sprintf("time %v, want %v", a.Time, b.Time)
	case !a.KeyTime.Equal(b.KeyTime):
		return fmt.Sprintf("key time %v, want %v", a.KeyTime, b.KeyTime)
	case a.Lost != b.Lost:
		return fmt.Sprintf("lost %v, want %v", a.Lost, b.Lost)
	case a.Action != b.Action:
		return fmt.Sprintf("action %q, want %q", a.Action, b.Action)
	case a.Redecides != b.Redecides:
		return fmt.Sprintf("redecides %v, want %v", a.Redecides, b.Redecides)
	case !messages:
		return ""
	case len(a.Messages) != len(b.Messages):
		return fmt.Sprintf("%d messages, want %d", len(a.Messages), len(b.Messages))
	}
	for i, m := range a.Messages {
		w := b.Messages[i]
		if m.Topic != w.Topic || !bytes.Equal(m.Payload, w.Payload) || m.Dup != w.Dup || m.Broker != w.Broker || m.Invalid != w.Invalid || m.Feed != w.Feed || !m.Connected.Equal(w.Connected) {
			return fmt.Sprintf("message %d is %+v, want %+v", i, m, w)
		}
	}
	return ""
}

func TestCodecRoundTrip(t *testing.T) {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -journal.seed=%d)", s, s)
	r := rand.New(rand.NewPCG(s, s))
	var buf []byte
	for i := range 2000 {
		e := randomEntry(r)
		start := len(buf)
		buf = appendFrame(buf, &e)
		frame := buf[start:]

		idx, n, err := frameAt(frame)
		if err != nil || n != len(frame) {
			t.Fatalf("entry %d: frameAt = %d bytes, %v; want %d, nil", i, n, err, len(frame))
		}
		if d := sameEntries(idx, e, false); d != "" {
			t.Fatalf("entry %d: the index's decode: %s", i, d)
		}
		if idx.Messages != nil {
			t.Fatalf("entry %d: the index's decode kept %d messages", i, len(idx.Messages))
		}
		full, err := decodeBody(frame[frameHeader:], true)
		if err != nil {
			t.Fatalf("entry %d: decodeBody: %v", i, err)
		}
		if d := sameEntries(full, e, true); d != "" {
			t.Fatalf("entry %d: %s", i, d)
		}
	}
	// Frames follow each other: the buffer reads back as a segment.
	var off, count int
	for off < len(buf) {
		_, n, err := frameAt(buf[off:])
		if err != nil {
			t.Fatalf("frame %d at offset %d: %v", count, off, err)
		}
		off += n
		count++
	}
	if count != 2000 {
		t.Errorf("%d frames read back, want 2000", count)
	}
}

func TestDecodeRejects(t *testing.T) {
	e := engine.JournalEntry{Kind: engine.JournalBatch, Head: engine.AuditHead{Position: 9}, First: 7, Time: time.Unix(1_900_000_000, 0),
		Messages: []engine.Message{{Topic: "t", Payload: []byte("{}"), Broker: "b"}, {Topic: "u", Payload: []byte{0, 1, 2}}}}
	frame := appendFrame(nil, &e)
	body := frame[frameHeader:]
	// Where the message count is: after version, kind, time, key time, head, first, lost.
	countAt := 2 + binary.PutVarint(make([]byte, binary.MaxVarintLen64), e.Time.UnixNano()) + 1 + 1 + 32 + 1 + 1 + 32

	with := func(i int, v byte) []byte {
		b := bytes.Clone(body)
		b[i] = v
		return b
	}
	cases := []struct {
		name string
		body []byte
	}{
		{"An empty body does not decode", nil},
		{"Another version does not decode", with(0, recordVersion+1)},
		{"Kind zero does not decode", with(1, 0)},
		{"A kind above the journal's does not decode", with(1, byte(engine.JournalRecoveryDone+1))},
		{"A message count above what the body holds does not decode", with(countAt, 100)},
		{"A topic longer than the body does not decode", with(countAt+1, 120)},
		{"A message count of 2^63 does not decode", append(append(bytes.Clone(body[:countAt]), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), body[countAt+1:]...)},
	}
	for cut := range len(body) {
		cases = append(cases, struct {
			name string
			body []byte
		}{fmt.Sprintf("A body cut to %d of its %d bytes does not decode", cut, len(body)), body[:cut]})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, messages := range []bool{false, true} {
				if _, err := decodeBody(c.body, messages); !errors.Is(err, errCorrupt) {
					t.Errorf("decodeBody(messages %v) = %v, want errCorrupt", messages, err)
				}
			}
		})
	}
	t.Run("A frame whose CRC does not match does not decode", func(t *testing.T) {
		b := bytes.Clone(frame)
		b[len(b)-1] ^= 1
		if _, _, err := frameAt(b); err == nil {
			t.Error("frameAt = nil, want an error")
		}
	})
	t.Run("A frame cut anywhere does not decode", func(t *testing.T) {
		for cut := range len(frame) {
			if _, _, err := frameAt(frame[:cut]); err == nil {
				t.Errorf("frameAt of %d of %d bytes = nil, want an error", cut, len(frame))
			}
		}
	})
}

// FuzzDecode feeds arbitrary bytes to the frame and body decoders: they
// never panic, the index's decode and the full one accept the same
// bodies and agree, and what decodes encodes to a frame that decodes the
// same.
func FuzzDecode(f *testing.F) {
	for _, e := range []engine.JournalEntry{
		{Kind: engine.JournalBatch, Head: engine.AuditHead{Position: 3}, First: 1, Time: time.Unix(1_900_000_000, 5),
			Messages: []engine.Message{{Topic: "incidents/fd", Payload: []byte(`{"sequence":1}`), Broker: "tcp://b:1883"},
				{Topic: "x", Payload: []byte{0, 0xff}, Dup: true, Invalid: "not JSON"}}},
		{Kind: engine.JournalBatch, Head: engine.AuditHead{Position: 4}, First: 4, Action: "discarded"},
		{Kind: engine.JournalRecoveryStart, Head: engine.AuditHead{Position: 2}, Lost: engine.AuditHead{Position: 4}},
		{Kind: engine.JournalRecoveryDone, Head: engine.AuditHead{Position: 9}},
	} {
		frame := appendFrame(nil, &e)
		f.Add(frame)
		f.Add(frame[frameHeader:])
	}
	f.Add([]byte{})
	f.Add(make([]byte, frameHeader))
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, n, err := frameAt(b); err == nil {
			if n < frameHeader || n > len(b) {
				t.Fatalf("frameAt took %d of %d bytes", n, len(b))
			}
			full, err := decodeBody(b[frameHeader:n], true)
			if err != nil {
				t.Fatalf("frameAt decodes a frame whose body does not: %v", err)
			}
			if d := sameEntries(e, full, false); d != "" {
				t.Fatalf("the index's decode and the full one differ: %s", d)
			}
		}
		idx, ierr := decodeBody(b, false)
		full, ferr := decodeBody(b, true)
		if (ierr == nil) != (ferr == nil) {
			t.Fatalf("the index's decode returns %v, the full one %v", ierr, ferr)
		}
		if ferr != nil {
			return
		}
		if d := sameEntries(idx, full, false); d != "" {
			t.Fatalf("the index's decode and the full one differ: %s", d)
		}
		frame := appendFrame(nil, &full)
		again, n, err := frameAt(frame)
		if err != nil || n != len(frame) {
			t.Fatalf("a decoded entry encodes to a frame that does not decode: %d of %d bytes, %v", n, len(frame), err)
		}
		if d := sameEntries(again, full, false); d != "" {
			t.Fatalf("the index's round trip: %s", d)
		}
		again, err = decodeBody(frame[frameHeader:], true)
		if err != nil {
			t.Fatal(err)
		}
		if d := sameEntries(again, full, true); d != "" {
			t.Fatalf("round trip: %s", d)
		}
	})
}

// TestWriteFuzzCorpus writes the seed corpus in testdata/fuzz/FuzzDecode
// when run with JOURNAL_WRITE_CORPUS=1.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("JOURNAL_WRITE_CORPUS") == "" {
		t.Skip("set JOURNAL_WRITE_CORPUS=1 to write testdata/fuzz/FuzzDecode")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		e := randomEntry(r)
		frame := appendFrame(nil, &e)
		write(fmt.Sprintf("frame-%d", i), frame)
		write(fmt.Sprintf("body-%d", i), frame[frameHeader:])
		write(fmt.Sprintf("torn-%d", i), frame[:len(frame)*2/3])
	}
	batch := engine.JournalEntry{Kind: engine.JournalBatch, Head: engine.AuditHead{Position: 12}, First: 10, Time: time.Unix(1_900_000_000, 0),
		Messages: []engine.Message{{Topic: "plant/m3/energy", Payload: []byte(`{"msgId":"meter-3-000042","kwh":0.25}`), Broker: "tcp://b:1883"}}}
	write("batch", appendFrame(nil, &batch))
	action := engine.JournalEntry{Kind: engine.JournalBatch, Head: engine.AuditHead{Position: 13}, First: 13, Time: time.Unix(1_900_000_001, 0), Action: "released"}
	write("action", appendFrame(nil, &action))
	marker := engine.JournalEntry{Kind: engine.JournalRecoveryStart, Head: engine.AuditHead{Position: 8}, Lost: engine.AuditHead{Position: 13}, Time: time.Unix(1_900_000_002, 0)}
	write("recovery-start", appendFrame(nil, &marker))
	write("zeros", make([]byte, 64))
	write("huge-length", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1, 1})
	body := appendFrame(nil, &batch)[frameHeader:]
	countAt := len(body) - 1 - (1 + len(batch.Messages[0].Topic) + 1 + len(batch.Messages[0].Payload) + 1 + len(batch.Messages[0].Broker) + 1 + 1) - 1
	big := append(append(bytes.Clone(body[:countAt]), 0xff, 0xff, 0xff, 0xff, 0x0f), body[countAt+1:]...)
	write("huge-count", big)
}

// A batch's first delivery of a broker connection keeps, in the journal,
// when the connection came up (engine.Message.Connected): a recovery
// decides it again with it, so that the recovered audit record names the
// connection as the lost one did. A body with it ends, for a build from
// before, with the redecides field (position 0: none), which that build
// reads as the end of the body.
func TestAJournaledDeliveryKeepsItsConnectionTime(t *testing.T) {
	at := time.Date(2026, 12, 5, 5, 14, 7, 468000001, time.UTC)
	e := engine.JournalEntry{Kind: engine.JournalBatch, Head: engine.AuditHead{Position: 2}, First: 1, Time: at,
		Messages: []engine.Message{
			{Topic: "plant/m3/energy", Payload: []byte(`{"msgId":"a"}`), Broker: "tcp://b:1883", Connected: at},
			{Topic: "plant/m3/energy", Payload: []byte(`{"msgId":"b"}`), Broker: "tcp://b:1883"},
		}, Effective: []bool{true, true}}
	frame := appendFrame(nil, &e)
	got, err := decodeBody(frame[frameHeader:], true)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Messages[0].Connected.Equal(at) || !got.Messages[1].Connected.IsZero() || got.Redecides != (engine.AuditHead{}) {
		t.Fatalf("decoded connection times %v, %v (redecides %v); want %v on the first delivery only, no redecides",
			got.Messages[0].Connected, got.Messages[1].Connected, got.Redecides, at)
	}
	if _, err := decodeBody(frame[frameHeader:], false); err != nil {
		t.Fatalf("the index's decoding refuses the body: %v", err)
	}
	plain := e
	plain.Messages = []engine.Message{e.Messages[0], e.Messages[1]}
	plain.Messages[0].Connected = time.Time{}
	without := appendFrame(nil, &plain)[frameHeader:]
	with := frame[frameHeader:]
	if !bytes.HasPrefix(with, without) || with[len(without)] != 0 {
		t.Fatalf("the body with a connection time does not extend the one without by a redecides field of position 0")
	}
}

// A batch keeps, in the journal, the group's clock its keys were stamped
// by (engine.JournalEntry.KeyTime), in a version 2 record; a version 1
// record, as a build from before wrote it, reads as one without it.
func TestAJournaledBatchKeepsItsKeyTime(t *testing.T) {
	at := time.Date(2026, 12, 5, 5, 14, 7, 468000001, time.UTC)
	e := engine.JournalEntry{Kind: engine.JournalBatch, Head: engine.AuditHead{Position: 2}, First: 1, Time: at.Add(-3 * time.Hour), KeyTime: at,
		Messages: []engine.Message{{Topic: "plant/m3/energy", Payload: []byte(`{"msgId":"a"}`), Broker: "tcp://b:1883"}}, Effective: []bool{true}}
	for _, messages := range []bool{false, true} {
		got, err := decodeBody(appendFrame(nil, &e)[frameHeader:], messages)
		if err != nil || !got.KeyTime.Equal(at) || !got.Time.Equal(e.Time) {
			t.Fatalf("decoded key time %v, time %v (%v); want %v, %v", got.KeyTime, got.Time, err, at, e.Time)
		}
	}
	plain := e
	plain.KeyTime = time.Time{}
	body := appendFrame(nil, &plain)[frameHeader:]
	timeLen := binary.PutVarint(make([]byte, binary.MaxVarintLen64), e.Time.UnixNano())
	if body[0] != 2 || body[2+timeLen] != 0 {
		t.Fatalf("a body without a key time is version %d with %#x where the key time goes; want version 2 with 0", body[0], body[2+timeLen])
	}
	v1 := append([]byte{1}, body[1:2+timeLen]...)
	v1 = append(v1, body[3+timeLen:]...)
	for _, messages := range []bool{false, true} {
		got, err := decodeBody(v1, messages)
		if err != nil || !got.KeyTime.IsZero() || !got.Time.Equal(e.Time) || got.Head != e.Head {
			t.Fatalf("a version 1 body decodes to key time %v, time %v, head %v (%v); want none, %v, %v", got.KeyTime, got.Time, got.Head, err, e.Time, e.Head)
		}
	}
}
