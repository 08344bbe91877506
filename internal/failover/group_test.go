package failover

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// shareGroup is the MQTT share group of TestGroupFailover's members.
const shareGroup = "g1"

// receiveMaximum bounds what Mosquitto sends a frozen member; it queues the
// rest, and so saves it, unsent, in the standby's copy and loses it with
// the primary.
const receiveMaximum = 100

// TestGroupFailover is a consumer group through everything at once: three
// `replayguard run` members in one MQTT share group, each under its own
// client id (and so member id), on one shared store, consume a feed of five
// sequenced sources and four meters on an id route, from which Mosquitto
// deals each member a part. During the feed, at random points:
//
//   - every member is frozen while the primary autosaves their backlog: a
//     copy of that save becomes the standby's database;
//   - later the meters stop (all of theirs applied), the members are frozen
//     again, the primary acknowledges messages to the publisher that it
//     never delivers, and dies; the standby starts from the copy on another
//     port and replays what the group applied since, each message to the
//     member whose session held it;
//   - a gateway sends again the last messages of every source and meter,
//     which the broker deals round-robin: most copies reach another member
//     than the original did;
//   - two members are killed with SIGKILL and started again at once (the
//     store hands a dead process's lease on this host to its successor);
//   - the store's server is killed and started again: every member must
//     report not ready meanwhile and resume by itself;
//   - the third member is killed while its outbox holds entries (the
//     downstream broker frozen a moment before) and kept down until
//     another member, once the dead one's lease has expired, has
//     delivered every one of them; then it starts again.
//
// Every applied message of both routes is forwarded to a downstream
// broker that does not fail, where a subscriber records every copy; at
// the end a few applied messages of each route are sent again with
// another content, conflicts that must not be forwarded.
//
// Afterwards, read through the CLI with a member's configuration as an
// operator would: every chain intact, every record naming a member; each
// sequence and each id applied once (the entity counts), every message the
// broker acknowledged applied or, on the sequenced route, inside a reported
// gap; replays found duplicate on both routes, some by another member than
// the one that applied the message. Downstream (checkForward): every
// applied event received under its key, nothing else, byte for byte,
// first copies in commit order per member and source. On PostgreSQL both
// routes also run a sql effect into tables of the user's own: each message
// applied must be exactly one row there, with its key; a message violating
// the user's unique constraint, published while the members are frozen,
// must be quarantined with SQLSTATE 23505 each time it is decided, its raw
// bytes held, beside messages committed in its transaction that were
// applied and have their rows (and, never applied, it is never
// forwarded). A member's counters restart with its process, so received =
// decided is checked over each member's last run, with an audit record
// added for every decision (and at most a batch more for each write the
// store failed to confirm, which may have landed); the runs before a kill
// are covered by the audit against the publishers' record.
func TestGroupFailover(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { groupFailover(t, kind) })
	}
}

// storeServer is a shared store's server, which a test kills and starts
// again on the same data.
type storeServer interface {
	URL() string
	Kill()
	Restart()
}

func startStoreServer(t *testing.T, kind string) storeServer {
	t.Helper()
	switch kind {
	case config.StorePostgres:
		return testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	case config.StoreRedis:
		return testbroker.StartRedis(t, testbroker.RedisOptions{})
	}
	t.Fatalf("no shared store of kind %q", kind)
	return nil
}

