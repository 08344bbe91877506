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

// feed is the publishers' record of a run, the ground truth it is measured
// against: the sequenced route's messages of Sources and, in a run with the
// id route, the meters' messages.
type feed struct {
	Pub        *testbroker.Publisher
	Sources    []string
	Meters     *testbroker.Publisher // nil: the run has no id route
	MeterNames []string
	// SetAside names a meter whose messages the run expects held: the
	// decisions on them go to result.SetAside, for the test to check,
	// instead of being counted.
	SetAside string
	// Conflicts are the messages, by conflictName, that were sent again
	// with another content after they were applied: each must have a
	// conflict record, and may have no other outcome than theirs.
	Conflicts map[string]bool
}

// conflictName names a message of route for feed.Conflicts.
func conflictName(route string, k seqKey) string { return route + "/" + k.String() }

// observed is what a store shows after a run: the audit records of every
// chain, the entities and the source windows.
type observed struct {
	Records  []engine.AuditRecord
	Entities []engine.EntityState
	Sources  []engine.SourceReport
}

// result is what a store shows after a run, measured against what the
// publishers sent.
type result struct {
	Records    []engine.AuditRecord
	Applied    int // distinct messages applied (applied + applied_late), on both routes
	Late       int // of which applied_late
	Duplicates int // duplicate records of applied messages, on both routes
	HeldAgain  int // duplicate records of held messages delivered again (heldAgain)
	DupFalse   int // duplicates that arrived with DUP=0
	Held       int // quarantined, conflict or malformed records
	Conflicts  int // of which conflicts of feed.Conflicts
	Lost       int // acknowledged to the publisher, never applied, reported in a gap
	Unacked    int // sequenced publishes the broker never acknowledged
	Published  int // sequenced publish attempts
	GapSeqs    int // sequences in the reported gaps

	IDApplied    int // distinct ids applied on the id route
	IDDuplicates int // duplicate records of the id route
	IDPublished  int // id route publish attempts
	IDUnacked    int // id route publishes the broker never acknowledged

	DuplicatesOf map[seqKey]int  // duplicate records per sequenced message
	ViaBroker    map[string]int  // duplicate records per broker they came through
	AppliedSeqs  map[seqKey]bool // every applied sequenced message
	AppliedIDs   map[seqKey]bool // every applied id: (meter, n) of msgId "meter-n"
	Gaps         map[string][]engine.Range
	SetAside     []engine.AuditRecord // the decisions on feed.SetAside's messages
	Recoveries   []engine.AuditRecord // a member's recoveries of what the store lost, from its journal
}

func (r *result) String() string {
	s := fmt.Sprintf("published %d (%d unacknowledged), audit records %d: applied %d (late %d), duplicates %d (DUP=0: %d), held %d (conflicts sent: %d); lost by the broker and reported as gaps %d (gap sequences %d)",
		r.Published, r.Unacked, len(r.Records), r.Applied, r.Late, r.Duplicates, r.DupFalse, r.Held, r.Conflicts, r.Lost, r.GapSeqs)
	if r.IDPublished > 0 {
		s += fmt.Sprintf("; id route: published %d (%d unacknowledged), applied %d, duplicates %d",
			r.IDPublished, r.IDUnacked, r.IDApplied, r.IDDuplicates)
	}
	return s
}

// maxErrors bounds the errors one check reports.
const maxErrors = 20

// verifyStore checks a single-owner store against the publisher's record:
// audit chain intact, and what checkFeed checks.
func verifyStore(t testing.TB, st app.Store, pub *testbroker.Publisher, sources []string) *result {
	t.Helper()
	return verifyStoreFeed(t, st, feed{Pub: pub, Sources: sources})
}

// verifyStoreFeed is verifyStore against the record f.
func verifyStoreFeed(t testing.TB, st app.Store, f feed) *result {
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
	obs := observed{Entities: snap.Entities, Sources: engine.SourceReports(snap.Sources)}
	err = st.ScanAudit(ctx, 1, func(rec engine.AuditRecord) error {
		obs.Records = append(obs.Records, rec)
		return nil
	})
	if err != nil {
		t.Fatalf("scan audit: %v", err)
	}
	if uint64(len(obs.Records)) != n {
		t.Errorf("scanned %d audit records, verify checked %d", len(obs.Records), n)
	}
	return checkFeed(t, obs, f)
}

