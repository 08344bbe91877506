package journal_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
)

// hashOf is the head hash of position pos of a chain; chains "a" and "b"
// are two incarnations of one member.
func hashOf(chain string, pos uint64) engine.Hash {
	return sha256.Sum256(fmt.Appendf(nil, "%s/%d", chain, pos))
}

func head(chain string, pos uint64) engine.AuditHead {
	return engine.AuditHead{Position: pos, Hash: hashOf(chain, pos)}
}

// batch is a batch of chain's records first..last.
func batch(chain string, first, last uint64, msgs ...engine.Message) engine.JournalEntry {
	return engine.JournalEntry{Kind: engine.JournalBatch, Head: head(chain, last), First: first, Messages: msgs}
}

// msg is a delivery whose payload tells which batch it belongs to.
func msg(chain string, pos uint64) engine.Message {
	return engine.Message{Topic: "incidents/" + chain, Payload: fmt.Appendf(nil, `{"chain":%q,"sequence":%d}`, chain, pos), Broker: "tcp://broker:1883"}
}

// clock is a fake Options.Now that tests advance.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func open(t testing.TB, dir string, o journal.Options) *journal.Journal {
	t.Helper()
	j, err := journal.Open(dir, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func reopen(t testing.TB, j *journal.Journal, o journal.Options) *journal.Journal {
	t.Helper()
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return open(t, j.Dir(), o)
}

func appendAll(t testing.TB, j *journal.Journal, es ...engine.JournalEntry) {
	t.Helper()
	for _, e := range es {
		if err := j.Append(e); err != nil {
			t.Fatalf("Append(%v): %v", e.Head, err)
		}
	}
}

func replay(t testing.TB, j *journal.Journal, after engine.AuditHead) ([]engine.JournalEntry, engine.Span) {
	t.Helper()
	var got []engine.JournalEntry
	uncovered, err := j.Replay(after, func(e engine.JournalEntry) error {
		got = append(got, e)
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%d): %v", after.Position, err)
	}
	return got, uncovered
}

func heads(es []engine.JournalEntry) []engine.AuditHead {
	hs := make([]engine.AuditHead, len(es))
	for i, e := range es {
		hs[i] = e.Head
	}
	return hs
}

func headsOf(chain string, from, to uint64) []engine.AuditHead {
	var hs []engine.AuditHead
	for p := from; p <= to; p++ {
		hs = append(hs, head(chain, p))
	}
	return hs
}

func positions(hs []engine.AuditHead) []uint64 {
	ps := make([]uint64, len(hs))
	for i, h := range hs {
		ps[i] = h.Position
	}
	return ps
}

func checkHeads(t testing.TB, what string, got, want []engine.AuditHead) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got heads at positions %v, want %v (or the same positions with other hashes)", what, positions(got), positions(want))
	}
}

// sameEntry compares what the journal keeps of an entry; messages too
// when withMessages.
func sameEntry(t testing.TB, what string, got, want engine.JournalEntry, withMessages bool) {
	t.Helper()
	if got.Kind != want.Kind || got.Head != want.Head || got.First != want.First || got.Lost != want.Lost || got.Action != want.Action {
		t.Errorf("%s: got kind %d head %d first %d lost %d action %q, want kind %d head %d first %d lost %d action %q", what,
			got.Kind, got.Head.Position, got.First, got.Lost.Position, got.Action,
			want.Kind, want.Head.Position, want.First, want.Lost.Position, want.Action)
	}
	if !want.Time.IsZero() && !got.Time.Equal(want.Time) {
		t.Errorf("%s: time %v, want %v", what, got.Time, want.Time)
	}
	if !withMessages {
		if got.Messages != nil {
			t.Errorf("%s: %d messages, want none", what, len(got.Messages))
		}
		return
	}
	if len(got.Messages) != len(want.Messages) {
		t.Fatalf("%s: %d messages, want %d", what, len(got.Messages), len(want.Messages))
	}
	for i, g := range got.Messages {
		w := want.Messages[i]
		if g.Topic != w.Topic || !bytes.Equal(g.Payload, w.Payload) || g.Dup != w.Dup || g.Broker != w.Broker || g.Invalid != w.Invalid {
			t.Errorf("%s: message %d is {%q %q dup=%v %q %q}, want {%q %q dup=%v %q %q}", what, i,
				g.Topic, g.Payload, g.Dup, g.Broker, g.Invalid, w.Topic, w.Payload, w.Dup, w.Broker, w.Invalid)
		}
	}
}

