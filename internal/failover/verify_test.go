package failover

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// seqKey names one published message.
type seqKey struct {
	source string
	seq    int64
}

func (k seqKey) String() string { return fmt.Sprintf("%s#%d", k.source, k.seq) }

// result is what a store shows after a run, measured against what the
// publisher sent.
type result struct {
	Records    []engine.AuditRecord
	Applied    int // distinct sequences applied (applied + applied_late)
	Late       int // of which applied_late
	Duplicates int // duplicate records
	DupFalse   int // duplicates that arrived with DUP=0
	Held       int // quarantined, conflict or malformed records
	Lost       int // acknowledged to the publisher, never applied, reported in a gap
	Unacked    int // publishes the broker never acknowledged
	Published  int // publish attempts
	GapSeqs    int // sequences in the reported gaps

	DuplicatesOf map[seqKey]int  // duplicate records per message
	ViaBroker    map[string]int  // duplicate records per broker they came through
	AppliedSeqs  map[seqKey]bool // every applied message
	Gaps         map[string][]engine.Range
}

func (r *result) String() string {
	return fmt.Sprintf("published %d (%d unacknowledged), audit records %d: applied %d (late %d), duplicates %d (DUP=0: %d), held %d; lost by the broker and reported as gaps %d (gap sequences %d)",
		r.Published, r.Unacked, len(r.Records), r.Applied, r.Late, r.Duplicates, r.DupFalse, r.Held, r.Lost, r.GapSeqs)
}

// maxErrors bounds the errors one check reports.
const maxErrors = 20

// verifyStore checks a store against the publisher's record: audit chain
// intact; no message applied twice; entity state equal to what the applied
// messages add up to; every message the broker acknowledged either applied
// or inside a gap its source reports; nothing applied that was never
// published; no applied sequence inside a reported gap.
func verifyStore(t testing.TB, st app.Store, pub *testbroker.Publisher, sources []string) *result {
	t.Helper()
	ctx := context.Background()
	snap, err := st.Load(ctx)
	if err != nil {
		t.Fatalf("load store: %v", err)
	}
	n, err := audit.Verify(ctx, st, snap.AuditHead)
	if err != nil {
		t.Errorf("audit chain broken after %d records: %v", n, err)
	}
	r := &result{DuplicatesOf: map[seqKey]int{}, ViaBroker: map[string]int{}, AppliedSeqs: map[seqKey]bool{},
		Gaps: map[string][]engine.Range{}}
	errs := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if errs++; errs <= maxErrors {
			t.Errorf(format, args...)
		}
	}
	err = st.ScanAudit(ctx, 1, func(rec engine.AuditRecord) error {
		r.Records = append(r.Records, rec)
		r.countRecord(rec, fail)
		return nil
	})
	if err != nil {
		t.Fatalf("scan audit: %v", err)
	}
	if uint64(len(r.Records)) != n {
		fail("scanned %d audit records, verify checked %d", len(r.Records), n)
	}

	published := map[seqKey]bool{}
	for _, m := range pub.All() {
		published[seqKey{m.Source, m.Sequence}] = true
		r.Published++
		if !m.Acked {
			r.Unacked++
		}
	}
	for k := range r.AppliedSeqs {
		if !published[k] {
			fail("%v applied but never published", k)
		}
	}
	r.checkState(snap.Entities, sources, fail)
	r.checkGaps(engine.SourceReports(snap.Sources), fail)
	inGap := func(k seqKey) bool {
		for _, g := range r.Gaps[k.source] {
			if g.From <= k.seq && k.seq <= g.To {
				return true
			}
		}
		return false
	}
	for k := range r.AppliedSeqs {
		if inGap(k) {
			fail("%v applied, yet inside a reported gap", k)
		}
	}
	for _, m := range pub.Acked() {
		k := seqKey{m.Source, m.Sequence}
		switch {
		case r.AppliedSeqs[k]:
		case inGap(k):
			r.Lost++
		default:
			fail("%v acknowledged by the broker, never applied, and in no reported gap: a silent hole", k)
		}
	}
	if errs > maxErrors {
		t.Errorf("… and %d more errors", errs-maxErrors)
	}
	t.Logf("store: %v", r)
	return r
}

