package engine

import (
	"math"
	"slices"
	"strings"
)

// maxGaps bounds the open gaps kept per epoch below its window. Past it the
// oldest are dropped from the report; they are at least a window old by then
// and can no longer be filled without quarantine anyway. The current epoch's
// gaps inside its window are never listed: its bitmap holds them exactly
// (OpenGaps), however many members' interleaved deliveries leave open for
// a moment.
const maxGaps = 64

// maxSeen bounds the string epochs remembered per source.
const maxSeen = 32

// seqVerdict is what a source window says of a sequence.
type seqVerdict struct {
	outcome Outcome
	reason  string
	gap     *Range // sequences this message skipped
	epoch   *EpochWindow
}

// Reasons recorded in the audit trail.
const (
	reasonBelowWindow = "below_window"
	reasonOldEpoch    = "old_epoch"
	reasonSeqSeen     = "sequence already seen"
	reasonKeySeen     = "key already applied"
	reasonStateSeen   = "already applied, as its source's state records"
	reasonConflict    = "key already applied with different content"
	reasonNewEpoch    = "new epoch"
	reasonOlderEpoch  = "older epoch, decided after a newer one"
	reasonLate        = "late message fills a gap"
	reasonReleased    = "released from quarantine"
)

// checkSequence decides a sequence against the source's windows and, for an
// effective outcome, records it. waive lifts the below-window and
// old-epoch rules (an operator's release).
func (s *SourceState) checkSequence(d *Delivery, span, keep int, waive bool) (v seqVerdict) {
	i := s.find(d.epoch, d.epochNum)
	switch {
	case i >= 0:
	case s.isNewEpoch(d):
		s.openEpoch(d, span, keep)
		i = 0
		defer func() {
			if len(s.Epochs) > 1 && v.reason == "" {
				v.reason = reasonNewEpoch
			}
		}()
	case d.older && s.between(d, keep):
		i = s.openOlder(d, keep)
		defer func() { v.reason = reasonOlderEpoch }()
	case waive:
		return seqVerdict{outcome: Applied, reason: reasonReleased}
	default:
		return seqVerdict{outcome: Quarantined, reason: reasonOldEpoch}
	}
	w := &s.Epochs[i]
	if i == 0 {
		v = w.checkCurrent(d.seq, w.span(span), waive)
	} else {
		v = w.checkOlder(d.seq, w.span(span), waive)
	}
	v.epoch = w
	if v.outcome.Effective() && d.seq < w.First {
		w.First = d.seq
	}
	return v
}

// Kept returns the kept window of an integer epoch, nil when the source
// keeps none: a route kind places its deliveries with it.
func (s *SourceState) Kept(epoch string) *EpochWindow {
	if i := s.find(epoch, true); i >= 0 {
		return &s.Epochs[i]
	}
	return nil
}

func (s *SourceState) find(epoch string, numeric bool) int {
	for i := range s.Epochs {
		if s.Epochs[i].Epoch == epoch && s.Epochs[i].Numeric == numeric {
			return i
		}
	}
	return -1
}

// isNewEpoch reports whether an epoch with no kept window is newer than the
// current one: integers by value, strings by first appearance. Every window
// has a rank, Value, which orders its messages' `set` writes (Version): an
// integer epoch's is its value, a string epoch's one above the highest
// kept when it first appeared. So an integer epoch is new only above every
// kept window's rank, a string one's included: an integer after a string
// epoch may have been sent before it (a producer that changed how it names
// its boots, and back), and a window that took it as new would apply its
// messages with `set` writes older than the fields they meet, which would
// then stand. It is held as an old epoch instead, for a person. (Above
// every kept rank, not only the current one's: a build before this rule
// could leave a string epoch's rank above the current window's.)
func (s *SourceState) isNewEpoch(d *Delivery) bool {
	if len(s.Epochs) == 0 {
		return true
	}
	if d.epochNum {
		return d.epochInt > s.topRank()
	}
	return !slices.Contains(s.Seen, d.epoch)
}