// segments lists dir's segment files, oldest first.
func segments(t testing.TB, dir string) []string {
	t.Helper()
	ms, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ms)
	return ms
}

func size(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestAppendThenReopen(t *testing.T) {
	clk := newClock()
	o := journal.Options{Now: clk.Now}
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	entries := []engine.JournalEntry{
		batch("a", 1, 2, msg("a", 1), msg("a", 2)),
		batch("a", 3, 5,
			engine.Message{Topic: "plant/m3/energy", Payload: binary, Dup: true, Broker: "ssl://b2:8883"},
			engine.Message{Topic: "capture", Payload: []byte("\xff\xfe{broken\x00"), Broker: "capture.jsonl", Invalid: "line 7: not JSON"},
			engine.Message{Topic: "empty", Payload: nil},
		),
		batch("a", 6, 6, msg("a", 6)),
		{Kind: engine.JournalBatch, Head: head("a", 7), First: 7, Action: engine.OutcomeDiscarded},
	}
	for i := range entries {
		clk.Advance(time.Second)
		entries[i].Time = clk.Now()
	}
	newest := entries[len(entries)-1]

	j := open(t, t.TempDir(), o)
	appendAll(t, j, entries...)
	before, _ := j.Last()

	t.Run("Last returns the newest batch without its messages", func(t *testing.T) {
		last, recovering := j.Last()
		sameEntry(t, "Last", last, newest, false)
		if recovering != nil {
			t.Errorf("Last: recovering %+v, want nil", recovering)
		}
	})
	j = reopen(t, j, o)
	t.Run("After a reopen Last returns the newest batch without its messages", func(t *testing.T) {
		last, recovering := j.Last()
		sameEntry(t, "Last", last, newest, false)
		sameEntry(t, "Last before and after the reopen", last, before, false)
		if recovering != nil {
			t.Errorf("Last: recovering %+v, want nil", recovering)
		}
	})
	t.Run("After a reopen Replay returns every message byte for byte", func(t *testing.T) {
		got, uncovered := replay(t, j, engine.AuditHead{})
		if len(got) != len(entries) {
			t.Fatalf("Replay returned %d batches, want %d", len(got), len(entries))
		}
		for i := range got {
			sameEntry(t, fmt.Sprintf("batch %d", i), got[i], entries[i], true)
		}
		if !uncovered.Empty() {
			t.Errorf("uncovered %v, want none: the journal begins at position 1", uncovered)
		}
	})
	t.Run("An entry without a time is given the clock's", func(t *testing.T) {
		e := batch("a", 8, 8)
		appendAll(t, j, e)
		last, _ := j.Last()
		if !last.Time.Equal(clk.Now()) {
			t.Errorf("time %v, want the clock's %v", last.Time, clk.Now())
		}
	})
}

func TestAnEmptyJournal(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "not", "yet"), journal.Options{})
	t.Run("Open creates the directory and Last returns nothing", func(t *testing.T) {
		last, recovering := j.Last()
		if last.Kind != 0 || last.Head != (engine.AuditHead{}) || recovering != nil {
			t.Errorf("Last = %+v, %v; want the zero entry and nil", last, recovering)
		}
	})
	t.Run("Replay calls nothing and reports nothing uncovered", func(t *testing.T) {
		got, uncovered := replay(t, j, head("a", 3))
		if len(got) != 0 || !uncovered.Empty() {
			t.Errorf("Replay = %d batches, uncovered %v; want none", len(got), uncovered)
		}
	})
}

