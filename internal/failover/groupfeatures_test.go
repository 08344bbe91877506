package failover

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// auditTemplate is the audit section of TestGroupLosesNoFeature's members:
// retention keeps a few records of each chain in the store and archives
// the rest into one archive the members share; each member streams to its
// own file and to one OTLP receiver. Arguments: archive, file, endpoint.
const auditTemplate = `audit:
  archive: %q
  retention: {max_records: 150, interval: 250ms}
  sinks:
    - {name: file, kind: file, path: %q}
    - {name: otlp, kind: otlp, endpoint: %q}
`

// spPeriod paces TestGroupLosesNoFeature's edge: a member kept down for a
// lease (15 s) comes back to at most a thousand of its messages the others
// applied meanwhile, well inside every member's sequence span (4096): a
// member down for longer than its span of an edge's messages finds the
// rest of its backlog beyond its windows, and holds them.
const spPeriod = 15 * time.Millisecond

// TestGroupLosesNoFeature is a consumer group with what one consumer has:
// three `replayguard run` members in one MQTT share group on a shared
// store, each with audit retention (a small max_records) into one archive,
// a file sink and an OTLP sink, consume the sequenced feed of five sources,
// which Mosquitto deals among them, and a Sparkplug edge, whose messages
// reach every member in order (a Sparkplug route's subscription is not
// shared). The edge's first session crosses seq's 255→0 wrap and its
// second (bdSeq 255 → 256, sent as 0) swaps the aliases; each session's
// messages around the wrap are sent again. During the feed, at random
// points:
//
//   - a member is killed with SIGKILL and started again at once;
//   - the store's server is killed and started again;
//   - another member is killed while its OTLP sink is behind (the
//     receiver refusing a moment) and kept down until, its lease expired,
//     another member has streamed its chain to both sinks up to its head;
//     then it starts again.
//
// Afterwards: `audit verify --archive` finds every member's archive and
// store one intact chain each, and retention archived part of every chain;
// each sink (the members' files together; the OTLP receiver) holds every
// record of every chain, in order per chain, a record sent again only after
// a restart or a takeover, and then the same; the sequenced feed is applied
// exactly once (no broker fails here: no gap); every Sparkplug message the
// broker acknowledged is applied once in the group and the meter's sums
// are exact.
func TestGroupLosesNoFeature(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { groupFeatures(t, kind) })
	}
}

func groupFeatures(t *testing.T, kind string) {
	skipShort(t)
	rng := rand.New(rand.NewPCG(seed(t), 19))
	const members, perSource, rate = 3, 800, 200
	sources := sourceNames(5)
	server := startStoreServer(t, kind)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	brokers := []string{broker.URL()}
	otlp := startOTLPReceiver(t)
	archive := t.TempDir()
	g := &group{t: t, from: map[*daemon]uint64{}}
	files := map[string]string{} // member → its file sink
	for range members {
		file := filepath.Join(t.TempDir(), "audit.jsonl")
		s := newSetupWith(t, brokers, setupOptions{API: true, Store: fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL()),
			ShareGroup: shareGroup, Sparkplug: true, Audit: fmt.Sprintf(auditTemplate, archive, file, otlp.URL()+"/v1/logs")})
		d := startDaemon(t, s)
		g.members = append(g.members, d)
		files[member(d)] = file
	}
	g.WaitReady()

	pub := newPublisher(t, brokers, 20)
	edge := newSpEdge(t, brokers, spGroup, spNode, 255)
	edge.connect()
	edge.birth(spFirstBirth)
	f := startFeeder(t, pub, sources, 0, rate)
	sp := startSpFeederEvery(t, edge, spPeriod)
	total := float64(perSource * len(sources))
	perm := rng.Perm(members)
	type event struct {
		at   float64
		what string
		do   func() string
	}
	events := []event{
		{uniform(rng, 0.1, 0.3), fmt.Sprintf("member %s killed;", member(g.members[perm[0]])), func() string {
			d := g.members[perm[0]]
			g.Kill(d)
			d.Start()
			d.WaitReady()
			return "started again"
		}},
		{uniform(rng, 0.3, 0.45), "the edge's first session's wrap sent again; the edge dies and comes back with swapped aliases;", func() string {
			sp.stop()
			edge.replay(edge.between("255", 250, 262))
			edge.drop() // the broker publishes its NDEATH
			edge.connect()
			edge.birth(spSecondBirth)
			sp = startSpFeederEvery(t, edge, spPeriod)
			return fmt.Sprintf("session 255 ended at seq %d", len(edge.between("255", 1, 1<<20)))
		}},
		{uniform(rng, 0.45, 0.6), "store server killed;", func() string {
			server.Kill()
			g.WaitNotReady()
			time.Sleep(randDuration(rng, 200*time.Millisecond, time.Second))
			server.Restart()
			g.WaitReady()
			return "restarted; every member ready"
		}},
		{uniform(rng, 0.6, 0.8), fmt.Sprintf("member %s killed, kept down;", member(g.members[perm[1]])), func() string {
			return g.KillUntilChainTakenOver(g.members[perm[1]], otlp)
		}},
	}
	slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	for _, e := range events {
		f.waitProgress(t, int64(e.at*total))
		t.Logf("%2.0f%% of the feed (%d published): %s %s", e.at*100, f.Attempted(), e.what, e.do())
	}
	f.waitProgress(t, int64(total))
	f.Stop()
	sp.stop()
	last := edge.Sent()[len(edge.Sent())-1].Seq
	edge.replay(edge.between("256", last-20, last)) // within every member's window
	edge.drop()
	g.members[0].WaitHigh(lastSequences(pub))
	waitSpHigh(t, g.members[0], "256", last)
	waitStable(t, "the audit positions", time.Second, time.Minute, g.Positions)
	chains := g.WaitSinks(files, otlp)
	g.Stop()

	verifyArchive(t, g, archive, chains)
	full := fullChains(t, g.members[0].setup, archive, chains)
	checkSink(t, "file", fileStreams(t, files), full)
	checkSink(t, "otlp", [][]engine.AuditRecord{otlp.Records()}, full)
	var obs observed
	var spRecs []engine.AuditRecord
	for _, m := range slices.Sorted(maps.Keys(full)) {
		for _, r := range full[m] {
			if r.Route == spRouteName {
				spRecs = append(spRecs, r)
			} else {
				obs.Records = append(obs.Records, r)
			}
		}
	}
	obs.Entities, obs.Sources = stateOf(t, g.members[1], spEntity)
	if r := checkFeed(t, obs, feed{Pub: pub, Sources: sources}); r.Lost != 0 {
		t.Errorf("%d messages lost (gaps %s) with no broker failing", r.Lost, r.gapsString())
	}
	checkGroupSparkplug(t, g.members[2], spRecs, edge)
}

