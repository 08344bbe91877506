package benchfeed

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"
)

func TestGenerate(t *testing.T) {
	msgs := Generate(5000, 50, 0.1)
	seen := map[string]bool{}
	replays := 0
	for i, m := range msgs {
		k := m.Key()
		switch {
		case m.Replay && !seen[k]:
			t.Fatalf("message %d: replay of %s before its first delivery", i, k)
		case !m.Replay && seen[k]:
			t.Fatalf("message %d: %s delivered twice without being a replay", i, k)
		case m.Replay:
			replays++
		}
		seen[k] = true
	}
	if got := Unique(msgs); got != 5000 || len(seen) != 5000 {
		t.Errorf("Unique = %d, distinct keys %d, want 5000", got, len(seen))
	}
	if replays < 400 || replays > 600 {
		t.Errorf("%d replays of 5000 with probability 0.1", replays)
	}
	if lines := bytes.Count(Capture(msgs), []byte("\n")); lines != len(msgs) {
		t.Errorf("Capture: %d lines for %d messages", lines, len(msgs))
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	if !bytes.Equal(Capture(Generate(2000, 7, 0.2)), Capture(Generate(2000, 7, 0.2))) {
		t.Error("two generations of the same feed differ")
	}
}

// TestGenerateSharedIncidentsUnchanged pins the feed of up to
// SharedIncidents producers to the bytes it had before incidents depended
// on the producer, so that benchmark figures taken on it stay comparable.
func TestGenerateSharedIncidentsUnchanged(t *testing.T) {
	for _, c := range []struct {
		n, sources int
		sha        string
	}{
		{100000, 50, "7f8e058b3525701c434a96724989d74267f316971cd05d6f2ed2ecef44e605ec"},
		{2000, 10, "a4dc0d36f1f5b645843071ca24ce21cbb7753d606482956cc63fbb0a3471e06c"},
	} {
		if got := fmt.Sprintf("%x", sha256.Sum256(Capture(Generate(c.n, c.sources, 0.1)))); got != c.sha {
			t.Errorf("Generate(%d, %d, 0.1): sha256 %s, want %s", c.n, c.sources, got, c.sha)
		}
	}
}

func TestIncident(t *testing.T) {
	t.Run("up to 50 producers share incident seq%97", func(t *testing.T) {
		for s := range 50 {
			if got := Incident(s, 1234, 50); got != 1234%97 {
				t.Fatalf("Incident(%d, 1234, 50) = %d", s, got)
			}
		}
	})
	t.Run("with more, no two producers share an incident", func(t *testing.T) {
		owner := map[int64]int{}
		for s := range 5000 {
			for seq := int64(1); seq <= 20000; seq += 7 {
				n := Incident(s, seq, 5000)
				if o, ok := owner[n]; ok && o != s {
					t.Fatalf("incident %d of producers %d and %d", n, o, s)
				}
				owner[n] = s
			}
		}
	})
}

// TestConcurrentBatchesShareRows counts the rows (source, unit, incident)
// that batches of 1000 of three members dealt the feed round-robin share
// with the other members' batches of the same index, as they run at once:
// with 5000 producers and no replays none, as BENCHMARKS.md says; with
// replays, redeliveries dealt to another member than their first delivery
// make every pair share some.
func TestConcurrentBatchesShareRows(t *testing.T) {
	const members, batch, sources = 3, 1000, 5000
	for _, replays := range []float64{0, 0.1} {
		batches := make([][]map[string]bool, members)
		for i, m := range Generate(100000, sources, replays) {
			b := &batches[i%members]
			if i/members%batch == 0 {
				*b = append(*b, map[string]bool{})
			}
			rows := (*b)[len(*b)-1]
			rows[fmt.Sprint("source ", m.Source)] = true // the unit is the source's too
			rows[fmt.Sprint("incident ", Incident(m.Source, m.Seq, sources))] = true
		}
		pairs, sharing := 0, 0
		for k := range batches[0] {
			for o := 1; o < members && k < len(batches[o]); o++ {
				pairs++
				for row := range batches[0][k] {
					if batches[o][k][row] {
						sharing++
						break
					}
				}
			}
		}
		t.Logf("replays %.0f%%: %d of %d pairs of concurrent batches share rows", 100*replays, sharing, pairs)
		if replays == 0 && sharing != 0 {
			t.Errorf("without replays %d of %d pairs share rows, want none", sharing, pairs)
		}
	}
}

func TestEachLinesAreTheCapture(t *testing.T) {
	var b []byte
	for m := range Each(3000, 40, 0.1) {
		b = AppendLine(b, &m)
	}
	if want := Capture(Generate(3000, 40, 0.1)); !bytes.Equal(b, want) {
		t.Errorf("the lines of Each are %d bytes, not Capture's %d", len(b), len(want))
	}
}