func TestATornLastAppend(t *testing.T) {
	damages := []struct {
		name   string
		damage func(t *testing.T, path string, frame int64)
		// torn: the damage is to the last append, which goes; else it
		// follows the last append, which stays.
		torn bool
	}{
		{"A last append cut short by one byte is cut off", func(t *testing.T, path string, frame int64) {
			truncate(t, path, size(t, path)-1)
		}, true},
		{"A last append cut inside its header is cut off", func(t *testing.T, path string, frame int64) {
			truncate(t, path, size(t, path)-frame+3)
		}, true},
		{"A last append of nothing but its header is cut off", func(t *testing.T, path string, frame int64) {
			truncate(t, path, size(t, path)-frame+8)
		}, true},
		{"A last append with a changed byte is cut off", func(t *testing.T, path string, frame int64) {
			flip(t, path, size(t, path)-frame/2)
		}, true},
		{"Garbage after the last append is cut off", func(t *testing.T, path string, frame int64) {
			appendFile(t, path, []byte("\x17\x00\x00\x00garbage that is not a frame"))
		}, false},
		{"Zeros after the last append are cut off", func(t *testing.T, path string, frame int64) {
			appendFile(t, path, make([]byte, 4096))
		}, false},
		{"A length prefix far past the end is cut off", func(t *testing.T, path string, frame int64) {
			appendFile(t, path, []byte{0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5})
		}, false},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			j := open(t, dir, journal.Options{})
			appendAll(t, j, batch("a", 1, 1, msg("a", 1)), batch("a", 2, 3, msg("a", 2), msg("a", 3)))
			seg := segments(t, dir)[0]
			good := size(t, seg)
			appendAll(t, j, batch("a", 4, 4, msg("a", 4)))
			frame := size(t, seg) - good
			j.Close()

			kept := []engine.AuditHead{head("a", 1), head("a", 3), head("a", 4)}
			if d.torn {
				kept, good = kept[:2], good-frame
			}
			good += frame
			newest := kept[len(kept)-1]

			d.damage(t, seg, frame)
			j = open(t, dir, journal.Options{})
			if last, _ := j.Last(); last.Head != newest {
				t.Errorf("Last is at %d, want %d: a torn batch was never acknowledged", last.Head.Position, newest.Position)
			}
			if got := size(t, seg); got != good {
				t.Errorf("the segment is %d bytes after Open, want %d: the torn tail stays", got, good)
			}
			got, _ := replay(t, j, engine.AuditHead{})
			checkHeads(t, "Replay after the cut", heads(got), kept)

			next := batch("a", newest.Position+1, 5, msg("a", newest.Position+1), msg("a", 5))
			appendAll(t, j, next)
			j = reopen(t, j, journal.Options{})
			if last, _ := j.Last(); last.Head != head("a", 5) {
				t.Errorf("after an append and a reopen Last is at %d, want 5", last.Head.Position)
			}
			got, _ = replay(t, j, newest)
			checkHeads(t, "Replay of the append after the cut", heads(got), []engine.AuditHead{head("a", 5)})
			if len(got) == 1 {
				sameEntry(t, "the append after the cut", got[0], next, true)
			}
		})
	}

	t.Run("A last segment of nothing but garbage is cut off whole", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "0000000000000001.seg"), []byte("\x05\x00\x00\x00\x00\x00\x00\x00hello, world"), 0o640); err != nil {
			t.Fatal(err)
		}
		j := open(t, dir, journal.Options{})
		if last, _ := j.Last(); last.Kind != 0 {
			t.Errorf("Last = %+v, want nothing", last)
		}
		appendAll(t, j, batch("a", 1, 1))
		j = reopen(t, j, journal.Options{})
		if last, _ := j.Last(); last.Head != head("a", 1) {
			t.Errorf("Last is at %d, want 1", last.Head.Position)
		}
	})
}

func TestDamageBeforeTheLastSegment(t *testing.T) {
	damages := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"A changed byte in a middle segment fails Open with ErrCorrupt", func(t *testing.T, path string) {
			flip(t, path, size(t, path)/2)
		}},
		{"A middle segment cut short fails Open with ErrCorrupt", func(t *testing.T, path string) {
			truncate(t, path, size(t, path)-1)
		}},
		{"Garbage after a middle segment's last record fails Open with ErrCorrupt", func(t *testing.T, path string) {
			appendFile(t, path, []byte("garbage"))
		}},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			// Each batch is larger than a segment: every append rolls.
			o := journal.Options{SegmentBytes: 512}
			j := open(t, dir, o)
			for p := uint64(1); p <= 4; p++ {
				appendAll(t, j, batch("a", p, p, engine.Message{Topic: "t", Payload: bytes.Repeat([]byte{byte(p)}, 600)}))
			}
			j.Close()
			segs := segments(t, dir)
			if len(segs) < 3 {
				t.Fatalf("%d segments, want one per batch and an empty last one", len(segs))
			}
			d.damage(t, segs[1])
			_, err := journal.Open(dir, o)
			if !errors.Is(err, journal.ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), filepath.Base(segs[1])) {
				t.Errorf("the error %q does not name the damaged segment %s", err, filepath.Base(segs[1]))
			}
		})
	}
}

