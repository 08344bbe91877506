package engine

import (
	"fmt"
	"math"
	"testing"
)

// checkSeq decides seq of epoch 1 against src at span.
func checkSeq(src *SourceState, seq int64, span int, waive bool) seqVerdict {
	return src.checkSequence(&Delivery{epoch: "1", epochNum: true, epochInt: 1, seq: seq}, span, 1, waive)
}

// A run that held a bitmap of 64 keeps that bitmap's reach when
// sequence_span is widened: a never-seen sequence above its Floor but
// below the bitmap it takes again is below the window, not read off the
// bit of a sequence 64 higher.
func TestARunKeepsTheReachOfItsLastBitmapUnderAWiderSpan(t *testing.T) {
	var src SourceState
	for _, seq := range []int64{1000, 1002, 1001} { // a bitmap at span 64
		checkSeq(&src, seq, 64, false)
	}
	for seq := int64(1003); seq <= 1087; seq++ {
		checkSeq(&src, seq, 64, false)
	}
	if w := src.Epochs[0]; w.Bitmap != nil || w.First != 1000 || w.Floor != 959 {
		t.Fatalf("want a run from 1000 above 959: bitmap %x, first %d, floor %d", w.Bitmap, w.First, w.Floor)
	}
	for seq := int64(1088); seq <= 1094; seq++ { // sequence_span is 4096 now
		if v := checkSeq(&src, seq, 4096, false); v.outcome != Applied {
			t.Fatalf("seq %d: %v", seq, v.outcome)
		}
	}
	for seq := int64(960); seq <= 966; seq++ { // never seen; bit seq%128 is seq+128's, seen
		if v := checkSeq(&src, seq, 4096, false); v.outcome != Quarantined || v.reason != reasonBelowWindow {
			t.Errorf("seq %d: %v (%s), want quarantined below the window", seq, v.outcome, v.reason)
		}
	}
	if v := checkSeq(&src, 960, 4096, true); v.outcome != Applied || v.reason != reasonReleased {
		t.Errorf("seq 960 released: %v (%s)", v.outcome, v.reason)
	}
	if v := checkSeq(&src, 1060, 4096, false); v.outcome != Duplicate {
		t.Errorf("seq 1060, seen: %v", v.outcome)
	}
}

// A run holds no bitmap of the span it was opened with: it reads at the
// sequence_span configured now, and a narrower one puts below its window
// at once what the old span would have reached (docs/configuration.md).
func TestARunReadsAtTheSpanConfiguredNow(t *testing.T) {
	var src SourceState
	for seq := int64(0); seq <= 200; seq++ {
		checkSeq(&src, seq, 128, false)
	}
	if src.Epochs[0].Bitmap != nil {
		t.Fatal("want a run")
	}
	for seq, want := range map[int64]Outcome{100: Quarantined, 136: Quarantined, 137: Duplicate, 200: Duplicate} {
		if v := checkSeq(&src, seq, 64, false); v.outcome != want {
			t.Errorf("seq %d of a run 0…200 read at span 64: %v, want %v", seq, v.outcome, want)
		}
	}
}

