package engine_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// genuine is one message a producer really sent.
type genuine struct {
	source string
	boot   int
	seq    int
	delta  int
}

func (g genuine) msg() engine.Message {
	return inc("fd", g.source, g.boot, g.seq, fmt.Sprintf(`"incident_id":%q,"casualty_delta":%d`, g.source, g.delta))
}

// model is a small reference implementation of DESIGN.md's rules with
// unbounded memory: a FIFO key window and full seen-sets per epoch.
type model struct {
	span, keep, maxKeys int
	keys                map[string]int // key -> delta (the content)
	fifo                []string
	epochs              map[string][]*modelEpoch // newest first
	sums                map[string]int
	held                map[genuine]bool // the messages an open quarantine entry holds
}

type modelEpoch struct {
	boot        int
	high, floor int
	seen        map[int]bool
}

// decide is the model's decision of g: one held is held once, and
// delivered again while held, a duplicate of its entry (nothing here
// releases or discards one).
func (m *model) decide(g genuine) string {
	out := m.decideFresh(g)
	if out == "conflict" || out == "quarantined" {
		if m.held[g] {
			return "duplicate"
		}
		m.held[g] = true
	}
	return out
}

func (m *model) decideFresh(g genuine) string {
	key := fmt.Sprintf("%s/%d/%d", g.source, g.boot, g.seq)
	if d, ok := m.keys[key]; ok {
		if d == g.delta {
			return "duplicate"
		}
		return "conflict"
	}
	eps := m.epochs[g.source]
	var ep *modelEpoch
	idx := -1
	for i, e := range eps {
		if e.boot == g.boot {
			ep, idx = e, i
		}
	}
	outcome := ""
	switch {
	case ep == nil && len(eps) > 0 && g.boot < eps[0].boot:
		return "quarantined"
	case ep == nil:
		if len(eps) > 0 {
			eps[0].floor = eps[0].high - m.span
		}
		ep = &modelEpoch{boot: g.boot, high: g.seq, seen: map[int]bool{g.seq: true}}
		eps = append([]*modelEpoch{ep}, eps...)
		if len(eps) > m.keep+1 {
			eps = eps[:m.keep+1]
		}
		m.epochs[g.source] = eps
		outcome = "applied"
	case idx == 0 && g.seq > ep.high, idx > 0 && g.seq > ep.high:
		outcome = map[bool]string{true: "applied", false: "applied_late"}[idx == 0]
	case idx == 0 && g.seq <= ep.high-m.span, idx > 0 && g.seq <= ep.floor:
		return "quarantined"
	case ep.seen[g.seq]:
		return "duplicate"
	default:
		outcome = "applied_late"
	}
	ep.seen[g.seq] = true
	ep.high = max(ep.high, g.seq)
	m.keys[key] = g.delta
	m.fifo = append(m.fifo, key)
	if len(m.fifo) > m.maxKeys {
		delete(m.keys, m.fifo[0])
		m.fifo = m.fifo[1:]
	}
	m.sums[g.source] += g.delta
	return outcome
}

// TestDecisionsMatchAReferenceModel feeds random feeds with replays,
// reorders, drops, held-back messages, conflicts and epoch restarts and
// compares every outcome and the final state with the model. The seed is
// printed; REPLAYGUARD_SEED replays one.
func TestDecisionsMatchAReferenceModel(t *testing.T) {
	seed, rng := propertySeed(t)
	for round := 0; round < 30; round++ {
		opts := randomOptions(rng)
		h := newHarness(t, opts)
		checkModel(t, fmt.Sprintf("seed %d round %d", seed, round), rng, opts, randomFeed(rng, 3),
			func() *engine.Engine { return h.e }, nil)
	}
}

// propertySeed returns the seed of a random test, printed, and its source.
func propertySeed(t *testing.T) (uint64, *rand.Rand) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("REPLAYGUARD_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set REPLAYGUARD_SEED to replay)", seed)
	return seed, rand.New(rand.NewPCG(seed, 2))
}

func randomOptions(rng *rand.Rand) engine.Options {
	return engine.Options{SequenceSpan: 64 * (1 + rng.IntN(2)), MaxEntries: 1 + rng.IntN(300), KeepEpochs: 1 + rng.IntN(2)}
}