func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func TestReplay(t *testing.T) {
	j := open(t, t.TempDir(), journal.Options{})
	// Batches 11..12, 13..15, 16, 17..20; a recovery between 16 and 17.
	appendAll(t, j,
		batch("a", 11, 12, msg("a", 11), msg("a", 12)),
		batch("a", 13, 15, msg("a", 13)),
		batch("a", 16, 16, msg("a", 16)),
		engine.JournalEntry{Kind: engine.JournalRecoveryStart, Head: head("a", 14), Lost: head("a", 16)},
		engine.JournalEntry{Kind: engine.JournalRecoveryDone, Head: head("a", 16)},
		batch("a", 17, 20, msg("a", 17)),
	)
	all := []engine.AuditHead{head("a", 12), head("a", 15), head("a", 16), head("a", 20)}
	cases := []struct {
		name      string
		after     engine.AuditHead
		want      []engine.AuditHead
		uncovered engine.Span
	}{
		{"After a head it holds, Replay returns the later batches in append order and skips markers",
			head("a", 12), []engine.AuditHead{head("a", 15), head("a", 16), head("a", 20)}, engine.Span{}},
		{"After the newest head, Replay returns nothing",
			head("a", 20), nil, engine.Span{}},
		{"After an unknown hash at a position it holds, Replay walks by position",
			head("x", 15), []engine.AuditHead{head("a", 16), head("a", 20)}, engine.Span{}},
		{"After an unknown hash inside a batch, Replay includes that batch",
			head("x", 14), []engine.AuditHead{head("a", 15), head("a", 16), head("a", 20)}, engine.Span{}},
		{"After an unknown hash above everything, Replay returns nothing",
			head("x", 99), nil, engine.Span{}},
		{"After a head just below the first batch, Replay returns everything and nothing is uncovered",
			head("x", 10), all, engine.Span{}},
		{"After a head below the first batch, the positions between are uncovered",
			head("x", 4), all, engine.Span{From: 5, To: 10}},
		{"After the zero head, everything before the first batch is uncovered",
			engine.AuditHead{}, all, engine.Span{From: 1, To: 10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, uncovered := replay(t, j, c.after)
			checkHeads(t, "Replay", heads(got), c.want)
			if uncovered.Empty() != c.uncovered.Empty() || (!uncovered.Empty() && uncovered != c.uncovered) {
				t.Errorf("uncovered %v, want %v", uncovered, c.uncovered)
			}
			for _, e := range got {
				if e.Kind != engine.JournalBatch {
					t.Errorf("Replay passed a marker of kind %d", e.Kind)
				}
			}
			nilUncovered, err := j.Replay(c.after, nil)
			if err != nil || nilUncovered.Empty() != uncovered.Empty() || (!uncovered.Empty() && nilUncovered != uncovered) {
				t.Errorf("Replay with fn nil = %v, %v; want %v, nil", nilUncovered, err, uncovered)
			}
		})
	}
	t.Run("Replay returns each batch's messages", func(t *testing.T) {
		got, _ := replay(t, j, head("a", 12))
		if len(got) != 3 {
			t.Fatalf("%d batches, want 3", len(got))
		}
		sameEntry(t, "batch 13..15", got[0], batch("a", 13, 15, msg("a", 13)), true)
	})
	t.Run("An error from fn stops Replay and is returned", func(t *testing.T) {
		stop := errors.New("stop")
		calls := 0
		_, err := j.Replay(engine.AuditHead{}, func(engine.JournalEntry) error {
			calls++
			return stop
		})
		if !errors.Is(err, stop) || calls != 1 {
			t.Errorf("Replay = %v after %d calls, want stop after 1", err, calls)
		}
	})
	t.Run("With fn nil, Replay computes uncovered without reading a segment", func(t *testing.T) {
		dir := t.TempDir()
		j := open(t, dir, journal.Options{})
		appendAll(t, j, batch("a", 11, 12, msg("a", 11)), batch("a", 13, 13))
		for _, s := range segments(t, dir) {
			if err := os.Remove(s); err != nil {
				t.Fatal(err)
			}
		}
		uncovered, err := j.Replay(head("a", 7), nil)
		if err != nil || uncovered != (engine.Span{From: 8, To: 10}) {
			t.Errorf("Replay(7, nil) = %v, %v; want 8..10, nil", uncovered, err)
		}
		if _, err := j.Replay(head("a", 7), func(engine.JournalEntry) error { return nil }); err == nil {
			t.Error("Replay with fn read segments that were removed without an error")
		}
	})
}

