package failover

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// failoverAuditTemplate is the audit section of
// TestStoreFailoverLosesNoFeature's members: retention keeps a few
// records of each chain in the store and archives the rest into one
// archive the members share; each member streams to its own file.
// Arguments: archive, file.
const failoverAuditTemplate = `audit:
  archive: %q
  retention: {max_records: 100, interval: 250ms}
  sinks:
    - {name: file, kind: file, path: %q}
`

// TestStoreFailoverLosesNoFeature is TestStoreFailover with every feature
// a group member has: two `replayguard run` members in one share group,
// each with the sequenced route and the id route (both with a sql effect
// into the user's tables on PostgreSQL, and a forward effect to a webhook),
// a Sparkplug edge, audit retention with a small max_records into one
// archive, and a file sink. Mid-feed the store's replica stops receiving,
// the primary is killed with SIGKILL and the replica promoted.
//
// Afterwards every feature must hold on the promoted store: `audit verify
// --archive` finds each chain intact, archive and store as one; each file
// sink holds every record of its member's chain, and a record the store
// lost only before the one that stands at its position; the user's tables
// hold one row per applied message; the webhook received every applied
// message's key, and no key of a message not applied, and each member's
// outbox drains; the Sparkplug edge's messages are applied once each in
// the group, the meter's sums exact (a delivery a member had found
// duplicate, held by its recovery as the rules say, is counted apart).
func TestStoreFailoverLosesNoFeature(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { storeFailoverFeatures(t, kind) })
	}
}

// webhookReceiver counts the copies of each idempotency key it is posted.
type webhookReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys map[string]int
}

func startWebhookReceiver(t *testing.T) *webhookReceiver {
	w := &webhookReceiver{keys: map[string]int{}}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.keys[r.Header.Get("Idempotency-Key")]++
		w.mu.Unlock()
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *webhookReceiver) Keys() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.keys))
	for k, n := range w.keys {
		out[k] = n
	}
	return out
}

func storeFailoverFeatures(t *testing.T, kind string) {
	skipShort(t)
	rng := rand.New(rand.NewPCG(seed(t), 23))
	const members, perSource, rate, meterRate = 2, 600, 200, 60
	// The id route's meters are not the Sparkplug edge's (meter/m1).
	sources, meters := sourceNames(3), names("e", 3)
	server := startReplicated(t, kind, false)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	brokers := []string{broker.URL()}
	hook := startWebhookReceiver(t)
	sql := kind == config.StorePostgres
	var user *sqlRun
	if sql {
		user = startSQL(t, server.url, brokers)
	}
	archive := t.TempDir()
	g := &group{t: t, from: map[*daemon]uint64{}}
	files := map[string]string{}
	for range members {
		file := filepath.Join(t.TempDir(), "audit.jsonl")
		s := newSetupWith(t, brokers, setupOptions{API: true, Store: server.store, ShareGroup: shareGroup, IDRoute: true,
			SQL: sql, Forward: fmt.Sprintf("{webhook: %q}", hook.srv.URL+"/hook"), Sparkplug: true,
			Audit: fmt.Sprintf(failoverAuditTemplate, archive, file)})
		d := startDaemon(t, s)
		g.members = append(g.members, d)
		files[member(d)] = file
	}
	g.WaitReady()

	pub, meterPub := newPublisher(t, brokers, 20), newMeterPublisher(t, brokers, 20)
	edge := newSpEdge(t, brokers, spGroup, spNode, 255)
	edge.connect()
	edge.birth(spFirstBirth)
	total := int64(perSource * len(sources))
	f := startFeeder(t, pub, sources, 0, rate)
	mf := startFeeder(t, meterPub, meters, 0, meterRate)
	sp := startSpFeederEvery(t, edge, spPeriod)

	f.waitProgress(t, int64(uniform(rng, 0.2, 0.4)*float64(total)))
	server.cutOff()
	f.waitProgress(t, f.Attempted()+int64(300+rng.IntN(200)))
	heads := map[string]uint64{}
	for _, d := range g.members {
		heads[member(d)] = d.Position()
	}
	server.failOver()
	failed := time.Now()
	g.WaitReady()
	t.Logf("%d published: the replica cut off, the primary killed at member heads %v, the replica promoted; every member ready %v later",
		f.Attempted(), heads, time.Since(failed).Round(time.Millisecond))

	f.waitProgress(t, total)
	f.Stop()
	mf.Stop()
	sp.stop()
	publishTail(t, pub, sources, 20)
	last := edge.Sent()[len(edge.Sent())-1].Seq
	edge.drop()
	g.members[0].WaitHigh(lastSequences(pub))
	g.WaitMeters(meterPub)
	waitSpHigh(t, g.members[0], "255", last)
	waitStable(t, "the audit positions", time.Second, time.Minute, g.Positions)
	chains := g.WaitSinks(files, nil)
	for _, d := range g.members {
		waitFor(t, fmt.Sprintf("member %s's outbox drained", member(d)), time.Minute, func() bool {
			return d.Metrics()["replayguard_outbox_entries"] == 0
		})
	}
	var losses, recovered float64
	for _, d := range g.members {
		m := d.Metrics()
		losses += m["replayguard_store_losses_total"]
		recovered += m["replayguard_store_recovered_total"]
	}
	g.Stop()
	t.Logf("losses found %.0f, deliveries decided again from the journals %.0f", losses, recovered)
	if losses == 0 || recovered == 0 {
		t.Errorf("the promoted replica lost nothing the members had acknowledged (%.0f losses, %.0f recovered): the loss was not exercised", losses, recovered)
	}

	verifyArchive(t, g, archive, chains)
	full := fullChains(t, g.members[0].setup, archive, chains)
	checkFailoverSink(t, fileStreams(t, files), full)
	var obs observed
	var spRecs []engine.AuditRecord
	heldAgain := 0
	for _, m := range slices.Sorted(maps.Keys(full)) {
		for _, r := range full[m] {
			if r.Route == spRouteName && r.Outcome == engine.Quarantined.String() && strings.Contains(r.Reason, "not applied when first decided") {
				// Another member applied it; this one found it duplicate, and
				// its recovery ran before the other's: held, as the rules say.
				heldAgain++
			} else if r.Route == spRouteName {
				spRecs = append(spRecs, r)
			} else {
				obs.Records = append(obs.Records, r)
			}
		}
	}
	obs.Entities, obs.Sources = stateOf(t, g.members[1], spEntity)
	r := checkFeed(t, obs, feed{Pub: pub, Sources: sources, Meters: meterPub, MeterNames: meters})
	if r.Lost != 0 {
		t.Errorf("%d acknowledged messages only inside gaps: the broker never failed, so nothing may be missing", r.Lost)
	}
	if sql {
		checkUserRows(t, user, r)
	}
	checkWebhookKeys(t, hook.Keys(), obs.Records)
	t.Logf("Sparkplug: %d deliveries a member had found duplicate held by its recovery", heldAgain)
	checkGroupSparkplug(t, g.members[1], spRecs, edge)
}