// topRank is the highest rank (Value) of the kept windows; s has one.
func (s *SourceState) topRank() int64 {
	top := s.Epochs[0].Value
	for _, w := range s.Epochs[1:] {
		top = max(top, w.Value)
	}
	return top
}

// between reports whether d's integer epoch falls between two kept
// windows, older than the current one: it never had a window that left.
// Only the keep+1 windows kept now count: a store written with a larger
// window.keep_epochs may hold more, which the next epoch drops.
func (s *SourceState) between(d *Delivery, keep int) bool {
	n := min(len(s.Epochs), keep+1)
	return d.epochNum && n > 1 && s.Epochs[0].Numeric && d.epochInt < s.Epochs[0].Value &&
		s.Epochs[n-1].Numeric && d.epochInt > s.Epochs[n-1].Value
}

// openOlder opens the window of d's epoch, one between two kept windows,
// in its place among the older ones, and drops the oldest past keep. It
// returns the window's index.
func (s *SourceState) openOlder(d *Delivery, keep int) int {
	i := 1
	for s.Epochs[i].Value > d.epochInt {
		i++
	}
	w := EpochWindow{Epoch: strings.Clone(d.epoch), Numeric: true, Value: d.epochInt, High: -1, First: d.seq, Floor: -1}
	s.Epochs = slices.Insert(s.Epochs, i, w)
	if len(s.Epochs) > keep+1 {
		s.Epochs = s.Epochs[:keep+1]
	}
	return i
}

// openEpoch makes d's epoch current and retires the previous current one.
func (s *SourceState) openEpoch(d *Delivery, span, keep int) {
	epoch := strings.Clone(d.epoch) // not a substring of the payload: it would keep the message alive
	// A run, until a sequence comes out of order.
	w := EpochWindow{Epoch: epoch, Numeric: d.epochNum, High: -1, First: d.seq, Floor: -1}
	switch {
	case d.epochNum:
		w.Value = d.epochInt
	case len(s.Epochs) > 0:
		w.Value = s.topRank()
		if w.Value < math.MaxInt64 {
			w.Value++
		}
	}
	if !d.epochNum {
		s.Seen = append(s.Seen, epoch)
		if len(s.Seen) > maxSeen {
			s.Seen = s.Seen[len(s.Seen)-maxSeen:]
		}
	}
	if len(s.Epochs) > 0 {
		s.Epochs[0].retire(s.Epochs[0].span(span))
	}
	s.Epochs = append([]EpochWindow{w}, s.Epochs...)
	if len(s.Epochs) > keep+1 {
		s.Epochs = s.Epochs[:keep+1]
	}
}

// span is the span of the current epoch's window: the one it was opened
// with, which its bitmap holds, whatever sequence_span says now. A change
// of sequence_span applies to the windows opened after it (a new source, a
// new epoch): a sequence seen at the old span cannot be placed in a bitmap
// of another, and a window read as wider than it was would take the
// sequences below its old reach for never seen. configured is the span of
// a run, which holds no bitmap: it reads the same at any span, as far down
// as its Floor.
func (w *EpochWindow) span(configured int) int {
	if n := 64 * len(w.Bitmap); n > 0 {
		return n
	}
	return configured
}

// Span is the span the window is checked at: its bitmap's, or configured
// (window.sequence_span) for a run, which holds none.
func (w *EpochWindow) Span(configured int) int { return w.span(configured) }

// A current window without a bitmap is a run: inside the window, above
// Floor, it has seen every sequence from First to High and none below
// First. A source that sends in order keeps its window so, in a few
// words: a fleet of a million meters would otherwise hold a million
// sequence_span bitmaps of all-ones words. The first sequence out of order
// gives it a bitmap (bitmap); a bitmap with no open gap left in its window
// becomes a run again (compact). Floor is -1 for a run that never held a
// bitmap; for one that did, it is where that bitmap's window ended, so that
// a wider sequence_span does not take a sequence that left it unseen for a
// duplicate.