// checkModel feeds feed in random batches to the engine e returns, up to
// four submitted before their commits are waited for, calling restart
// (when not nil) now and then between two batches, and compares every
// outcome and the final state with the model's.
func checkModel(t *testing.T, name string, rng *rand.Rand, opts engine.Options, feed []genuine, e func() *engine.Engine, restart func()) {
	t.Helper()
	m := &model{span: opts.SequenceSpan, keep: opts.KeepEpochs, maxKeys: opts.MaxEntries,
		keys: map[string]int{}, epochs: map[string][]*modelEpoch{}, sums: map[string]int{}, held: map[genuine]bool{}}
	type submitted struct {
		wait  func() ([]engine.Decision, error)
		start int
	}
	var inFlight []submitted
	settle := func() {
		t.Helper()
		for _, s := range inFlight {
			ds, err := s.wait()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for i, d := range ds {
				g := feed[s.start+i]
				if want := m.decide(g); d.Outcome.String() != want {
					t.Fatalf("%s delivery %d %+v: got %s (%s), model says %s", name, s.start+i, g, d.Outcome, d.Reason, want)
				}
			}
		}
		inFlight = inFlight[:0]
	}
	for start := 0; start < len(feed); {
		n := min(1+rng.IntN(40), len(feed)-start)
		msgs := make([]engine.Message, n)
		for i, g := range feed[start : start+n] {
			msgs[i] = g.msg()
		}
		if restart != nil && rng.IntN(10) == 0 {
			settle()
			restart()
		}
		if rng.IntN(2) == 0 {
			e().Prepare(msgs) // decoding ahead must not change a decision
		}
		wait, err := e().Submit(t.Context(), msgs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		inFlight = append(inFlight, submitted{wait, start})
		if len(inFlight) == 4 || rng.IntN(3) == 0 {
			settle()
		}
		start += n
	}
	settle()
	want := map[string]map[string]int{}
	for src, sum := range m.sums {
		want["incident/"+src] = map[string]int{"casualties": sum}
	}
	wb, _ := json.Marshal(want)
	got, _ := json.Marshal(engine.StateJSON(e().State()))
	if string(got) != string(wb) {
		t.Fatalf("%s: state %s, model %s", name, got, wb)
	}
	// What the metrics count is what the reports say.
	reports, wantGaps := e().Sources(), int64(0)
	for _, r := range reports {
		wantGaps += r.OpenGaps()
	}
	if n, gaps, err := e().CountGaps(t.Context()); err != nil || n != len(reports) || gaps != wantGaps {
		t.Fatalf("%s: CountGaps = %d sources, %d gaps, %v; the reports have %d and %d", name, n, gaps, err, len(reports), wantGaps)
	}
	// A part of them, as the dashboard asks: the first entities by name;
	// the sources with open gaps first, then the others.
	states := e().State()
	for _, limit := range partLimits(len(reports)) {
		part, total, err := e().ReadStateUpTo(t.Context(), limit)
		if want := states[:min(limit, len(states))]; err != nil || total != len(states) || jsonText(part) != jsonText(want) {
			t.Fatalf("%s: ReadStateUpTo(%d) = %s of %d, %v; want %s of %d", name, limit, jsonText(part), total, err, jsonText(want), len(states))
		}
		var gappy, quiet []engine.SourceReport
		for _, r := range reports {
			if r.OpenGaps() > 0 {
				gappy = append(gappy, r)
			} else {
				quiet = append(quiet, r)
			}
		}
		gappy = gappy[:min(limit, len(gappy))]
		chosen := append(gappy, quiet[:min(limit-len(gappy), len(quiet))]...)
		var want []engine.SourceReport
		for _, r := range reports { // in report order
			if slices.ContainsFunc(chosen, func(c engine.SourceReport) bool { return c.Route == r.Route && slices.Equal(c.Source, r.Source) }) {
				want = append(want, r)
			}
		}
		sel, err := e().ReadSourcesUpTo(t.Context(), limit)
		if err != nil || sel.Total != len(reports) || sel.OpenGaps != wantGaps || jsonText(sel.Reports) != jsonText(want) {
			t.Fatalf("%s: ReadSourcesUpTo(%d) = %s, %d windows, %d gaps, %v; want %s, %d, %d",
				name, limit, jsonText(sel.Reports), sel.Total, sel.OpenGaps, err, jsonText(want), len(reports), wantGaps)
		}
	}
}

// partLimits are the limits checkModel asks ReadStateUpTo and
// ReadSourcesUpTo for, of n sources.
func partLimits(n int) []int { return []int{1, 2, 3, n/2 + 1} }

// stateReads is how many times checkModel's checks read the state (State
// twice, ReadStateUpTo once a limit).
var stateReads = 2 + len(partLimits(0))

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// randomFeed is a feed of sources producers.
func randomFeed(rng *rand.Rand, sources int) []genuine {
	var sent, feed []genuine
	var held []genuine
	boots := map[string]int{}
	seqs := map[string]int{}
	for i := 0; i < 400; i++ {
		src := fmt.Sprintf("s%d", rng.IntN(sources))
		if boots[src] == 0 || rng.IntN(120) == 0 {
			boots[src]++
			seqs[src] = 0
		}
		seqs[src]++
		g := genuine{source: src, boot: boots[src], seq: seqs[src], delta: 1 + rng.IntN(5)}
		sent = append(sent, g)
		switch r := rng.IntN(100); {
		case r < 3: // dropped by the broker: a gap
		case r < 8:
			held = append(held, g)
		default:
			feed = append(feed, g)
		}
		switch r := rng.IntN(100); {
		case r < 10 && len(sent) > 0: // a failover replays a burst
			from := max(0, len(sent)-1-rng.IntN(150))
			feed = append(feed, sent[from:from+min(1+rng.IntN(20), len(sent)-from)]...)
		case r < 13 && len(held) > 0:
			feed = append(feed, held[0])
			held = held[1:]
		case r < 15 && len(sent) > 0:
			c := sent[rng.IntN(len(sent))]
			c.delta += 10 // same key, other content
			feed = append(feed, c)
		case r < 20 && len(feed) > 2:
			j := len(feed) - 1 - rng.IntN(min(5, len(feed)-1))
			feed[j], feed[len(feed)-1] = feed[len(feed)-1], feed[j]
		}
	}
	return append(feed, held...)
}
