package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// seenModel is a current epoch's window with unbounded memory: every
// sequence it has seen.
type seenModel struct {
	span        int64
	high, first int64
	seen        map[int64]bool
}

func (m *seenModel) decide(seq int64) Outcome {
	switch {
	case m.high < 0 || seq > m.high:
		m.high = seq
	case seq <= m.high-m.span:
		return Quarantined
	case m.seen[seq]:
		return Duplicate
	default:
		m.first = min(m.first, seq)
		m.seen[seq] = true
		return AppliedLate
	}
	if len(m.seen) == 0 {
		m.first = seq
	}
	m.seen[seq] = true
	return Applied
}

// gaps are the never-seen sequences from the lowest seen to the highest.
func (m *seenModel) gaps() []Range {
	var out []Range
	for s := m.first; s <= m.high; s++ {
		if m.seen[s] {
			continue
		}
		if n := len(out); n > 0 && out[n-1].To == s-1 {
			out[n-1].To = s
		} else {
			out = append(out, Range{From: s, To: s})
		}
	}
	return out
}

// windowFeed is a producer's sequences as a broker delivers them: mostly
// in order, with drops, swaps, replayed bursts, jumps past the window and
// stragglers from below it. drops is the share of sequences dropped, in
// per cent.
func windowFeed(rng *rand.Rand, span int64, drops int) []int64 {
	next := int64(rng.IntN(3)) * span
	var out []int64
	for range 1 + rng.IntN(400) {
		switch r := rng.IntN(100); {
		case r < drops: // dropped
			next++
		case r < drops+1: // a jump past the window
			next += span + int64(rng.IntN(int(span)))
		}
		out = append(out, next)
		next++
		switch r := rng.IntN(100); {
		case r < 4 && len(out) > 1:
			i := len(out) - 1 - rng.IntN(min(8, len(out)-1))
			out[i], out[len(out)-1] = out[len(out)-1], out[i]
		case r < 6:
			from := max(0, len(out)-1-rng.IntN(int(2*span)))
			out = append(out, out[from:from+min(1+rng.IntN(10), len(out)-from)]...)
		case r < 7:
			out = append(out, max(0, next-int64(rng.IntN(int(3*span)))))
		}
	}
	return out
}

// roundTrip writes src as a store's row and reads it back, as a restart
// does; it returns the state read and the row.
func roundTrip(t *testing.T, src *SourceState) (SourceState, []byte) {
	t.Helper()
	row, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back SourceState
	if err := back.UnmarshalBinary(row); err != nil {
		t.Fatal(err)
	}
	return back, row
}

// seeded returns a random source and its seed, printed; REPLAYGUARD_SEED
// replays one.
func seeded(t *testing.T) (uint64, *rand.Rand) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("REPLAYGUARD_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set REPLAYGUARD_SEED to replay)", seed)
	return seed, rand.New(rand.NewPCG(seed, 3))
}

// A window that keeps its sequences as a run until one comes out of order,
// and becomes a run again when its gaps leave it, decides every sequence as
// a set of every sequence seen does; its open gaps are that set's, and
// retired, it decides as that set does below its high-water mark.
func TestARunDecidesAsEverySequenceSeen(t *testing.T) {
	seed, rng := seeded(t)
	runs, kept := 0, 0
	for round := range 300 {
		span := int64(64 << rng.IntN(3))
		m := &seenModel{span: span, high: -1, seen: map[int64]bool{}}
		var src SourceState
		drops := 3
		if round%3 == 0 { // more gaps than an older epoch lists: it keeps its bitmap
			drops = 40
		}
		for i, seq := range windowFeed(rng, span, drops) {
			d := &Delivery{epoch: "1", epochNum: true, epochInt: 1, seq: seq}
			got, want := src.checkSequence(d, int(span), 1, false).outcome, m.decide(seq)
			if got != want {
				t.Fatalf("seed %d round %d span %d, delivery %d (seq %d): %v, want %v", seed, round, span, i, seq, got, want)
			}
			if src.Epochs[0].Bitmap == nil {
				runs++
			}
		}
		w := &src.Epochs[0]
		got, want := w.OpenGaps(), m.gaps()
		// Below the window the list keeps the newest maxGaps; inside it, every one.
		if k := len(want) - len(got); k < 0 || !slices.Equal(got, want[k:]) || k > 0 && want[k-1].To > m.high-span {
			t.Fatalf("seed %d round %d span %d: open gaps %v, want %v", seed, round, span, got, want)
		}
		src.checkSequence(&Delivery{epoch: "2", epochNum: true, epochInt: 2, seq: 0}, int(span), 1, false)
		old := src.Epochs[1]
		if old.Bitmap != nil {
			kept++
		}
		for seq := max(0, m.high-2*span); seq <= m.high+1; seq++ {
			want := AppliedLate
			switch {
			case seq <= m.high-span:
				want = Quarantined
			case m.seen[seq]:
				want = Duplicate
			}
			o := old
			o.Gaps, o.Bitmap = slices.Clone(old.Gaps), slices.Clone(old.Bitmap)
			if got := o.checkOlder(seq, old.span(int(span)), false).outcome; got != want {
				t.Fatalf("seed %d round %d span %d, retired at %d, gaps %v: seq %d %v, want %v", seed, round, span, m.high, old.Gaps, seq, got, want)
			}
		}
	}
	if runs == 0 {
		t.Fatal("no window was a run after any delivery")
	}
	if kept == 0 {
		t.Fatal("no older epoch kept its bitmap")
	}
}