// KillUntilChainTakenOver has the OTLP receiver refuse until d's OTLP
// sink is behind its chain's head, kills d, lets the receiver accept
// again, and keeps d down until another member, once d's lease has
// expired, has claimed d's chain and streamed it to both sinks up to its
// head. Then d starts again.
func (g *group) KillUntilChainTakenOver(d *daemon, otlp *otlpReceiver) string {
	g.t.Helper()
	st := openStore(g.t, d.setup)
	keep := st.Capabilities().Keeper
	ctx := context.Background()
	m := member(d)
	cursor := func(sink string) uint64 {
		c, err := keep.ChainCursor(ctx, m, sink)
		if err != nil {
			g.t.Fatal(err)
		}
		return c
	}
	otlp.Refuse(true)
	waitFor(g.t, fmt.Sprintf("member %s's OTLP sink 20 records behind", m), 20*time.Second, func() bool {
		return d.Position() >= cursor("otlp")+20
	})
	g.Kill(d)
	behind := g.from[d] - cursor("otlp")
	otlp.Refuse(false)
	killed := time.Now()
	waitFor(g.t, fmt.Sprintf("member %s's chain streamed by another member", m), 90*time.Second, func() bool {
		return cursor("otlp") >= g.from[d] && cursor("file") >= g.from[d]
	})
	took := time.Since(killed)
	d.Start()
	d.WaitReady()
	return fmt.Sprintf("its OTLP sink %d records behind its head (%d) at the kill; streamed by another member %v later; started again",
		behind, g.from[d], took.Round(time.Millisecond))
}

