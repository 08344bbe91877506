package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/sparkplug"
)

func TestSparkplugFeed(t *testing.T) {
	f := generateSparkplug(20000, 4, 0.1)
	if len(f.msgs) != 20000 || f.edges != 4 {
		t.Fatalf("%d deliveries of %d edges, want 20000 of 4", len(f.msgs), f.edges)
	}
	t.Run("each edge's NBIRTH comes first, in edge order, with seq 0", func(t *testing.T) {
		for i, m := range f.msgs[:f.edges] {
			p, err := (sparkplug.Decoder{}).DecodeSparkplug(m.Payload)
			if err != nil || m.Topic != "spBv1.0/bench/NBIRTH/"+spEdgeName(i) || p.Seq != 0 || len(p.Metrics) != 9 {
				t.Errorf("delivery %d: %s, seq %d, %d metrics, %v", i, m.Topic, p.Seq, len(p.Metrics), err)
			}
		}
	})
	t.Run("an edge's distinct NDATA count seq up from 1, wrapping 255 to 0, metrics by alias", func(t *testing.T) {
		next := make([]uint64, f.edges)
		wraps := make([]int, f.edges)
		for i := range next {
			next[i] = 1
		}
		for _, m := range f.msgs[f.edges:] {
			if m.Replay {
				continue
			}
			p, err := (sparkplug.Decoder{}).DecodeSparkplug(m.Payload)
			if err != nil || !strings.HasPrefix(m.Topic, "spBv1.0/bench/NDATA/") || p.Seq != next[m.Edge] || len(p.Metrics) != 8 {
				t.Fatalf("%s: seq %d (want %d), %d metrics, %v", m.Topic, p.Seq, next[m.Edge], len(p.Metrics), err)
			}
			for _, mt := range p.Metrics {
				if mt.Name != "" || !mt.HasAlias {
					t.Fatalf("%s seq %d: metric %q alias %d", m.Topic, p.Seq, mt.Name, mt.Alias)
				}
			}
			if next[m.Edge] == 255 {
				wraps[m.Edge]++
			}
			next[m.Edge] = (next[m.Edge] + 1) % 256
		}
		for i, w := range wraps {
			if w < 4 {
				t.Errorf("edge %d wrapped %d times", i, w)
			}
		}
	})
	t.Run("a replay is a byte copy of an earlier distinct message", func(t *testing.T) {
		seen := map[string]bool{}
		replays := 0
		for _, m := range f.msgs {
			key := m.Topic + "\x00" + string(m.Payload)
			if m.Replay {
				replays++
				if !seen[key] {
					t.Fatalf("a replay of %s that no distinct message precedes", m.Topic)
				}
				continue
			}
			if seen[key] {
				t.Fatalf("two distinct messages with the same bytes on %s", m.Topic)
			}
			seen[key] = true
		}
		if replays < 1500 || replays > 2500 || f.unique() != len(f.msgs)-replays {
			t.Errorf("%d replays, %d unique of %d", replays, f.unique(), len(f.msgs))
		}
	})
	t.Run("the expected energy is each edge's distinct Energy summed", func(t *testing.T) {
		e := f.energy()
		if len(e) != f.edges {
			t.Fatalf("%d entities", len(e))
		}
		for name, sum := range e {
			if sum.Sign() <= 0 {
				t.Errorf("%s: %s", name, sum.FloatString(2))
			}
		}
	})
	t.Run("generation is deterministic", func(t *testing.T) {
		g := generateSparkplug(20000, 4, 0.1)
		for i := range f.msgs {
			if !bytes.Equal(f.msgs[i].Payload, g.msgs[i].Payload) || f.msgs[i].Topic != g.msgs[i].Topic {
				t.Fatalf("delivery %d differs", i)
			}
		}
	})
}