// A source that sends in order holds no bitmap: after its first message,
// after a message out of order once its gap has left the window, and in
// the row the stores keep.
func TestASourceThatSendsInOrderHoldsNoBitmap(t *testing.T) {
	var src SourceState
	feed := func(seqs ...int64) {
		for _, seq := range seqs {
			src.checkSequence(&Delivery{epoch: "1", epochNum: true, epochInt: 1, seq: seq}, 64, 1, false)
		}
	}
	w := func() *EpochWindow { return &src.Epochs[0] }
	feed(10, 11, 12)
	if w().Bitmap != nil {
		t.Fatalf("in order: bitmap %b", w().Bitmap)
	}
	feed(9, 8)
	if w().Bitmap != nil || w().First != 8 {
		t.Fatalf("late, each the one below the first: bitmap %b, first %d", w().Bitmap, w().First)
	}
	feed(14, 13)
	if w().Bitmap == nil {
		t.Fatal("a sequence out of order: no bitmap")
	}
	for seq := int64(15); seq < 64; seq++ {
		feed(seq)
	}
	if w().Bitmap != nil || w().Floor != -1 {
		t.Fatalf("its gap filled, a word complete: bitmap %b, floor %d, want a run", w().Bitmap, w().Floor)
	}
	feed(66) // 64 and 65 skipped
	for seq := int64(67); seq < 192; seq++ {
		feed(seq)
	}
	if w().Bitmap != nil || w().Floor != 127 {
		t.Fatalf("its gap left the window: bitmap %b, floor %d, want a run above 127", w().Bitmap, w().Floor)
	}
	if got := w().OpenGaps(); !slices.Equal(got, []Range{{From: 64, To: 65}}) {
		t.Fatalf("open gaps %v, want 64-65", got)
	}
	back, row := roundTrip(t, &src)
	if fmt.Sprint(back) != fmt.Sprint(src) || len(row) > 40 {
		t.Fatalf("the row (%d bytes) reads back as %+v, want %+v", len(row), back, src)
	}
}

// A run that held a bitmap keeps, in its Floor, where that bitmap's window
// ended: raised, sequence_span does not make a sequence that left the old
// window unseen a duplicate, and the bitmap the run takes again stays
// above it.
func TestARunKeepsItsFloorWhenSequenceSpanWidens(t *testing.T) {
	var src SourceState
	check := func(seq int64, span int) Outcome {
		return src.checkSequence(&Delivery{epoch: "1", epochNum: true, epochInt: 1, seq: seq}, span, 1, false).outcome
	}
	for seq := int64(0); seq < 192; seq++ {
		if seq != 50 {
			check(seq, 64)
		}
	}
	if w := src.Epochs[0]; w.Bitmap != nil || w.Floor != 63 { // a run since 127, 50 left behind
		t.Fatalf("at span 64: bitmap %b, floor %d, want a run above 63", w.Bitmap, w.Floor)
	}
	got := []Outcome{check(50, 4096), check(51, 4096), check(150, 4096), check(195, 4096), check(193, 4096), check(128, 4096)}
	want := []Outcome{Quarantined, Quarantined, Duplicate, Applied, AppliedLate, Duplicate}
	if !slices.Equal(got, want) {
		t.Fatalf("at span 4096: %v, want %v", got, want)
	}
	if n := len(src.Epochs[0].Bitmap); n != 2 { // 128 of the 132 above the floor
		t.Fatalf("the bitmap taken again has %d words, want 2 (above the floor)", n)
	}
}