// bitmap gives a run the bitmap it stands for, at the configured span or,
// where its Floor is nearer, the widest span above it, and returns that
// span.
func (w *EpochWindow) bitmap(span int) int {
	if w.Floor >= 0 { // at least a word: only a corrupt row has a run's Floor nearer its High
		span = int(min(int64(span), max(64, (w.High-w.Floor)/64*64)))
	}
	w.Bitmap, w.lent = make([]uint64, span/64), false
	lo := max(w.First, w.High-int64(span)+1, 0)
	for off := int64(0); off <= w.High-lo; { // by offset: High may be 2^63-1
		word, mask := w.bit(lo+off, span)
		if mask == 1 && w.High-lo-off >= 63 { // a whole word of the run
			w.Bitmap[word] = ^uint64(0)
			off += 64
			continue
		}
		w.Bitmap[word] |= mask
		off++
	}
	return span
}

// compact makes a window whose bitmap has no open gap from First up a run
// again, with Floor where the bitmap's window ends.
func (w *EpochWindow) compact(span int) {
	bottom := w.High - int64(span) + 1
	if n := len(w.Gaps); n > 0 && w.Gaps[n-1].To >= bottom { // listed inside the window (an older store's)
		return
	}
	lo := max(w.First, bottom, 0)
	for off := int64(0); off <= w.High-lo; { // by offset: High may be 2^63-1
		word, mask := w.bit(lo+off, span)
		if mask == 1 && w.High-lo-off >= 63 {
			if w.Bitmap[word] != ^uint64(0) {
				return
			}
			off += 64
			continue
		}
		if w.Bitmap[word]&mask == 0 {
			return
		}
		off++
	}
	w.Floor = max(bottom-1, -1)
	w.Bitmap, w.lent = nil, false
}

// own gives the window a bitmap of its own before it changes one a
// batch's copy shares.
func (w *EpochWindow) own() {
	if w.lent {
		w.Bitmap = slices.Clone(w.Bitmap)
		w.lent = false
	}
}

func (w *EpochWindow) bit(seq int64, span int) (word int, mask uint64) {
	b := int(seq % int64(span))
	return b / 64, 1 << (b % 64)
}

func (w *EpochWindow) checkCurrent(seq int64, span int, waive bool) seqVerdict {
	switch {
	case seq > w.High:
		v := seqVerdict{outcome: Applied}
		if w.High >= 0 && seq > w.High+1 {
			v.gap = &Range{From: w.High + 1, To: seq - 1} // the bitmap keeps it while it is in the window
		}
		w.advance(seq, span)
		return v
	case seq <= w.High-int64(span), w.Bitmap == nil && seq <= w.Floor:
		return w.belowWindow(seq, span, waive)
	}
	if w.Bitmap == nil {
		switch {
		case seq >= w.First:
			return seqVerdict{outcome: Duplicate, reason: reasonSeqSeen}
		case seq == w.First-1: // still a run, from seq
			w.fillGap(seq)
			return seqVerdict{outcome: AppliedLate, reason: reasonLate}
		}
		// A Floor nearer than sequence_span makes the bitmap narrower
		// than the window the run was checked against: a sequence below
		// it is below the window (the one this window was opened with).
		if span = w.bitmap(span); seq <= w.High-int64(span) {
			return w.belowWindow(seq, span, waive)
		}
	}
	word, mask := w.bit(seq, span)
	if w.Bitmap[word]&mask != 0 {
		return seqVerdict{outcome: Duplicate, reason: reasonSeqSeen}
	}
	w.own()
	w.Bitmap[word] |= mask
	w.fillGap(seq)
	return seqVerdict{outcome: AppliedLate, reason: reasonLate}
}