// checkFeed checks what a store shows against the publishers' record: no
// message applied twice; entity state equal to what the applied messages
// add up to; every sequenced message the broker acknowledged either
// applied or inside a gap its source reports; every id the broker
// acknowledged applied (an id route cannot report a loss: a run with one
// must not let the broker lose its messages); nothing applied that was
// never published; no applied sequence inside a reported gap.
func checkFeed(t testing.TB, obs observed, f feed) *result {
	t.Helper()
	r := &result{DuplicatesOf: map[seqKey]int{}, ViaBroker: map[string]int{}, AppliedSeqs: map[seqKey]bool{},
		AppliedIDs: map[seqKey]bool{}, Gaps: map[string][]engine.Range{}}
	errs := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if errs++; errs <= maxErrors {
			t.Errorf(format, args...)
		}
	}
	for _, rec := range obs.Records {
		r.Records = append(r.Records, rec)
		if rec.Outcome == engine.OutcomeRecovered {
			r.Recoveries = append(r.Recoveries, rec)
			continue
		}
		if f.SetAside != "" && rec.Route == idRouteName && len(rec.Source) == 1 && rec.Source[0] == f.SetAside {
			r.SetAside = append(r.SetAside, rec)
			continue
		}
		r.countRecord(rec, f, fail)
	}
	held := heldContents(obs.Records)
	for _, rec := range obs.Records {
		k, applied, err := r.identify(rec)
		switch {
		case err != nil || rec.Outcome != engine.Duplicate.String():
		case heldAgain(rec):
			// A held message delivered again is a duplicate of the
			// quarantine entry that holds it, not of an applied message.
			if !held[heldContent{rec.Key, rec.Digest}] {
				fail("%s %v found a duplicate of a held entry (audit record %d, member %q: %s), yet held nowhere", rec.Route, k, rec.Position, rec.Member, rec.Reason)
			}
		case !applied[k]:
			fail("%s %v found duplicate (audit record %d, member %q), yet applied nowhere", rec.Route, k, rec.Position, rec.Member)
		}
	}

	published := map[seqKey]bool{}
	for _, m := range f.Pub.All() {
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
	r.checkIDs(f, fail)
	r.checkState(obs.Entities, f, fail)
	r.checkGaps(obs.Sources, fail)
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
	for _, m := range f.Pub.Acked() {
		k := seqKey{m.Source, m.Sequence}
		switch {
		case r.AppliedSeqs[k]:
		case inGap(k):
			r.Lost++
		default:
			fail("%v acknowledged by the broker, never applied, and in no reported gap: a silent hole", k)
		}
	}
	if r.Conflicts != len(f.Conflicts) {
		fail("%d conflict records, but %d messages were sent again with another content", r.Conflicts, len(f.Conflicts))
	}
	if errs > maxErrors {
		t.Errorf("… and %d more errors", errs-maxErrors)
	}
	t.Logf("store: %v", r)
	return r
}

// checkIDs compares the applied ids with the meters' publishes: each one
// applied was published, each one the broker acknowledged was applied.
func (r *result) checkIDs(f feed, fail func(string, ...any)) {
	if f.Meters == nil {
		return
	}
	published := map[seqKey]bool{}
	for _, m := range f.Meters.All() {
		k := seqKey{m.Source, m.Sequence}
		published[k] = true
		r.IDPublished++
		if !m.Acked {
			r.IDUnacked++
		} else if !r.AppliedIDs[k] {
			fail("id %s acknowledged by the broker and never applied: an id route cannot report a loss", meterID(k.source, k.seq))
		}
	}
	for k := range r.AppliedIDs {
		if !published[k] {
			fail("id %s applied but never published", meterID(k.source, k.seq))
		}
	}
}

func (r *result) countRecord(rec engine.AuditRecord, f feed, fail func(string, ...any)) {
	k, applied, err := r.identify(rec)
	if err != nil {
		fail("audit record %d (member %q): %v: %+v", rec.Position, rec.Member, err, rec)
		return
	}
	id := rec.Route == idRouteName
	switch rec.Outcome {
	case engine.Applied.String(), engine.AppliedLate.String():
		if applied[k] {
			fail("%s %v applied twice (audit record %d, member %q)", rec.Route, k, rec.Position, rec.Member)
		}
		applied[k] = true
		r.Applied++
		if id {
			r.IDApplied++
		}
		if rec.Outcome == engine.AppliedLate.String() {
			r.Late++
		}
	case engine.Duplicate.String():
		if heldAgain(rec) { // no replay of an applied message: checkFeed checks it against the held ones
			r.HeldAgain++
			return
		}
		// A single chain's records are in the order of its decisions;
		// checkFeed checks a group's duplicates once all chains are read.
		if !applied[k] && rec.Member == "" {
			fail("%v found duplicate before it was applied (audit record %d)", k, rec.Position)
		}
		r.Duplicates++
		r.ViaBroker[rec.Broker]++
		if id {
			r.IDDuplicates++
		} else {
			r.DuplicatesOf[k]++
		}
		if !rec.Dup {
			r.DupFalse++
		}
	case engine.Conflict.String():
		r.Held++
		if !f.Conflicts[conflictName(rec.Route, k)] {
			fail("%s %v conflict (%s) at audit record %d: it was never sent with another content", rec.Route, k, rec.Reason, rec.Position)
		}
		r.Conflicts++
	default:
		r.Held++
		fail("%v %s (%s) at audit record %d: nothing here is unprovable", k, rec.Outcome, rec.Reason, rec.Position)
	}
}