func (r *result) countRecord(rec engine.AuditRecord, fail func(string, ...any)) {
	if rec.Route != routeName || len(rec.Source) != 1 || rec.Sequence == nil {
		fail("audit record %d is not a decision on a sequenced message of route %s: %+v", rec.Position, routeName, rec)
		return
	}
	k := seqKey{rec.Source[0], *rec.Sequence}
	if rec.Topic != topicPrefix+k.source {
		fail("audit record %d: topic %q for source %q", rec.Position, rec.Topic, k.source)
	}
	switch rec.Outcome {
	case engine.Applied.String(), engine.AppliedLate.String():
		if r.AppliedSeqs[k] {
			fail("%v applied twice (audit record %d)", k, rec.Position)
		}
		r.AppliedSeqs[k] = true
		r.Applied++
		if rec.Outcome == engine.AppliedLate.String() {
			r.Late++
		}
	case engine.Duplicate.String():
		if !r.AppliedSeqs[k] {
			fail("%v found duplicate before it was applied (audit record %d)", k, rec.Position)
		}
		r.Duplicates++
		r.DuplicatesOf[k]++
		r.ViaBroker[rec.Broker]++
		if !rec.Dup {
			r.DupFalse++
		}
	default:
		r.Held++
		fail("%v %s (%s) at audit record %d: nothing here is a conflict or unprovable", k, rec.Outcome, rec.Reason, rec.Position)
	}
}

// checkState compares each source's entity with the applied messages: the
// count is how many were applied, last the highest applied sequence.
func (r *result) checkState(entities []engine.EntityState, sources []string, fail func(string, ...any)) {
	count := map[string]int64{}
	last := map[string]int64{}
	for k := range r.AppliedSeqs {
		count[k.source]++
		last[k.source] = max(last[k.source], k.seq)
	}
	byName := map[string]engine.EntityState{}
	for _, e := range entities {
		byName[e.Name] = e
	}
	if len(entities) != len(count) {
		fail("%d entities in the state, %d sources applied", len(entities), len(count))
	}
	for _, src := range sources {
		e, ok := byName["src/"+src]
		if !ok {
			if count[src] > 0 {
				fail("no entity src/%s after %d applied messages", src, count[src])
			}
			continue
		}
		if got := fieldInt(e, countField); got != count[src] {
			fail("src/%s: %s = %d, but %d distinct sequences were applied", src, countField, got, count[src])
		}
		if got := fieldInt(e, lastField); got != last[src] {
			fail("src/%s: %s = %d, but the highest sequence applied is %d", src, lastField, got, last[src])
		}
	}
}

func fieldInt(e engine.EntityState, name string) int64 {
	f, ok := e.Fields[name]
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(f.Num, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// checkGaps takes the gaps each source reports, as `replayguard sources`
// shows them. The feed has one epoch, so no older epoch may be kept.
func (r *result) checkGaps(reports []engine.SourceReport, fail func(string, ...any)) {
	for _, rep := range reports {
		if rep.Route != routeName || len(rep.Source) != 1 {
			fail("unexpected source %v of route %s", rep.Source, rep.Route)
			continue
		}
		if len(rep.Older) > 0 {
			fail("source %v keeps older epochs %+v; the feed has one", rep.Source, rep.Older)
		}
		r.Gaps[rep.Source[0]] = rep.Gaps
		for _, g := range rep.Gaps {
			r.GapSeqs += int(g.To - g.From + 1)
		}
	}
}

// checkReplays fails the test unless the broker replayed messages that were
// already applied, some with DUP=0: without replays a run proves nothing.
func (r *result) checkReplays(t testing.TB, wantDupFalse bool) {
	t.Helper()
	if r.Duplicates == 0 {
		t.Fatal("no replay of an applied message was seen: the run proved nothing")
	}
	if wantDupFalse && r.DupFalse == 0 {
		t.Fatal("every replay carried DUP=1: the replays of an older session were not exercised")
	}
}

// gapsString prints the reported gaps, by source.
func (r *result) gapsString() string {
	var b strings.Builder
	srcs := make([]string, 0, len(r.Gaps))
	for s := range r.Gaps {
		srcs = append(srcs, s)
	}
	slices.Sort(srcs)
	for _, s := range srcs {
		if len(r.Gaps[s]) > 0 {
			fmt.Fprintf(&b, " %s:%v", s, r.Gaps[s])
		}
	}
	return strings.TrimSpace(b.String())
}