func groupFailover(t *testing.T, kind string) {
	skipShort(t)
	rng := rand.New(rand.NewPCG(seed(t), 5))
	const members, perSource, rate, meterRate = 3, 1200, 300, 60
	sources, meters := sourceNames(5), meterNames(4)
	lone := names("lone", 24) // one message each, around the message violating the user's constraint
	server := startStoreServer(t, kind)
	primary := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	standbyPort := testbroker.FreePort(t)
	brokers := []string{primary.URL(), fmt.Sprintf("tcp://127.0.0.1:%d", standbyPort)}
	var sql *sqlRun // on PostgreSQL both routes also write into the user's own tables
	if kind == config.StorePostgres {
		sql = startSQL(t, server.URL(), brokers)
	}
	down := startDownstream(t)
	g := startGroup(t, members, brokers, fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL()), sql != nil, down.Broker.URL())
	pub, meterPub := newPublisher(t, brokers, 20), newMeterPublisher(t, brokers, 20)
	total := float64(perSource * len(sources))

	// The feed runs until every event is done and perSource of each
	// source are out: a member or the store fails while messages flow.
	f := startFeeder(t, pub, sources, 0, rate)
	mf := startFeeder(t, meterPub, meters, 0, meterRate)
	var snap string
	type event struct {
		at   float64 // fraction of the sequenced feed published
		what string
		do   func() string
	}
	snapAt := uniform(rng, 0.1, 0.2)
	events := []event{
		{snapAt, "members frozen; the primary autosaves their backlog: the standby's copy;", func() string {
			// What the broker queues for a member is in the copy, unsent:
			// the standby sends it again with DUP=0.
			g.Pause()
			if sql != nil {
				// Queued in the middle of the frozen members' backlog,
				// about a hundred messages before it and two hundred
				// after it in its member's queue, it reaches the member
				// among them, and is decided in a batch with others
				// whichever member the broker deals it to and wherever
				// the batches are cut; the standby replays it. Published
				// first thing after the freeze, it could come last in
				// what a member had read when it took a batch. The
				// resumed members contend for every source's and
				// meter's rows, so a batch commits what touches rows
				// another member holds in a later part: the lone
				// meters' messages around it touch rows no other
				// member does, and commit in its part.
				f.waitProgress(t, f.Attempted()+300)
				sql.PublishRefusedAmong(t, meterPub, lone)
			}
			f.waitProgress(t, f.Attempted()+600)
			snap = primary.SnapshotDB()
			saved := lastSequences(pub)
			g.Resume()
			// Replays are of applied messages only once the group has
			// caught up with the copy.
			g.members[0].WaitApplied(saved)
			return "caught up with the copy"
		}},
		{snapAt + uniform(rng, 0.15, 0.25), "meters stopped; members frozen; primary killed; standby started from the copy;", func() string {
			// An id route cannot show a loss: the meters stop, and what
			// they published is applied, before the primary can lose any.
			mf.Stop()
			g.WaitMeters(meterPub)
			dups := g.Duplicates()
			// What the primary queues for the frozen members was
			// acknowledged to the publisher and dies with it: gaps.
			g.Pause()
			f.waitProgress(t, f.Attempted()+int64(600+rng.IntN(400)))
			primary.Kill()
			gone := randDuration(rng, 0, 300*time.Millisecond)
			time.Sleep(gone)
			testbroker.StartFromSnapshotWith(t, snap, testbroker.MosquittoOptions{Port: standbyPort})
			g.Resume()
			g.WaitReady()
			waitFor(t, "the standby's first replays", 30*time.Second, func() bool { return g.Duplicates() > dups })
			replays := waitStable(t, "the standby's replays", 500*time.Millisecond, time.Minute, g.Duplicates) - dups
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := meterPub.AwaitConnection(ctx); err != nil {
				t.Fatalf("meter publisher not connected to the standby: %v", err)
			}
			mf = startFeeder(t, meterPub, meters, 0, meterRate)
			return fmt.Sprintf("standby up %v after the kill; the group found %d replays duplicate; meters resumed", gone, replays)
		}},
		{uniform(rng, 0.05, 0.95), "store server killed;", func() string {
			server.Kill()
			began := time.Now()
			g.WaitNotReady()
			noticed := time.Since(began)
			down := randDuration(rng, 200*time.Millisecond, time.Second)
			time.Sleep(down)
			server.Restart()
			began = time.Now()
			g.WaitReady()
			return fmt.Sprintf("every member not ready within %v; restarted after %v more; every member ready %v later",
				noticed.Round(time.Millisecond), down, time.Since(began).Round(time.Millisecond))
		}},
	}
	events = append(events, event{uniform(rng, 0.05, 0.95), "a gateway sends again the last 40 acknowledged messages of every source and meter;", func() string {
		// Mosquitto deals the copies round-robin too: most reach another
		// member than the original did, before or after it.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		copies := [][]testbroker.Published{lastAcked(pub, 40), lastAcked(meterPub, 40)}
		acked := pub.Republish(ctx, copies[0]) + meterPub.Republish(ctx, copies[1])
		return fmt.Sprintf("%d of %d copies acknowledged", acked, len(copies[0])+len(copies[1]))
	}})
	perm := rng.Perm(members)
	dead := g.members[perm[2]]
	events = append(events, event{uniform(rng, 0.02, 0.08), fmt.Sprintf("member %s killed with entries in its outbox, kept down;", member(dead)), func() string {
		return g.KillUntilTakenOver(dead, down)
	}})
	for _, i := range perm[:2] {
		d := g.members[i]
		events = append(events, event{uniform(rng, 0.05, 0.95), fmt.Sprintf("member %s killed;", member(d)), func() string {
			g.Kill(d)
			down := randDuration(rng, 0, 300*time.Millisecond)
			time.Sleep(down)
			began := time.Now()
			d.Start()
			d.WaitReady()
			return fmt.Sprintf("started again after %v, ready %v later", down, time.Since(began).Round(time.Millisecond))
		}})
	}
	slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(a.at, b.at) })

	began := time.Now()
	for _, e := range events {
		f.waitProgress(t, int64(e.at*total))
		time.Sleep(randDuration(rng, 0, 50*time.Millisecond))
		t.Logf("%2.0f%% of the feed (%d published): %s %s", e.at*100, f.Attempted(), e.what, e.do())
	}
	f.waitProgress(t, int64(total))
	f.Stop()
	mf.Stop()
	t.Logf("feed published in %v", time.Since(began).Round(time.Millisecond))
	publishTail(t, pub, sources, 20)
	g.members[0].WaitHigh(lastSequences(pub))
	g.WaitMeters(meterPub)
	fd := feed{Pub: pub, Sources: sources, Meters: meterPub, MeterNames: meters}
	if sql != nil {
		fd.MeterNames = slices.Concat(meters, lone)
	}
	conflicts := firstOf(sources, 2)
	for _, m := range meters {
		for n := int64(1); n <= 2; n++ {
			conflicts = append(conflicts, conflicting{Route: idRouteName, Key: seqKey{m, n}, Topic: meterTopic(m)})
		}
	}
	fd.Conflicts = sendConflicts(t, pub, meterPub, conflicts, g.Conflicts)
	waitStable(t, "the audit positions", time.Second, time.Minute, g.Positions)
	waitFor(t, "empty outboxes", time.Minute, func() bool { return g.Outboxes() == 0 })
	for _, d := range g.members {
		// A write the store did not confirm may have landed: a batch
		// holds at most receiveMaximum messages.
		checkRun(t, d, g.from[d], receiveMaximum*d.Metrics()["replayguard_store_update_failures_total"])
	}
	g.Stop()

	if sql != nil {
		fd.SetAside = refusedMeter
	}
	r := g.verify(t, fd)
	down.WaitKeys(t, appliedKeys(r.Records))
	checkForward(t, r.Records, down.Sub.Messages(), fd)
	if sql != nil {
		var held []engine.QuarantineEntry
		err := openStore(t, g.members[0].setup).ScanQuarantine(context.Background(), func(q engine.QuarantineEntry) error {
			held = append(held, q)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sql.check(t, r, held)
	}
	t.Logf("gaps: %s", r.gapsString())
	t.Logf("%d publishes failed while no broker answered", f.failed.Load())
	g.checkShared(t, r, sources)
	r.checkReplays(t, true)
	if r.IDDuplicates == 0 {
		t.Error("no replay of an applied id was seen: the id route's duplicates were not exercised")
	}
	if r.Lost == 0 {
		t.Error("the primary lost nothing it had acknowledged: the gaps were not exercised")
	}
	if r.IDUnacked != 0 {
		t.Errorf("%d meter publishes unacknowledged: the meters publish only while a broker is up", r.IDUnacked)
	}
}

// lastAcked returns the last n acknowledged messages of each of pub's
// sources.
func lastAcked(pub *testbroker.Publisher, n int) []testbroker.Published {
	var out []testbroker.Published
	acked := pub.Acked() // by source, then sequence
	for i, m := range acked {
		if i+n >= len(acked) || acked[i+n].Source != m.Source {
			out = append(out, m)
		}
	}
	return out
}

// group is the members of one share group, `replayguard run` each, on one
// shared store.
type group struct {
	t       testing.TB
	members []*daemon
	from    map[*daemon]uint64 // the member's chain head when its last run started
}

// startGroup starts n members consuming brokers in share group g1 on the
// shared store the YAML flow mapping store names, each under a client id of
// its own and no store.member, which then defaults to the client id, and
// forwarding to the broker downstream, and waits until every one is ready.
// With sql, the routes have sql effects.
func startGroup(t testing.TB, n int, brokers []string, store string, sql bool, downstream string) *group {
	t.Helper()
	return startGroupWith(t, n, brokers, setupOptions{Store: store, SQL: sql, Downstream: downstream})
}

// startGroupWith is startGroup with the members' configuration varied by
// o (its API, ShareGroup, IDRoute and ReceiveMaximum are startGroup's).
func startGroupWith(t testing.TB, n int, brokers []string, o setupOptions) *group {
	t.Helper()
	g := &group{t: t, from: map[*daemon]uint64{}}
	o.API, o.ShareGroup, o.IDRoute, o.ReceiveMaximum = true, shareGroup, true, receiveMaximum
	for range n {
		g.members = append(g.members, startDaemon(t, newSetupWith(t, brokers, o)))
	}
	g.WaitReady()
	return g
}

// member is a member's id: its client id, as store.member is unset.
func member(d *daemon) string { return d.setup.Config.MQTT.ClientID }

// WaitReady waits until every member is ready.
func (g *group) WaitReady() {
	g.t.Helper()
	for _, d := range g.members {
		d.WaitReady()
	}
}

// WaitNotReady waits until every member reports not ready.
func (g *group) WaitNotReady() {
	g.t.Helper()
	for _, d := range g.members {
		waitFor(g.t, fmt.Sprintf("member %s reporting not ready", member(d)), 15*time.Second, func() bool {
			return !d.ok("/readyz")
		})
	}
}

// Pause freezes every member; Resume continues them.
func (g *group) Pause() {
	g.t.Helper()
	for _, d := range g.members {
		d.Pause()
	}
}

func (g *group) Resume() {
	g.t.Helper()
	for _, d := range g.members {
		d.Resume()
	}
}

// Kill kills d with SIGKILL, checks the chain it left and notes its head.
func (g *group) Kill(d *daemon) {
	g.t.Helper()
	d.Kill()
	waitDisconnected(g.t, d.setup, member(d))
	g.from[d] = chainHead(g.t, d.setup, member(d))
}

// Stop stops every member with SIGTERM.
func (g *group) Stop() {
	g.t.Helper()
	for _, d := range g.members {
		d.Stop()
	}
}

// Duplicates sums the duplicates the members decided in their current runs.
func (g *group) Duplicates() uint64 {
	g.t.Helper()
	n := 0.0
	for _, d := range g.members {
		n += d.Metrics()["replayguard_decisions_total/duplicate"]
	}
	return uint64(n)
}

// Conflicts sums the conflicts the members decided in their current runs.
func (g *group) Conflicts() float64 {
	g.t.Helper()
	n := 0.0
	for _, d := range g.members {
		n += d.Metrics()["replayguard_decisions_total/conflict"]
	}
	return n
}

// Outboxes sums the pending entries of the members' outboxes.
func (g *group) Outboxes() float64 {
	g.t.Helper()
	n := 0.0
	for _, d := range g.members {
		n += d.Metrics()["replayguard_outbox_entries"]
	}
	return n
}

// KillUntilTakenOver freezes the downstream broker until d has applied,
// and so written to its outbox, messages its drainer cannot deliver (a
// PUBACK sent before the freeze may still arrive, one sent after cannot),
// kills d, lets the downstream go on, and waits, d down, until its outbox
// is empty and every entry it held at the kill has been received
// downstream: delivered by another member, which may claim a member's
// outbox only once that member's lease has expired. Then d starts again.
func (g *group) KillUntilTakenOver(d *daemon, down *downstream) string {
	g.t.Helper()
	const atLeast = 20
	down.Broker.Pause()
	applied := func() float64 {
		m := d.Metrics()
		return m["replayguard_decisions_total/applied"] + m["replayguard_decisions_total/applied_late"]
	}
	frozen := applied()
	waitFor(g.t, fmt.Sprintf("member %s applying %d messages", member(d), atLeast), 10*time.Second, func() bool {
		return applied() >= frozen+atLeast
	})
	g.Kill(d)
	st, err := app.OpenStore(d.setup.Config.Store, true, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	defer st.Close()
	pending := outboxKeys(g.t, st, member(d))
	down.Broker.Resume()
	if len(pending) < atLeast {
		g.t.Fatalf("member %s killed with %d entries in its outbox, after applying %d while the downstream was frozen",
			member(d), len(pending), atLeast)
	}
	killed := time.Now()
	for len(outboxKeys(g.t, st, member(d))) > 0 || !down.hasAll(pending) {
		if time.Since(killed) > time.Minute {
			g.t.Fatalf("member %s's outbox not delivered by another member within a minute of its death", member(d))
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(killed)
	d.Start()
	d.WaitReady()
	return fmt.Sprintf("%d entries pending at the kill; its outbox empty and all of them received downstream %v later; started again",
		len(pending), took.Round(time.Millisecond))
}

// outboxKeys returns the keys of member's pending outbox entries in st.
func outboxKeys(t testing.TB, st app.Store, member string) map[string]bool {
	t.Helper()
	ob, ok := st.(engine.OutboxStore)
	if !ok {
		t.Fatalf("store %T keeps no outbox", st)
	}
	out := map[string]bool{}
	for after := uint64(0); ; {
		page, err := ob.Outbox(context.Background(), member, after, 1000)
		if err != nil {
			t.Fatalf("read the outbox of member %s: %v", member, err)
		}
		if len(page) == 0 {
			return out
		}
		for _, e := range page {
			out[e.Key.String()] = true
		}
		after = page[len(page)-1].ID
	}
}

// Positions sums the members' audit head positions.
func (g *group) Positions() uint64 {
	g.t.Helper()
	n := uint64(0)
	for _, d := range g.members {
		n += d.Position()
	}
	return n
}

// WaitMeters waits until the group's state counts, over all meters, as many
// applied ids as the broker acknowledged to pub.
func (g *group) WaitMeters(pub *testbroker.Publisher) {
	g.t.Helper()
	want := int64(len(pub.Acked()))
	waitFor(g.t, fmt.Sprintf("%d meter messages applied", want), time.Minute, func() bool {
		var state map[string]map[string]json.Number
		g.members[0].getJSON("/api/v1/state", &state)
		n := int64(0)
		for name, fields := range state {
			if strings.HasPrefix(name, meterEntity) {
				c, _ := fields[countField].Int64()
				n += c
			}
		}
		return n >= want
	})
}

// chainHead checks the audit chain a stopped or killed member left in the
// shared store s names and returns its head position (0: no chain yet).
func chainHead(t testing.TB, s *setup, member string) uint64 {
	t.Helper()
	ctx := context.Background()
	st, err := app.OpenStore(s.Config.Store, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs, ok := st.(engine.ChainScanner)
	if !ok {
		t.Fatalf("store kind %s lists no members' chains", s.Config.Store.Kind)
	}
	chains, err := cs.Chains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chains {
		if c.Member != member {
			continue
		}
		var base engine.AuditHead // what audit retention archived, if it did
		if k := st.Capabilities().Keeper; k != nil {
			if base, err = k.ChainBase(ctx, member); err != nil {
				t.Fatal(err)
			}
		}
		v := audit.NewVerifierFrom(base, member)
		if err := cs.ScanChain(ctx, member, base.Position+1, v.Check); err != nil {
			t.Fatalf("member %s: audit chain broken by a kill, after %d records: %v", member, v.Count(), err)
		}
		if v.Head() != c.Head {
			t.Fatalf("member %s: chain ends at %d records, its head is at %d", member, v.Count(), c.Head.Position)
		}
		return c.Head.Position
	}
	return 0
}

var chainLine = regexp.MustCompile(`^member (\S+): audit chain intact: (\d+) records$`)

// verify reads the stopped group's store through the CLI, each command with
// another member's configuration: `audit verify` must find every member's
// chain intact, `audit export` list every chain's records, each naming its
// member, and verify again from the file; `state --json` and `sources --json`
// give the state the records are checked against with checkFeed.
func (g *group) verify(t testing.TB, f feed) *result {
	t.Helper()
	at := func(i int) *daemon { return g.members[i%len(g.members)] }
	chains := map[string]uint64{}
	total := uint64(0)
	lines := strings.Split(strings.TrimSuffix(at(0).run("audit", "verify"), "\n"), "\n")
	for _, l := range lines[:len(lines)-1] {
		m := chainLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("audit verify printed %q, not a member's chain", l)
		}
		n, _ := strconv.ParseUint(m[2], 10, 64)
		chains[m[1]], total = n, total+n
	}
	if want := fmt.Sprintf("audit chains intact: %d members, %d records", len(g.members), total); lines[len(lines)-1] != want {
		t.Errorf("audit verify ends with %q, want %q", lines[len(lines)-1], want)
	}
	for _, d := range g.members {
		if chains[member(d)] == 0 {
			t.Errorf("audit verify lists no records of member %s: %v", member(d), chains)
		}
	}

	export := at(1).run("audit", "export")
	var obs observed
	perMember := map[string]uint64{}
	sc := bufio.NewScanner(strings.NewReader(export))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var rec engine.AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("audit export: %v: %s", err, sc.Bytes())
		}
		obs.Records = append(obs.Records, rec)
		perMember[rec.Member]++
	}
	if !maps.Equal(perMember, chains) {
		t.Errorf("audit export has records per member %v, audit verify checked %v", perMember, chains)
	}
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(file, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := at(2).run("audit", "verify", "--file", file), fmt.Sprintf("audit chain intact: %d records\n", total); got != want {
		t.Errorf("audit verify --file of the export: %q, want %q", got, want)
	}

	var state map[string]map[string]json.Number
	dec := json.NewDecoder(strings.NewReader(at(2).run("state", "--json")))
	dec.UseNumber()
	if err := dec.Decode(&state); err != nil {
		t.Fatalf("state --json: %v", err)
	}
	for name, fields := range state {
		e := engine.EntityState{Name: name, Fields: engine.Fields{}}
		for k, v := range fields {
			e.Fields.Set(k, engine.FieldValue{Kind: engine.KindNumber, Num: v.String()})
		}
		obs.Entities = append(obs.Entities, e)
	}
	if err := json.Unmarshal([]byte(at(0).run("sources", "--json")), &obs.Sources); err != nil {
		t.Fatalf("sources --json: %v", err)
	}
	return checkFeed(t, obs, f)
}

// checkShared checks that the feed was shared: every member applied
// messages, each source's sequences were applied by more than one member
// (so its window was decided on by several), and logs how many replays a
// member found duplicate of a message another member had applied.
func (g *group) checkShared(t testing.TB, r *result, sources []string) {
	t.Helper()
	appliedBy := map[string]string{} // route/source#seq → member
	bySource := map[string]map[string]bool{}
	perMember := map[string]map[string]int{}
	for _, rec := range r.Records {
		if perMember[rec.Member] == nil {
			perMember[rec.Member] = map[string]int{}
		}
		perMember[rec.Member][rec.Outcome]++
		k, _, err := r.identify(rec)
		if err != nil || rec.Outcome == engine.Duplicate.String() {
			continue
		}
		appliedBy[rec.Route+"/"+k.String()] = rec.Member
		if rec.Route == routeName {
			if bySource[k.source] == nil {
				bySource[k.source] = map[string]bool{}
			}
			bySource[k.source][rec.Member] = true
		}
	}
	cross := 0
	for _, rec := range r.Records {
		if k, _, err := r.identify(rec); err == nil && rec.Outcome == engine.Duplicate.String() {
			if by, ok := appliedBy[rec.Route+"/"+k.String()]; ok && by != rec.Member {
				cross++
			}
		}
	}
	for _, d := range g.members {
		t.Logf("member %s: %v", member(d), perMember[member(d)])
		if perMember[member(d)][engine.Applied.String()] == 0 {
			t.Errorf("member %s applied nothing", member(d))
		}
	}
	for _, src := range sources {
		if len(bySource[src]) < 2 {
			t.Errorf("source %s was applied by members %v only: its window was not shared", src, bySource[src])
		}
	}
	t.Logf("%d of %d duplicates decided by another member than the one that applied the message", cross, r.Duplicates)
	if cross == 0 {
		t.Error("no member found a message duplicate that another member had applied: the group's shared decisions were not exercised")
	}
}