// belowWindow decides a sequence below the current window: quarantined,
// unless an operator released it.
func (w *EpochWindow) belowWindow(seq int64, span int, waive bool) seqVerdict {
	if !waive {
		return seqVerdict{outcome: Quarantined, reason: reasonBelowWindow}
	}
	if w.Bitmap == nil {
		w.bitmap(span) // First goes below the run
	}
	w.fillGap(seq)
	return seqVerdict{outcome: Applied, reason: reasonReleased}
}

// advance moves the high-water mark to seq, clearing the bits of the
// sequences it passes over, then marks seq seen.
func (w *EpochWindow) advance(seq int64, span int) {
	if w.Bitmap == nil {
		if w.High < 0 || seq == w.High+1 {
			w.High = seq // the run goes on
			return
		}
		span = w.bitmap(span)
	}
	if w.High >= 0 {
		// Sequences at or below seq-span leave the window: the never-seen
		// ones become listed gaps, as do skipped ones that never entered it.
		out := seq - int64(span)
		w.slideOut(min(out, w.High), span)
		if out > w.High {
			w.addGap(Range{From: w.High + 1, To: out})
		}
	}
	w.own()
	if w.High < 0 || seq-w.High >= int64(span) {
		clear(w.Bitmap)
	} else {
		for s := w.High + 1; s < seq; s++ {
			word, mask := w.bit(s, span)
			w.Bitmap[word] &^= mask
		}
	}
	word, mask := w.bit(seq, span)
	w.Bitmap[word] = w.Bitmap[word]&^mask | mask
	w.High = seq
	if mask == 1<<63 { // a word filled: perhaps the whole window
		w.compact(span)
	}
}

// checkOlder decides a sequence against an older epoch's window. One that
// kept its bitmap (retire) decides as the current one does, but that a
// sequence above its highest is late, then gives the bitmap up once its
// gaps fit in the list.
func (w *EpochWindow) checkOlder(seq int64, span int, waive bool) seqVerdict {
	if w.Bitmap != nil {
		v := w.checkCurrent(seq, span, waive)
		if v.outcome == Applied && v.reason == "" { // above its highest
			v.outcome, v.reason = AppliedLate, reasonLate
		}
		w.retire(span)
		return v
	}
	switch {
	case seq > w.High:
		v := seqVerdict{outcome: AppliedLate, reason: reasonLate}
		if seq > w.High+1 {
			v.gap = &Range{From: w.High + 1, To: seq - 1}
			w.addGap(*v.gap)
		}
		w.High = seq
		return v
	case seq <= w.Floor:
		if waive {
			w.fillGap(seq)
			return seqVerdict{outcome: Applied, reason: reasonReleased}
		}
		return seqVerdict{outcome: Quarantined, reason: reasonBelowWindow}
	case w.fillGap(seq):
		return seqVerdict{outcome: AppliedLate, reason: reasonLate}
	}
	return seqVerdict{outcome: Duplicate, reason: reasonSeqSeen}
}

// retire turns the current window into an older one: the bitmap's clear
// bits inside the window (a run's sequences below First) become exact
// gaps, then the bitmap goes. A bitmap whose window holds more gaps than
// half of maxGaps stays (a source that rebooted while a member held a
// backlog of every third of its sequences, say): listing only some of its
// gaps would quarantine the late messages of the others.
func (w *EpochWindow) retire(span int) {
	var inWindow []Range
	if w.Bitmap == nil {
		w.Floor = max(w.Floor, w.High-int64(span))
		if lo := max(w.Floor+1, 0); lo < w.First && w.High >= 0 {
			inWindow = []Range{{From: lo, To: w.First - 1}}
		}
	} else {
		if inWindow = w.unseen(max(w.High-int64(span)+1, 0), span); len(inWindow) > maxGaps/2 {
			return
		}
		w.Floor = w.High - int64(span)
	}
	var below []Range
	for _, g := range w.Gaps {
		if g.From <= w.Floor {
			below = append(below, Range{From: g.From, To: min(g.To, w.Floor)})
		}
	}
	w.Gaps = append(below, inWindow...)
	if len(w.Gaps) > maxGaps {
		w.Gaps = w.Gaps[len(w.Gaps)-maxGaps:]
	}
	w.Bitmap = nil
}