// heldContent is a held message's key and content digest.
type heldContent struct{ key, digest engine.Hash }

// heldContents are the key and digest of every message records held.
func heldContents(records []engine.AuditRecord) map[heldContent]bool {
	out := map[heldContent]bool{}
	for _, rec := range records {
		if o, ok := engine.ParseOutcome(rec.Outcome); ok && o.Held() && !rec.Key.IsZero() {
			out[heldContent{rec.Key, rec.Digest}] = true
		}
	}
	return out
}

// heldAgain reports whether rec is a delivery again of a held message, a
// duplicate of the quarantine entry that holds it.
func heldAgain(rec engine.AuditRecord) bool {
	return rec.Outcome == engine.Duplicate.String() && strings.HasPrefix(rec.Reason, "delivered again: held in quarantine as #")
}

// identify names the published message an audit record decided on, and
// returns the result's applied set of its route.
func (r *result) identify(rec engine.AuditRecord) (seqKey, map[seqKey]bool, error) {
	switch {
	case rec.Route == routeName && len(rec.Source) == 1 && rec.Sequence != nil:
		k := seqKey{rec.Source[0], *rec.Sequence}
		if rec.Topic != topicPrefix+k.source {
			return k, nil, fmt.Errorf("topic %q for source %q", rec.Topic, k.source)
		}
		return k, r.AppliedSeqs, nil
	case rec.Route == idRouteName && len(rec.Source) == 1 && rec.ID != "":
		meter, n, ok := strings.Cut(rec.ID, "-")
		seq, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil || meter != rec.Source[0] || rec.Topic != meterTopic(meter) {
			return seqKey{}, nil, fmt.Errorf("id %q of meter %v on topic %q is not one the meters published", rec.ID, rec.Source, rec.Topic)
		}
		return seqKey{meter, seq}, r.AppliedIDs, nil
	}
	return seqKey{}, nil, fmt.Errorf("not a decision on a message of route %s or %s", routeName, idRouteName)
}

// checkState compares each entity with the applied messages: a source's
// count is how many of its sequences were applied, last the highest; a
// meter's count is how many of its ids were applied.
func (r *result) checkState(entities []engine.EntityState, f feed, fail func(string, ...any)) {
	count := map[string]int64{}
	last := map[string]int64{}
	for k := range r.AppliedSeqs {
		count["src/"+k.source]++
		last["src/"+k.source] = max(last["src/"+k.source], k.seq)
	}
	for k := range r.AppliedIDs {
		count[meterEntity+k.source]++
	}
	byName := map[string]engine.EntityState{}
	for _, e := range entities {
		byName[e.Name] = e
	}
	if len(entities) != len(count) {
		fail("%d entities in the state, %d sources and meters applied", len(entities), len(count))
	}
	var want []string
	for _, src := range f.Sources {
		want = append(want, "src/"+src)
	}
	for _, m := range f.MeterNames {
		want = append(want, meterEntity+m)
	}
	for _, name := range want {
		e, ok := byName[name]
		if !ok {
			if count[name] > 0 {
				fail("no entity %s after %d applied messages", name, count[name])
			}
			continue
		}
		if got := fieldInt(e, countField); got != count[name] {
			fail("%s: %s = %d, but %d distinct messages were applied", name, countField, got, count[name])
		}
		if _, seq := last[name]; seq {
			if got := fieldInt(e, lastField); got != last[name] {
				fail("%s: %s = %d, but the highest sequence applied is %d", name, lastField, got, last[name])
			}
		}
	}
}

func fieldInt(e engine.EntityState, name string) int64 {
	f, ok := e.Fields.Lookup(name)
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
