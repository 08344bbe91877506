package jetstream

import (
	"fmt"
	"slices"
	"testing"
)

func TestSeenTellsTheSequencesNeverSeen(t *testing.T) {
	for _, c := range []struct {
		name           string
		from           uint64   // accounted for at the start
		seen           []uint64 // in the order they come
		after, through uint64
		want           []span
		below, wantLow uint64 // below(below) == wantLow
	}{
		{"nothing passed over", 0, []uint64{1, 2, 3}, 0, 3, nil, 4, 3},
		{"a run passed over in the middle", 0, []uint64{1, 2, 6, 7}, 0, 7, []span{{3, 5}}, 6, 2},
		{"past the last seen", 4, []uint64{5}, 4, 9, []span{{6, 9}}, 10, 5},
		{"a message delivered again fills its gap", 0, []uint64{1, 5, 3}, 0, 5, []span{{2, 2}, {4, 4}}, 5, 3},
		{"the gap's ends filled late", 0, []uint64{1, 5, 2, 4}, 0, 5, []span{{3, 3}}, 4, 2},
		{"only after after", 0, []uint64{1, 4, 8}, 5, 8, []span{{6, 7}}, 8, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := seen{last: c.from, from: c.from}
			for _, q := range c.seen {
				s.note(q)
			}
			got, ok := s.unseen(c.after, c.through)
			if !ok || !slices.Equal(got, c.want) {
				t.Errorf("unseen(%d, %d) = %v, %v; want %v", c.after, c.through, got, ok, c.want)
			}
			if low, ok := s.below(c.below); !ok || low != c.wantLow {
				t.Errorf("below(%d) = %d, %v; want %d", c.below, low, ok, c.wantLow)
			}
		})
	}
}

func TestSeenForgetsWhatIsAccountedFor(t *testing.T) {
	s := seen{}
	for _, q := range []uint64{2, 5, 9} {
		s.note(q)
	}
	s.forget(5)
	if got, ok := s.unseen(5, 9); !ok || !slices.Equal(got, []span{{6, 8}}) {
		t.Errorf("unseen(5, 9) after forget(5) = %v, %v; want [{6 8}]", got, ok)
	}
	if _, ok := s.unseen(2, 9); ok {
		t.Error("unseen below what was forgotten answers as if it knew")
	}

	// A gap across what is forgotten keeps its part above it.
	s.forget(7)
	if low, ok := s.below(9); !ok || low != 7 {
		t.Errorf("below(9) after forget(7) = %d, %v; want 7, true", low, ok)
	}

	// Forgotten past the last seen, the next gap starts after it.
	s.forget(12)
	s.note(16)
	if got, ok := s.unseen(12, 16); !ok || !slices.Equal(got, []span{{13, 15}}) {
		t.Errorf("unseen(12, 16) after forget(12) and 16 seen = %v, %v; want [{13 15}]", got, ok)
	}
	if low, ok := s.below(16); !ok || low != 12 {
		t.Errorf("below(16) = %d, %v; want 12, true", low, ok)
	}
}

func TestSeenDropsTheOldestGapsPastItsBound(t *testing.T) {
	s := seen{}
	for i := range uint64(maxGaps + 1) {
		s.note(2*i + 2) // every odd sequence passed over
	}
	if len(s.gaps) > maxGaps {
		t.Fatalf("%d gaps kept, want at most %d", len(s.gaps), maxGaps)
	}
	if _, ok := s.unseen(0, s.last); ok {
		t.Error("unseen over dropped gaps answers as if it knew")
	}
	if got, ok := s.unseen(s.last-4, s.last); !ok || fmt.Sprint(got) != fmt.Sprint([]span{{s.last - 3, s.last - 3}, {s.last - 1, s.last - 1}}) {
		t.Errorf("unseen of the last sequences = %v, %v", got, ok)
	}
}

func TestEveryDeliveryCameOnlyWithoutAHole(t *testing.T) {
	var r receipts
	r.reset(0, 10) // 10 deliveries before the bind
	for i, sseq := range []uint64{1, 2, 3} {
		r.received(sseq, uint64(11+i))
	}
	if !r.complete(10, 13) {
		t.Error("deliveries 11 to 13 all came, and complete says no")
	}
	if r.complete(13, 14) {
		t.Error("delivery 14 has not come, and complete says yes")
	}
	r.received(5, 15) // 14 went elsewhere
	if r.complete(13, 15) {
		t.Error("delivery 14 never came, and complete says yes")
	}
	r.received(6, 16)
	if !r.complete(15, 16) {
		t.Error("delivery 16 came, and complete says no")
	}
}