// WaitSinks waits until every chain's head is in the files and at the
// OTLP receiver (when there is one), and returns each member's chain head.
func (g *group) WaitSinks(files map[string]string, otlp *otlpReceiver) map[string]engine.AuditHead {
	g.t.Helper()
	st := openStore(g.t, g.members[0].setup)
	cs := st.Capabilities().Chains
	list, err := cs.Chains(context.Background())
	if err != nil {
		g.t.Fatal(err)
	}
	heads := map[string]engine.AuditHead{}
	for _, c := range list {
		heads[c.Member] = c.Head
	}
	// behind names each chain a sink has not reached the head of, with
	// the last position it holds.
	behind := func(sink string, streams [][]engine.AuditRecord) []string {
		got := map[string]uint64{}
		for _, s := range streams {
			for _, r := range s {
				got[r.Member] = max(got[r.Member], r.Position)
			}
		}
		var out []string
		for _, m := range slices.Sorted(maps.Keys(heads)) {
			if got[m] < heads[m].Position {
				out = append(out, fmt.Sprintf("%s: member %s's chain at %d of %d", sink, m, got[m], heads[m].Position))
			}
		}
		return out
	}
	var left []string
	deadline := time.Now().Add(time.Minute)
	for {
		left = behind("file", fileStreams(g.t, files))
		if otlp != nil {
			left = append(left, behind("otlp", [][]engine.AuditRecord{otlp.Records()})...)
		}
		if len(left) == 0 {
			return heads
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("every chain's head not at both sinks within 1m: %s", strings.Join(left, "; "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// verifyArchive runs `audit verify --archive` and checks that it finds
// every member's archive and stored chain one intact chain up to its head.
func verifyArchive(t *testing.T, g *group, archive string, heads map[string]engine.AuditHead) {
	t.Helper()
	out := g.members[1].run("audit", "verify", "--archive", archive)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	total := uint64(0)
	for m, h := range heads {
		total += h.Position
		prefix, suffix := fmt.Sprintf("member %s: archive: ", m), fmt.Sprintf("; %d records as one chain", h.Position)
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) && strings.HasSuffix(l, suffix) }) {
			t.Errorf("audit verify --archive: no line %q…%q in\n%s", prefix, suffix, out)
		}
	}
	want := fmt.Sprintf("audit chains intact: %d members, %d records, archive and store as one chain each", len(heads), total)
	if lines[len(lines)-1] != want {
		t.Errorf("audit verify --archive ends with %q, want %q", lines[len(lines)-1], want)
	}
	t.Logf("audit verify --archive:\n%s", out)
}

// fullChains reads every member's chain from its archive and the store,
// checking that they join, and that retention archived part of each.
func fullChains(t *testing.T, s *setup, archive string, heads map[string]engine.AuditHead) map[string][]engine.AuditRecord {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, s)
	cs, keep := st.Capabilities().Chains, st.Capabilities().Keeper
	out := map[string][]engine.AuditRecord{}
	for m, h := range heads {
		var recs []engine.AuditRecord
		add := func(r engine.AuditRecord) error {
			recs = append(recs, r)
			return nil
		}
		if _, err := audit.ScanArchive(ctx, archive, m, add); err != nil {
			t.Fatalf("member %s's archive: %v", m, err)
		}
		base, err := keep.ChainBase(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		archived := uint64(len(recs))
		if base.Position == 0 || archived < base.Position {
			t.Errorf("member %s: %d records archived, the store's base at %d: want the archive to reach a base above 0",
				m, archived, base.Position)
		}
		if archived > base.Position { // a segment sealed, its trim interrupted: the store holds its records too
			t.Logf("member %s: the archive holds %d..%d, which the store still holds", m, base.Position+1, archived)
		}
		err = cs.ScanChain(ctx, m, base.Position+1, func(r engine.AuditRecord) error {
			if r.Position <= archived {
				if a := recs[r.Position-1]; a.Hash != r.Hash {
					return fmt.Errorf("position %d: the store's record is not the archived one", r.Position)
				}
				return nil
			}
			return add(r)
		})
		if err != nil {
			t.Fatal(err)
		}
		v := audit.NewChainVerifier(m)
		for _, r := range recs {
			if err := v.Check(r); err != nil {
				t.Fatalf("member %s: archive and store do not make one chain: %v", m, err)
			}
		}
		if v.Head() != h {
			t.Fatalf("member %s: archive and store end at %d, the chain's head is %d", m, v.Head().Position, h.Position)
		}
		out[m] = recs
	}
	return out
}

// checkSink checks what one sink delivered, as streams in delivery order
// (one per file, or the receiver's): every record of every chain, each
// the same as the chain's; in a stream a chain's records go forward (past
// records another stream holds, after a takeover), and one goes back only
// to a record delivered before (again, after a restart or a takeover).
func checkSink(t *testing.T, name string, streams [][]engine.AuditRecord, chains map[string][]engine.AuditRecord) {
	t.Helper()
	seen := map[string]map[uint64]bool{}
	for _, s := range streams {
		for _, r := range s {
			if seen[r.Member] == nil {
				seen[r.Member] = map[uint64]bool{}
			}
			seen[r.Member][r.Position] = true
		}
	}
	again := 0
	for i, s := range streams {
		last, here := map[string]uint64{}, map[string]map[uint64]bool{}
		for _, r := range s {
			chain := chains[r.Member]
			if r.Position == 0 || r.Position > uint64(len(chain)) || chain[r.Position-1].Hash != r.Hash {
				t.Fatalf("sink %s (stream %d): record %d of member %s is not the chain's", name, i, r.Position, r.Member)
			}
			if here[r.Member] == nil {
				here[r.Member] = map[uint64]bool{}
			}
			if r.Position <= last[r.Member] {
				if !here[r.Member][r.Position] {
					t.Fatalf("sink %s (stream %d): member %s's record %d after %d, never delivered before: out of order",
						name, i, r.Member, r.Position, last[r.Member])
				}
				again++
			}
			here[r.Member][r.Position] = true
			last[r.Member] = max(last[r.Member], r.Position)
		}
	}
	for m, chain := range chains {
		for p := range uint64(len(chain)) {
			if !seen[m][p+1] {
				t.Fatalf("sink %s: member %s's record %d never delivered", name, m, p+1)
			}
		}
	}
	t.Logf("sink %s: every record of %d chains delivered; %d delivered again", name, len(chains), again)
}

// fileStreams reads each member's file sink. A last line without its
// newline is one being written, and left out; any other line must be a
// record: a line that is not (a crash's partial line with the next
// record glued to it) would hide every record after it.
func fileStreams(t testing.TB, files map[string]string) [][]engine.AuditRecord {
	t.Helper()
	var out [][]engine.AuditRecord
	for _, m := range slices.Sorted(maps.Keys(files)) {
		b, err := os.ReadFile(files[m])
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(b, []byte("\n"))
		var recs []engine.AuditRecord
		for i, line := range lines[:len(lines)-1] { // the last: after the last newline
			var r engine.AuditRecord
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatalf("member %s's file sink: line %d is no record: %v\n%.300s", m, i+1, err, line)
			}
			recs = append(recs, r)
		}
		out = append(out, recs)
	}
	return out
}

// stateOf reads the state and the sources through the CLI, leaving out the
// Sparkplug meter and edge, which checkGroupSparkplug checks.
func stateOf(t *testing.T, d *daemon, skip string) ([]engine.EntityState, []engine.SourceReport) {
	t.Helper()
	var state map[string]map[string]json.Number
	dec := json.NewDecoder(strings.NewReader(d.run("state", "--json")))
	dec.UseNumber()
	if err := dec.Decode(&state); err != nil {
		t.Fatalf("state --json: %v", err)
	}
	var ents []engine.EntityState
	for name, fields := range state {
		if name == skip {
			continue
		}
		e := engine.EntityState{Name: name, Fields: engine.Fields{}}
		for k, v := range fields {
			e.Fields.Set(k, engine.FieldValue{Kind: engine.KindNumber, Num: v.String()})
		}
		ents = append(ents, e)
	}
	var all, srcs []engine.SourceReport
	if err := json.Unmarshal([]byte(d.run("sources", "--json")), &all); err != nil {
		t.Fatalf("sources --json: %v", err)
	}
	for _, s := range all {
		if s.Route != spRouteName {
			srcs = append(srcs, s)
		}
	}
	return ents, srcs
}

// checkGroupSparkplug checks the Sparkplug route's records of every chain
// against the edge's record: every message the broker acknowledged (and
// each Will) applied once in the group, nothing else applied, every other
// decision a duplicate, each copy sent again found duplicate at least once
// by every member; and the meter's sums exact.
func checkGroupSparkplug(t *testing.T, d *daemon, recs []engine.AuditRecord, e *spEdge) {
	t.Helper()
	sent := e.Sent()
	truth := make(map[spKey]spSent, len(sent))
	for _, m := range sent {
		truth[m.spKey] = m
	}
	_, dups := spOutcomes(t, recs, truth)
	copies, n := e.Copies()
	for k, c := range copies {
		if dups[k] < c {
			t.Errorf("%s: %d duplicates in the group for %d copies sent", k, dups[k], c)
		}
	}
	t.Logf("Sparkplug: %d messages acknowledged, %d copies, %d records in the group", len(sent), n, len(recs))
	checkMeter(t, d, sent)
}

// otlpReceiver is an OTLP/HTTP log receiver: it keeps the audit record of
// each log record, in arrival order.
type otlpReceiver struct {
	srv    *httptest.Server
	refuse atomic.Bool // answer 503, keeping nothing
	mu     sync.Mutex
	recs   []engine.AuditRecord
}

// Refuse makes the receiver answer 503 to every request, or accept again.
func (o *otlpReceiver) Refuse(on bool) { o.refuse.Store(on) }

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	o := &otlpReceiver{}
	o.srv = httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *otlpReceiver) URL() string { return o.srv.URL }

func (o *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if o.refuse.Load() {
		http.Error(w, "refusing", http.StatusServiceUnavailable)
		return
	}
	var req collogs.ExportLogsServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var recs []engine.AuditRecord
	for _, rl := range req.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				var rec engine.AuditRecord
				if err := json.Unmarshal([]byte(lr.Body.GetStringValue()), &rec); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				recs = append(recs, rec)
			}
		}
	}
	o.mu.Lock()
	o.recs = append(o.recs, recs...)
	o.mu.Unlock()
	b, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// Records returns what the receiver kept, in arrival order.
func (o *otlpReceiver) Records() []engine.AuditRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.recs)
}
