package engine

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
)

// A differential test of the source windows against every sequence each
// epoch applied: across epochs (new, kept, between two kept, dropped),
// keep_epochs and sequence_span changes, operator releases, row round
// trips and a batch's copy sharing bitmaps with the window, the windows
// never call a sequence a duplicate that was not applied in its epoch,
// never apply one twice (but for a release, which the key window guards),
// and a batch's copy never changes after it was taken.
func TestWindowsNeverMisdecideAcrossEpochs(t *testing.T) {
	seed, rng := seeded(t)
	keptBitmaps, olderBitmapDecisions, aboveHigh := 0, 0, 0
	defer func() {
		t.Logf("older epochs with a bitmap: %d epoch-steps, %d decisions, %d above their highest", keptBitmaps, olderBitmapDecisions, aboveHigh)
	}()
	for round := range 200 {
		var src SourceState
		seen := map[int64]map[int64]bool{}
		released := map[int64]map[int64]bool{}
		opened := map[int64]bool{}
		next := map[int64]int64{}
		cur := int64(1 + rng.IntN(3))
		spans := []int{64, 128, 256}
		span := spans[rng.IntN(len(spans))]
		keep := 1 + rng.IntN(3)
		drops := []int{0, 5, 40, 66}[rng.IntN(4)]
		type copyCheck struct {
			c   SourceState
			row []byte
		}
		var copies []copyCheck
		var log []string
		for step := range 600 + rng.IntN(600) {
			if rng.IntN(200) == 0 {
				span = spans[rng.IntN(len(spans))]
			}
			if rng.IntN(300) == 0 {
				keep = 1 + rng.IntN(3)
			}
			e := cur
			switch r := rng.IntN(1000); {
			case r < 8:
				cur += 1 + int64(rng.IntN(3))
				e = cur
			case r < 450:
				e = cur - int64(rng.IntN(5))
			}
			if e < 0 {
				e = cur
			}
			if seen[e] == nil {
				seen[e] = map[int64]bool{}
			}
			n := next[e]
			var seq int64
			switch r := rng.IntN(100); {
			case r < drops/2:
				n += 1 + int64(rng.IntN(3))
				seq = n
			case r < drops/2+2:
				n += int64(span) + int64(rng.IntN(3*span))
				seq = n
			case r < drops/2+30 && n > 0:
				seq = max(0, n-int64(rng.IntN(2*span)))
			default:
				seq = n
			}
			next[e] = max(n, seq) + 1
			waive := rng.IntN(50) == 0
			d := &Delivery{epoch: strconv.FormatInt(e, 10), epochNum: true, epochInt: e, seq: seq}
			if len(src.Epochs) > 0 && src.Epochs[0].Numeric && e < src.Epochs[0].Value && src.find(d.epoch, true) < 0 {
				d.older = rng.IntN(2) == 0 && !opened[e] // a kind says so only of an epoch that never had a window
			}
			if j := src.find(d.epoch, true); j > 0 && src.Epochs[j].Bitmap != nil {
				olderBitmapDecisions++
				if seq > src.Epochs[j].High {
					aboveHigh++
				}
			}
			v := src.checkSequence(d, span, keep, waive)
			log = append(log, fmt.Sprintf("%d: e%d s%d span%d keep%d waive%v older%v -> %v %q", step, e, seq, span, keep, waive, d.older, v.outcome, v.reason))
			fail := func(f string, a ...any) {
				t.Helper()
				from := 0
				t.Fatalf("seed %d round %d: %s\n%s", seed, round, fmt.Sprintf(f, a...), joinLines(log[from:]))
			}
			switch {
			case v.outcome == Duplicate && !seen[e][seq]:
				fail("epoch %d seq %d never applied, decided duplicate", e, seq)
			case v.outcome.Effective() && seen[e][seq] && v.reason != reasonReleased && !released[e][seq]:
				fail("epoch %d seq %d applied twice (%v %q)", e, seq, v.outcome, v.reason)
			}
			if v.outcome.Effective() {
				seen[e][seq] = true
				if v.reason == reasonReleased { // the key window guards it from now on
					if released[e] == nil {
						released[e] = map[int64]bool{}
					}
					released[e][seq] = true
				}
			}
			for _, w := range src.Epochs {
				opened[w.Value] = true
			}
			for i := 1; i < len(src.Epochs); i++ {
				if src.Epochs[i].Bitmap != nil {
					keptBitmaps++
				}
			}
			for _, c := range copies {
				row, err := c.c.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(row, c.row) {
					fail("a batch's copy changed after it was taken")
				}
			}
			switch rng.IntN(20) {
			case 0:
				back, _ := roundTrip(t, &src)
				src = back
			case 1:
				c := src.clone()
				row, err := c.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				copies = append(copies[max(0, len(copies)-3):], copyCheck{c, row})
			}
			for i := range src.Epochs {
				w := &src.Epochs[i]
				sn, rel := seen[w.Value], released[w.Value]
				if why := windowExact(w, i, span, sn, rel); why != "" {
					fail("epoch %d (index %d, high %d, floor %d, first %d, bitmap %d words, gaps %v): %s", w.Value, i, w.High, w.Floor, w.First, len(w.Bitmap), w.Gaps, why)
				}
			}
			// Reports never claim a seen sequence open.
			for _, w := range src.Epochs {
				for _, g := range w.OpenGaps() {
					for s := g.From; s <= g.To && s < g.From+10000; s++ {
						if seen[w.Value][s] && !released[w.Value][s] {
							fail("epoch %d reports seq %d open, yet it was applied", w.Value, s)
						}
					}
				}
			}
		}
	}
	if keptBitmaps == 0 {
		t.Fatal("no older epoch kept its bitmap")
	}
}

func joinLines(l []string) string {
	var b bytes.Buffer
	for _, s := range l {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String()
}

// windowExact checks that a window knows exactly which sequences it saw
// where it claims to: a bitmap's window, a run's, an older epoch's (Floor, High].
func windowExact(w *EpochWindow, i, span int, seen, rel map[int64]bool) string {
	if w.High < 0 {
		return ""
	}
	sp := int64(w.span(span))
	lo, hi := w.High-sp+1, w.High
	switch {
	case w.Bitmap != nil:
	case i == 0:
		lo = max(lo, w.Floor+1)
	default:
		lo = w.Floor + 1
	}
	for s := max(lo, 0); s <= hi; s++ {
		if rel[s] {
			continue
		}
		var has bool
		switch {
		case w.Bitmap != nil:
			word, mask := w.bit(s, int(sp))
			has = w.Bitmap[word]&mask != 0
		case i == 0:
			has = s >= w.First
		default:
			has = !w.listed(s)
		}
		if has != seen[s] {
			return fmt.Sprintf("seq %d: window says seen=%v, it was %v", s, has, seen[s])
		}
	}
	return ""
}