// A run and its bitmap reach the last sequence there is, 2^63-1, without
// wrapping past it: a bitmap that becomes a run there, and a run there
// that takes a bitmap.
func TestARunReachesTheLastSequence(t *testing.T) {
	const top = math.MaxInt64
	for _, c := range []struct {
		name  string
		seqs  []int64
		want  string
		isRun bool
		gaps  []Range
	}{
		{"a gap filled in the last word", append(append([]int64{top - 40, top - 38}, span(top-37, top-2)...), top-39, top-1, top),
			"applied applied " + strings.Repeat("applied ", 36) + "applied_late applied applied ", true, nil},
		{"a late sequence below a run at the top", []int64{top - 3, top - 2, top - 1, top, top - 10, top - 10, top - 5},
			"applied applied applied applied applied_late duplicate applied_late ", false,
			[]Range{{From: top - 9, To: top - 6}, {From: top - 4, To: top - 4}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var src SourceState
			got := ""
			for _, seq := range c.seqs {
				got += src.checkSequence(&Delivery{epoch: "1", epochNum: true, epochInt: 1, seq: seq}, 64, 1, false).outcome.String() + " "
			}
			if got != c.want {
				t.Fatalf("%s, want %s", got, c.want)
			}
			w := src.Epochs[0]
			if (w.Bitmap == nil) != c.isRun || w.High != top {
				t.Fatalf("high %d, bitmap %b: a run %v, want %v", w.High, w.Bitmap, w.Bitmap == nil, c.isRun)
			}
			if got := w.OpenGaps(); !slices.Equal(got, c.gaps) {
				t.Fatalf("open gaps %v, want %v", got, c.gaps)
			}
		})
	}
}

// span returns the sequences from one to another.
func span(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// An epoch that retires with more gaps in its window than its list keeps
// (a source that rebooted while a member held a backlog of every third of
// its sequences) decides each of them as the current epoch did: late, not
// below the window; and its report lists every one.
func TestAnOlderEpochKeepsEveryGapOfItsWindow(t *testing.T) {
	const span = 1024
	var src SourceState
	check := func(epoch, seq int64) Outcome {
		e := strconv.FormatInt(epoch, 10)
		return src.checkSequence(&Delivery{epoch: e, epochNum: true, epochInt: epoch, seq: seq}, span, 1, false).outcome
	}
	var missing []int64
	for seq := int64(1); seq <= 1500; seq++ {
		if seq >= 577 && seq < 577+3*140 && seq%3 == 1 {
			missing = append(missing, seq)
			continue
		}
		check(1, seq)
	}
	if len(missing) != 140 {
		t.Fatalf("%d missing, want 140", len(missing))
	}
	check(2, 1) // the source rebooted
	back, row := roundTrip(t, &src)
	if row[0] != rowFormat4 {
		t.Fatalf("the row has format %d, want %d: its older epoch keeps a bitmap", row[0], rowFormat4)
	}
	src = back
	if got := sourceReport(&src).Older[0].Gaps; len(got) != 140 {
		t.Fatalf("the older epoch reports %d gaps, want 140", len(got))
	}
	if got := check(1, 1500-span); got != Quarantined {
		t.Fatalf("seq %d, at the window's bottom: %v, want quarantined", 1500-span, got)
	}
	if got := check(1, 1200); got != Duplicate {
		t.Fatalf("seq 1200, seen: %v, want duplicate", got)
	}
	for i, seq := range missing {
		if got := check(1, seq); got != AppliedLate {
			t.Fatalf("missing seq %d (%d of 140), after the reboot: %v, want applied_late", seq, i+1, got)
		}
		if got := check(1, seq); got != Duplicate {
			t.Fatalf("missing seq %d again: %v, want duplicate", seq, got)
		}
	}
	if got := check(1, 1502); got != AppliedLate {
		t.Fatalf("seq 1502, above the older epoch's highest: %v, want applied_late", got)
	}
	old := src.Epochs[1]
	if old.Bitmap != nil {
		t.Fatalf("its gaps filled but 1501, the older epoch keeps its bitmap")
	}
	if got := old.OpenGaps(); !slices.Equal(got, []Range{{From: 1501, To: 1501}}) {
		t.Fatalf("open gaps %v, want 1501", got)
	}
	if got := check(1, 1501); got != AppliedLate {
		t.Fatalf("seq 1501 after the list took the gaps back: %v, want applied_late", got)
	}
	if _, row := roundTrip(t, &src); row[0] != rowFormat3 {
		t.Fatalf("the row has format %d, want %d once no older epoch keeps a bitmap", row[0], rowFormat3)
	}
}