// Random feeds of one source with sequence_span changed at restarts (each
// a row round trip), new epochs, operators' releases and batch copies: a
// duplicate was seen, and an applied sequence was not unless released;
// the current window's open gaps hold no seen sequence and every unseen
// one inside its window from First up; a batch's copy does not change with
// the window.
func TestWindowsStaySafeThroughSpanChangesAndRestarts(t *testing.T) {
	seed, rng := seeded(t)
	spans := []int{64, 128, 192, 256, 640}
	for round := range 1500 {
		span := spans[rng.IntN(len(spans))]
		var src SourceState
		seen := map[int64]map[int64]bool{}
		high := map[int64]int64{}
		epoch, next := int64(1), int64(rng.IntN(3000))
		inOrder := 60 + rng.IntN(40)
		jump := inOrder + rng.IntN(3)
		late := jump + (100-jump)*rng.IntN(4)/4
		gapEvery := 5 + rng.IntN(200)
		var log []string
		fail := func(format string, a ...any) {
			t.Helper()
			t.Fatalf("seed %d round %d: %s\n%v", seed, round, fmt.Sprintf(format, a...), log[max(0, len(log)-25):])
		}
		for range 600 {
			switch r := rng.IntN(1000); {
			case r < 30: // a restart with another span
				span = spans[rng.IntN(len(spans))]
				src, _ = roundTrip(t, &src)
				log = append(log, fmt.Sprintf("restart at span %d", span))
				continue
			case r < 36:
				epoch++
				next = int64(rng.IntN(3000))
				log = append(log, fmt.Sprintf("epoch %d", epoch))
			}
			seq, ep := int64(0), epoch
			switch r := rng.IntN(100); {
			case r < inOrder:
				seq = next
				if next++; rng.IntN(gapEvery) == 0 {
					next += int64(rng.IntN(3))
				}
			case r < jump:
				seq = next + int64(rng.IntN(700))
				next = seq + 1
			case r < late:
				seq = max(0, next-1-int64(rng.IntN(2*span)))
			case r < late+3 && len(src.Epochs) > 0: // at the window's edges
				w := src.Epochs[0]
				edges := []int64{w.Floor, w.Floor + 1, w.First - 1, w.First - 2, w.First, w.High - int64(span), w.High - int64(span) + 1, w.High, w.High + 1}
				seq = max(0, edges[rng.IntN(len(edges))]+int64(rng.IntN(5))-2)
			default: // a replay, of this epoch or an older one
				if epoch > 1 {
					ep = epoch - 1 - int64(rng.IntN(int(min(epoch-1, 2))))
				}
				seq = max(0, high[ep]-int64(rng.IntN(900))+int64(rng.IntN(5)))
			}
			var batchCopy SourceState
			var copied []byte
			if rng.IntN(10) == 0 {
				batchCopy = src.clone()
				copied, _ = batchCopy.MarshalBinary()
			}
			waive := rng.IntN(30) == 0
			v := src.checkSequence(&Delivery{epoch: fmt.Sprint(ep), epochNum: true, epochInt: ep, seq: seq}, span, 2, waive)
			log = append(log, fmt.Sprintf("epoch %d seq %d released %t: %v", ep, seq, waive, v.outcome))
			if seen[ep] == nil {
				seen[ep] = map[int64]bool{}
			}
			switch v.outcome {
			case Duplicate:
				if !seen[ep][seq] {
					fail("epoch %d seq %d never seen, decided duplicate", ep, seq)
				}
			case Applied, AppliedLate:
				if seen[ep][seq] && v.reason != reasonReleased {
					fail("epoch %d seq %d seen, decided %v", ep, seq, v.outcome)
				}
				seen[ep][seq] = true
				high[ep] = max(high[ep], seq)
			}
			cur := &src.Epochs[0]
			gaps := cur.OpenGaps()
			inGaps := func(q int64) bool {
				for _, g := range gaps {
					if q >= g.From && q <= g.To {
						return true
					}
				}
				return false
			}
			for _, g := range gaps {
				for q := g.From; q <= g.To && q < g.From+5000; q++ {
					if seen[cur.Value][q] {
						fail("epoch %d open gap %v holds %d, seen", cur.Value, g, q)
					}
				}
			}
			for q := max(cur.First, cur.High-int64(cur.span(span))+1, cur.Floor+1, 0); q <= cur.High; q++ {
				if !seen[cur.Value][q] && !inGaps(q) {
					fail("epoch %d seq %d unseen (first %d, high %d, floor %d) and not in the open gaps %v", cur.Value, q, cur.First, cur.High, cur.Floor, gaps)
				}
			}
			if copied != nil {
				if row, _ := batchCopy.MarshalBinary(); string(row) != string(copied) {
					fail("a batch's copy changed with the window")
				}
			}
		}
	}
}

// Windows a row can hold (a high-water mark of -1 or more, anything in
// the other fields) are decided on, released, retired and reported
// without a panic.
func TestAnyDecodedWindowIsDecidedWithoutAPanic(t *testing.T) {
	seed, rng := seeded(t)
	vals := []int64{-2, -1, 0, 1, 2, 63, 64, 65, 100, 4095, 4096, math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 64, math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 64}
	pick := func() int64 {
		if rng.IntN(4) == 0 {
			return rng.Int64() >> rng.IntN(64) * int64(1-2*rng.IntN(2))
		}
		return vals[rng.IntN(len(vals))]
	}
	for round := range 100000 {
		w := EpochWindow{Epoch: "1", Numeric: true, Value: 1, High: max(pick(), -1), First: pick(), Floor: pick()}
		if n := rng.IntN(4); n > 0 {
			w.Bitmap = make([]uint64, n)
			for i := range w.Bitmap {
				w.Bitmap[i] = []uint64{0, math.MaxUint64, rng.Uint64()}[rng.IntN(3)]
			}
		}
		for range rng.IntN(3) {
			w.Gaps = append(w.Gaps, Range{From: pick(), To: pick()})
		}
		row, _ := (&SourceState{Route: "r", Epochs: []EpochWindow{w}}).MarshalBinary()
		var src SourceState
		if err := src.UnmarshalBinary(row); err != nil {
			t.Fatalf("seed %d round %d: window %+v: %v", seed, round, w, err)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("seed %d round %d: window %+v: %v", seed, round, w, r)
				}
			}()
			span := []int{64, 128, 192}[rng.IntN(3)]
			src.Epochs[0].OpenGaps()
			for range 3 {
				ep := int64(1)
				if rng.IntN(4) == 0 {
					ep = int64(2 + rng.IntN(2))
				}
				src.checkSequence(&Delivery{epoch: fmt.Sprint(ep), epochNum: true, epochInt: ep, seq: max(0, pick())}, span, 2, rng.IntN(2) == 0)
				for i := range src.Epochs {
					src.Epochs[i].OpenGaps()
				}
			}
		}()
	}
}