// TestASecondIncarnation replays a journal that holds a chain, a recovery,
// and the chain numbered again from where the store was found.
func TestASecondIncarnation(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, journal.Options{})
	for p := uint64(1); p <= 10; p++ {
		appendAll(t, j, batch("a", p, p, msg("a", p)))
	}
	appendAll(t, j, engine.JournalEntry{Kind: engine.JournalRecoveryStart, Head: head("a", 5), Lost: head("a", 10)})
	for p := uint64(6); p <= 12; p++ {
		appendAll(t, j, batch("b", p, p, msg("b", p)))
	}
	check := func(t *testing.T, j *journal.Journal) {
		t.Run("After a new head, Replay returns only the later new batches", func(t *testing.T) {
			got, uncovered := replay(t, j, head("b", 8))
			checkHeads(t, "Replay", heads(got), headsOf("b", 9, 12))
			if !uncovered.Empty() {
				t.Errorf("uncovered %v, want none", uncovered)
			}
		})
		t.Run("After an old head, Replay returns the old batches above it and every new one", func(t *testing.T) {
			got, uncovered := replay(t, j, head("a", 5))
			checkHeads(t, "Replay", heads(got), append(headsOf("a", 6, 10), headsOf("b", 6, 12)...))
			if !uncovered.Empty() {
				t.Errorf("uncovered %v, want none", uncovered)
			}
		})
		t.Run("After an unknown hash, Replay walks by position from the newest incarnation", func(t *testing.T) {
			got, _ := replay(t, j, head("x", 7))
			checkHeads(t, "Replay", heads(got), headsOf("b", 8, 12))
		})
		t.Run("Last is the newest incarnation's head", func(t *testing.T) {
			if last, _ := j.Last(); last.Head != head("b", 12) {
				t.Errorf("Last is %v, want b/12", last.Head)
			}
		})
	}
	check(t, j)
	t.Run("After a reopen", func(t *testing.T) { check(t, reopen(t, j, journal.Options{})) })
}

func TestTheRecoveringMarker(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, journal.Options{})
	start := engine.JournalEntry{Kind: engine.JournalRecoveryStart, Head: head("a", 3), Lost: head("a", 5), Time: time.Unix(1_900_000_000, 7)}
	appendAll(t, j, batch("a", 1, 5, msg("a", 1)))

	t.Run("Last returns no marker before a recovery", func(t *testing.T) {
		if _, recovering := j.Last(); recovering != nil {
			t.Errorf("recovering = %+v, want nil", recovering)
		}
	})
	appendAll(t, j, start, batch("b", 4, 4, msg("b", 4)))
	checkStarted := func(t *testing.T, j *journal.Journal) {
		t.Helper()
		last, recovering := j.Last()
		if recovering == nil {
			t.Fatal("recovering = nil, want the start marker")
		}
		sameEntry(t, "the marker", *recovering, start, false)
		if last.Head != head("b", 4) {
			t.Errorf("Last is %v, want the newest batch b/4, not the marker", last.Head)
		}
	}
	t.Run("After a start without a done, Last returns the start marker with its Head and Lost", func(t *testing.T) {
		checkStarted(t, j)
	})
	t.Run("Changing the returned marker does not change the journal's", func(t *testing.T) {
		_, recovering := j.Last()
		recovering.Lost = engine.AuditHead{}
		checkStarted(t, j)
	})
	j = reopen(t, j, journal.Options{})
	t.Run("The unfinished recovery survives a reopen", func(t *testing.T) {
		checkStarted(t, j)
	})
	appendAll(t, j, engine.JournalEntry{Kind: engine.JournalRecoveryDone, Head: head("b", 4)})
	t.Run("After the done marker, Last returns no marker", func(t *testing.T) {
		if _, recovering := j.Last(); recovering != nil {
			t.Errorf("recovering = %+v, want nil", recovering)
		}
	})
	j = reopen(t, j, journal.Options{})
	t.Run("The finished recovery survives a reopen", func(t *testing.T) {
		last, recovering := j.Last()
		if recovering != nil {
			t.Errorf("recovering = %+v, want nil", recovering)
		}
		if last.Head != head("b", 4) {
			t.Errorf("Last is %v, want b/4", last.Head)
		}
	})
}