// unseen returns the never-seen sequences of the bitmap from lo up to High.
func (w *EpochWindow) unseen(lo int64, span int) []Range {
	var out []Range
	for off := int64(0); off <= w.High-lo; off++ { // by offset: High may be 2^63-1
		s := lo + off
		word, mask := w.bit(s, span)
		if w.Bitmap[word] == ^uint64(0) { // a whole word seen: skip to its end
			off += 63 - s%64
			continue
		}
		if w.Bitmap[word]&mask != 0 {
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

// slideOut lists as gaps the never-seen sequences of the window, from its
// lowest (at or above First) up to to, before the window moves past them.
func (w *EpochWindow) slideOut(to int64, span int) {
	from := max(w.High-int64(span)+1, w.First, 0)
	for s := from; s <= to; s++ {
		word, mask := w.bit(s, span)
		if w.Bitmap[word]&mask != 0 || w.listed(s) {
			continue
		}
		if n := len(w.Gaps); n > 0 && w.Gaps[n-1].To == s-1 {
			w.Gaps[n-1].To = s
		} else {
			w.addGap(Range{From: s, To: s})
		}
	}
}

// listed reports whether seq is in a listed gap (a store written before
// the bitmap held the window's gaps lists some inside it).
func (w *EpochWindow) listed(seq int64) bool {
	for _, g := range w.Gaps {
		if seq >= g.From && seq <= g.To {
			return true
		}
	}
	return false
}

// OpenGaps returns the open gaps of the current epoch's window (it has a
// bitmap) at or above First: the listed ones below the window and the
// never-seen sequences inside it, ascending and merged. For an older
// epoch it returns its listed gaps.
func (w *EpochWindow) OpenGaps() []Range {
	var out []Range
	add := func(g Range) {
		if g.To < w.First {
			return
		}
		g.From = max(g.From, w.First)
		if n := len(out); n > 0 && g.From <= out[n-1].To+1 {
			out[n-1].To = max(out[n-1].To, g.To)
			return
		}
		out = append(out, g)
	}
	var inWindow []Range
	if span := 64 * len(w.Bitmap); span > 0 && w.High >= 0 {
		inWindow = w.unseen(max(w.High-int64(span)+1, w.First, 0), span)
	}
	// Listed gaps (below the window, or inside it as stores written before
	// the bitmap held them may list) and the window's, in order.
	listed := slices.Clone(w.Gaps)
	all := append(listed, inWindow...)
	slices.SortFunc(all, func(a, b Range) int { return cmpInt64(a.From, b.From) })
	for _, g := range all {
		add(g)
	}
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// addGap records a skipped range. Past maxGaps the oldest is dropped; an
// older epoch, which has no bitmap to fall back on, then raises its floor
// over the dropped range, so a sequence in it is quarantined, never taken
// for a duplicate.
func (w *EpochWindow) addGap(g Range) {
	w.Gaps = append(w.Gaps, g)
	for len(w.Gaps) > maxGaps {
		if w.Bitmap == nil {
			w.Floor = max(w.Floor, w.Gaps[0].To)
		}
		w.Gaps = w.Gaps[1:]
	}
}

// fillGap removes seq from the open gaps; it reports whether seq was in one.
func (w *EpochWindow) fillGap(seq int64) bool {
	for i, g := range w.Gaps {
		if seq < g.From || seq > g.To {
			continue
		}
		switch {
		case g.From == g.To:
			w.Gaps = slices.Delete(w.Gaps, i, i+1)
		case seq == g.From:
			w.Gaps[i].From++
		case seq == g.To:
			w.Gaps[i].To--
		default:
			w.Gaps = slices.Insert(w.Gaps, i+1, Range{From: seq + 1, To: g.To})
			w.Gaps[i].To = seq - 1
		}
		return true
	}
	return false
}