// checkFailoverSink checks the file sinks after a store failover: every
// record of every chain delivered; a record that is not the chain's only
// at a position the chain's own record was delivered at after it (the
// store lost it, and the record that stands there now came later).
func checkFailoverSink(t *testing.T, streams [][]engine.AuditRecord, chains map[string][]engine.AuditRecord) {
	t.Helper()
	seen := map[string]map[uint64]bool{}
	stale := 0
	for i, s := range streams {
		for j, r := range s {
			chain := chains[r.Member]
			if seen[r.Member] == nil {
				seen[r.Member] = map[uint64]bool{}
			}
			if r.Position > 0 && r.Position <= uint64(len(chain)) && chain[r.Position-1].Hash == r.Hash {
				seen[r.Member][r.Position] = true
				continue
			}
			// Not the chain's: the chain's record must follow in the stream.
			if !slices.ContainsFunc(s[j+1:], func(o engine.AuditRecord) bool {
				return o.Member == r.Member && o.Position == r.Position && o.Position <= uint64(len(chain)) && chain[o.Position-1].Hash == o.Hash
			}) {
				t.Errorf("file sink (stream %d): record %d of member %s is not the chain's, and the chain's record at %d never follows it",
					i, r.Position, r.Member, r.Position)
			}
			stale++
		}
	}
	missing := 0
	for m, chain := range chains {
		for p := range uint64(len(chain)) {
			if !seen[m][p+1] {
				if missing < 5 {
					t.Errorf("file sink: member %s's record %d never delivered", m, p+1)
				}
				missing++
			}
		}
	}
	t.Logf("file sinks: %d records the store lost delivered before the ones standing there; %d records of the chains never delivered", stale, missing)
}

// checkUserRows checks the user's tables: one row per applied message,
// with its key.
func checkUserRows(t *testing.T, s *sqlRun, r *result) {
	t.Helper()
	applied := map[string]string{}
	for _, rec := range r.Records {
		if rec.Outcome != engine.Applied.String() && rec.Outcome != engine.AppliedLate.String() {
			continue
		}
		if k, _, err := r.identify(rec); err == nil {
			applied[rec.Route+"/"+k.String()] = rec.Key.String()
		}
	}
	rows := s.rows(t)
	bad := 0
	for id, keys := range rows {
		if want, ok := applied[id]; !ok || len(keys) != 1 || keys[0] != want {
			if bad < 5 {
				t.Errorf("user table rows of %s: keys %v; the audit has it applied: %v (key %s)", id, keys, ok, want)
			}
			bad++
		}
	}
	for id := range applied {
		if rows[id] == nil {
			if bad < 10 {
				t.Errorf("%s applied, and no row of it in the user's table", id)
			}
			bad++
		}
	}
	t.Logf("user tables: %d messages with rows, %d applied, %d wrong", len(rows), len(applied), bad)
}

// checkWebhookKeys checks what the webhook received: every applied
// message's key, and no key that no applied record holds.
func checkWebhookKeys(t *testing.T, got map[string]int, records []engine.AuditRecord) {
	t.Helper()
	want := map[string]bool{}
	for _, r := range records {
		if applies(r.Outcome) && r.Route != spRouteName {
			want[r.Key.String()] = true
		}
	}
	copies, missing, foreign := 0, 0, 0
	for k, n := range got {
		copies += n
		if !want[k] {
			foreign++
		}
	}
	for k := range want {
		if got[k] == 0 {
			missing++
		}
	}
	t.Logf("webhook: %d keys applied, %d distinct keys received in %d posts; %d applied keys never received, %d received keys never applied",
		len(want), len(got), copies, missing, foreign)
	if missing != 0 || foreign != 0 {
		t.Errorf("webhook: %d applied keys never received, %d received keys that no applied record holds", missing, foreign)
	}
}