func TestRetention(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 300)
	big := func(p uint64) engine.JournalEntry {
		return batch("a", p, p, engine.Message{Topic: "t", Payload: payload})
	}
	setup := func(t *testing.T) (*journal.Journal, *clock, journal.Options) {
		clk := newClock()
		o := journal.Options{Retention: time.Hour, SegmentBytes: 4096, Now: clk.Now}
		return open(t, t.TempDir(), o), clk, o
	}

	t.Run("Segments past the retention are deleted and Replay reports their positions uncovered", func(t *testing.T) {
		j, clk, o := setup(t)
		for p := uint64(1); p <= 60; p++ {
			appendAll(t, j, big(p))
		}
		before := len(segments(t, j.Dir()))
		if before < 4 {
			t.Fatalf("%d segments after 60 batches of 300 bytes, want the journal rolled at 4096 bytes", before)
		}
		if got, uncovered := replay(t, j, head("a", 1)); len(got) != 59 || !uncovered.Empty() {
			t.Fatalf("before the retention passed: Replay(1) = %d batches, uncovered %v; want 59, none", len(got), uncovered)
		}

		clk.Advance(61 * time.Minute)
		appendAll(t, j, big(61))
		after := segments(t, j.Dir())
		if len(after) >= before {
			t.Fatalf("%d segments after the retention passed, want fewer than %d", len(after), before)
		}
		if st := j.Stats(); st.Segments != len(after) {
			t.Errorf("Stats.Segments = %d, but %d files", st.Segments, len(after))
		}
		check := func(t *testing.T, j *journal.Journal) {
			got, uncovered := replay(t, j, head("a", 1))
			if len(got) == 0 || uncovered.Empty() {
				t.Fatalf("Replay(1) = %d batches, uncovered %v; want a trimmed journal", len(got), uncovered)
			}
			if uncovered.From != 2 || uncovered.To+1 != got[0].First {
				t.Errorf("uncovered %v, want 2..%d: up to the first batch held", uncovered, got[0].First-1)
			}
			checkHeads(t, "Replay after the trim", heads(got), headsOf("a", got[0].First, 61))
			if last, _ := j.Last(); last.Head != head("a", 61) {
				t.Errorf("Last is %v, want 61", last.Head)
			}
		}
		check(t, j)
		t.Run("After a reopen", func(t *testing.T) { check(t, reopen(t, j, o)) })
	})

	t.Run("A segment is closed once it spans a quarter of the retention", func(t *testing.T) {
		j, clk, _ := setup(t)
		appendAll(t, j, big(1))
		clk.Advance(15 * time.Minute)
		appendAll(t, j, big(2))
		if n := len(segments(t, j.Dir())); n != 2 {
			t.Errorf("%d segments, want 2: the first closed after 15 minutes", n)
		}
	})

	t.Run("The newest batch is kept when only markers follow it", func(t *testing.T) {
		j, clk, o := setup(t)
		for p := uint64(1); p <= 3; p++ {
			appendAll(t, j, big(p))
		}
		// Each done marker closes a segment while no recovery is pending:
		// a trim could then take the oldest, which holds the newest batch.
		for range 10 {
			appendAll(t, j, engine.JournalEntry{Kind: engine.JournalRecoveryStart, Head: head("a", 3), Lost: head("a", 3)})
			clk.Advance(20 * time.Minute)
			appendAll(t, j, engine.JournalEntry{Kind: engine.JournalRecoveryDone, Head: head("a", 3)})
		}
		if n := len(segments(t, j.Dir())); n < 5 {
			t.Fatalf("%d segments, want the markers to have rolled several", n)
		}
		j = reopen(t, j, o)
		if last, _ := j.Last(); last.Head != head("a", 3) {
			t.Errorf("after a reopen Last is %v, want the newest batch at 3", last.Head)
		}
		got, _ := replay(t, j, head("a", 2))
		checkHeads(t, "Replay(2)", heads(got), []engine.AuditHead{head("a", 3)})
	})

	t.Run("No segment is deleted while a recovery is unfinished: it reads batches from before its start", func(t *testing.T) {
		j, clk, o := setup(t)
		for p := uint64(1); p <= 20; p++ {
			appendAll(t, j, big(p))
		}
		segs := segments(t, j.Dir())
		marked := segs[len(segs)-1]
		start := engine.JournalEntry{Kind: engine.JournalRecoveryStart, Head: head("a", 12), Lost: head("a", 20)}
		appendAll(t, j, start)
		for p := uint64(21); p <= 60; p++ {
			appendAll(t, j, big(p))
		}
		clk.Advance(2 * time.Hour)
		appendAll(t, j, big(61))
		clk.Advance(2 * time.Hour)
		appendAll(t, j, big(62))

		after := segments(t, j.Dir())
		if !slices.Contains(after, marked) {
			t.Errorf("the segment %s with the unfinished recovery's start was deleted", filepath.Base(marked))
		}
		if after[0] != segs[0] {
			t.Errorf("the oldest segment is %s, want %s: the lost batches before the marker are still to be decided again", filepath.Base(after[0]), filepath.Base(segs[0]))
		}
		j = reopen(t, j, o)
		if _, recovering := j.Last(); recovering == nil || recovering.Head != start.Head || recovering.Lost != start.Lost {
			t.Errorf("after a reopen recovering = %+v, want the start marker", recovering)
		}
		got, _ := replay(t, j, start.Head)
		checkHeads(t, "Replay from the marker's head", heads(got), headsOf("a", 13, 62))

		appendAll(t, j, engine.JournalEntry{Kind: engine.JournalRecoveryDone, Head: head("a", 62)})
		clk.Advance(2 * time.Hour)
		appendAll(t, j, big(63))
		if slices.Contains(segments(t, j.Dir()), marked) {
			t.Errorf("the segment %s is kept after the recovery finished and the retention passed", filepath.Base(marked))
		}
	})
}

func TestAppend(t *testing.T) {
	t.Run("A segment that cannot be begun never fails an append: the full one takes it", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "j")
		j := open(t, dir, journal.Options{SegmentBytes: 64})
		appendAll(t, j, batch("a", 1, 1))
		if err := os.RemoveAll(dir); err != nil { // no new segment file can be made there now
			t.Fatal(err)
		}
		for p := uint64(2); p <= 5; p++ {
			if err := j.Append(batch("a", p, p)); err != nil {
				t.Fatalf("Append(%d) with no room for a new segment = %v, want nil", p, err)
			}
		}
		if last, _ := j.Last(); last.Head != head("a", 5) {
			t.Errorf("Last = %v, want the batch at 5", last.Head)
		}
	})
	t.Run("Append after Close returns ErrClosed", func(t *testing.T) {
		j := open(t, t.TempDir(), journal.Options{})
		appendAll(t, j, batch("a", 1, 1))
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if err := j.Append(batch("a", 2, 2)); !errors.Is(err, engine.ErrClosed) {
			t.Errorf("Append after Close = %v, want ErrClosed", err)
		}
		if err := j.Close(); err != nil {
			t.Errorf("a second Close = %v, want nil", err)
		}
	})
	t.Run("Append refuses an entry that would not read back", func(t *testing.T) {
		j := open(t, t.TempDir(), journal.Options{})
		for _, e := range []engine.JournalEntry{
			{Head: head("a", 1), First: 1},
			{Kind: engine.JournalRecoveryDone + 1, Head: head("a", 1), First: 1},
			{Kind: engine.JournalBatch, Head: head("a", 1)},
			{Kind: engine.JournalBatch, Head: head("a", 1), First: 2},
		} {
			if err := j.Append(e); err == nil {
				t.Errorf("Append(kind %d, first %d, head %d) = nil, want an error", e.Kind, e.First, e.Head.Position)
			}
		}
		appendAll(t, j, batch("a", 1, 1))
		j = reopen(t, j, journal.Options{})
		if got, _ := replay(t, j, engine.AuditHead{}); len(got) != 1 {
			t.Errorf("Replay = %d batches, want the one valid", len(got))
		}
	})
	t.Run("Concurrent appends are serialised", func(t *testing.T) {
		j := open(t, t.TempDir(), journal.Options{SegmentBytes: 1024})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 10 {
					p := uint64(w*10 + i + 1)
					if err := j.Append(batch(fmt.Sprint(w), p, p, msg("a", p))); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		j = reopen(t, j, journal.Options{SegmentBytes: 1024})
		got, _ := replay(t, j, engine.AuditHead{})
		if len(got) != 40 {
			t.Errorf("Replay = %d batches, want 40", len(got))
		}
		for _, e := range got {
			if len(e.Messages) != 1 || !bytes.Equal(e.Messages[0].Payload, msg("a", e.First).Payload) {
				t.Errorf("batch %d holds %v", e.First, e.Messages)
			}
		}
	})
}

func TestDir(t *testing.T) {
	root := filepath.Join("var", "lib", "journal")
	members := []string{"replayguard-1", "site/a/member", "../escape", "..", ".", "", "a%2Fb", `back\slash`}
	seen := map[string]string{}
	for _, m := range members {
		t.Run(fmt.Sprintf("Member %q has one directory of its own under root", m), func(t *testing.T) {
			d := journal.Dir(root, m)
			if filepath.Dir(d) != root {
				t.Errorf("Dir(%q) = %s, not a child of %s", m, d, root)
			}
			if base := filepath.Base(d); base == "." || base == ".." || strings.ContainsRune(base, '/') {
				t.Errorf("Dir(%q) = %s", m, d)
			}
			if other, ok := seen[d]; ok {
				t.Errorf("Dir(%q) = Dir(%q) = %s", m, other, d)
			}
			seen[d] = m
		})
	}
	t.Run("Two members with a slash share a root without sharing a journal", func(t *testing.T) {
		root := t.TempDir()
		a := open(t, journal.Dir(root, "site/a"), journal.Options{})
		b := open(t, journal.Dir(root, "site/b"), journal.Options{})
		appendAll(t, a, batch("a", 1, 1))
		appendAll(t, b, batch("b", 1, 2))
		des, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		if len(des) != 2 {
			t.Errorf("root holds %d entries, want one directory per member", len(des))
		}
		if last, _ := a.Last(); last.Head != head("a", 1) {
			t.Errorf("a's Last = %v", last.Head)
		}
	})
}

// BenchmarkAppend appends batches of ~200-byte deliveries, each synced:
// 100 a batch, and about the ~990 that `replayguard bench` commits at once.
func BenchmarkAppend(b *testing.B) {
	for _, perBatch := range []int{100, 990} {
		b.Run(fmt.Sprintf("batch=%d", perBatch), func(b *testing.B) { benchAppend(b, perBatch) })
	}
}

func benchAppend(b *testing.B, perBatch int) {
	j := open(b, b.TempDir(), journal.Options{})
	msgs := make([]engine.Message, perBatch)
	for i := range msgs {
		msgs[i] = engine.Message{Topic: "plant/m3/energy", Broker: "tcp://broker:1883",
			Payload: fmt.Appendf(nil, `{"msgId":"meter-3-%06d","kwh":0.25,"note":"%s"}`, i, strings.Repeat("x", 150))}
	}
	b.SetBytes(int64(perBatch * len(msgs[0].Payload)))
	var pos uint64
	for b.Loop() {
		pos += uint64(perBatch)
		if err := j.Append(batch("a", pos-uint64(perBatch)+1, pos, msgs...)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(perBatch*b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func TestReadOnly(t *testing.T) {
	ro := journal.Options{ReadOnly: true}
	t.Run("A read-only open of a missing journal fails with ErrNotExist and creates nothing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "none")
		if _, err := journal.Open(dir, ro); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open = %v, want ErrNotExist", err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the directory exists after a read-only open: %v", err)
		}
	})
	t.Run("A read-only open leaves a torn tail in place and out of what it reads", func(t *testing.T) {
		dir := t.TempDir()
		j := open(t, dir, journal.Options{})
		appendAll(t, j, batch("a", 1, 1, msg("a", 1)), batch("a", 2, 2, msg("a", 2)))
		j.Close()
		seg := segments(t, dir)[0]
		truncate(t, seg, size(t, seg)-1)
		torn := size(t, seg)

		r := open(t, dir, ro)
		if last, _ := r.Last(); last.Head != head("a", 1) {
			t.Errorf("Last is at %d, want 1", last.Head.Position)
		}
		got, _ := replay(t, r, engine.AuditHead{})
		checkHeads(t, "Replay", heads(got), []engine.AuditHead{head("a", 1)})
		if err := r.Append(batch("a", 2, 2)); !errors.Is(err, engine.ErrClosed) {
			t.Errorf("Append = %v, want ErrClosed", err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if got := size(t, seg); got != torn {
			t.Errorf("the segment is %d bytes, want %d: a read-only open cut it", got, torn)
		}
	})
}
