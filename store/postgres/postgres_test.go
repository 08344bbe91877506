package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/internal/shared"
	"github.com/replayguard/replayguard/store/postgres"
	"github.com/replayguard/replayguard/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testbroker.CleanupPostgres()
		os.Exit(code)
	}))
}

var schemas atomic.Int64

// group is one group store: a fresh schema on srv.
type group struct {
	t      *testing.T
	url    string
	schema string
}

func newGroup(t *testing.T, url string) *group {
	return &group{t: t, url: url, schema: "rg_test_" + strconv.FormatInt(schemas.Add(1), 10)}
}

func (g *group) options(member string) postgres.Options {
	return postgres.Options{URL: g.url, Member: member, Schema: g.schema, Logger: nil}
}

// open opens a handle closed at the test's end.
func (g *group) open(member string) (*postgres.Store, error) {
	return g.openWith(g.options(member))
}

func (g *group) openWith(o postgres.Options) (*postgres.Store, error) {
	s, err := postgres.Open(g.t.Context(), o)
	if err != nil {
		return nil, err
	}
	g.t.Cleanup(func() { s.Close() })
	return s, nil
}

func (g *group) mustOpen(member string) *postgres.Store {
	g.t.Helper()
	s, err := g.open(member)
	if err != nil {
		g.t.Fatalf("open member %q: %v", member, err)
	}
	return s
}

// run runs sql on the server, outside any store handle.
func run(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t *testing.T, url, sql string, args ...any) int64 {
	t.Helper()
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int64
	if err := c.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestStore runs the conformance suite and the backend's own tests on one
// server, each on a schema of its own.
func TestStore(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	url := pg.URL()
	t.Run("conformance", func(t *testing.T) {
		features := storetest.Features{Members: true, Durable: true,
			Kill:  func(s engine.Store) { postgres.Kill(s.(*postgres.Store)) },
			Stall: func(s engine.Store) { postgres.Stall(s.(*postgres.Store)) }}
		storetest.Run(t, features, func(t *testing.T) storetest.Open {
			g := newGroup(t, url)
			return func(member string) (engine.Store, error) {
				o := g.options(member)
				o.LeaseTTL = time.Second // the claim cases wait for leases to expire
				s, err := g.openWith(o)
				if err != nil {
					return nil, err
				}
				return s, nil
			}
		})
	})
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, g *group)
	}{
		{"the schema is created once by members opening at once", testSchemaConcurrent},
		{"a schema of version 1 is migrated, its rows kept", testSchemaMigrated},
		{"a schema of a newer version is refused", testSchemaNewer},
		{"a schema of version 9 is raised so that a build that cannot read a connection time refuses it", testSchemaRaisedForConnected},
		{"a schema of version 11 without the leases' share column is given it", testSchemaGivenTheShareColumn},
		{"a schema of version 11 is raised so that a build that cannot read a binary Sparkplug session refuses it", testSchemaRaisedForSparkplugRows},
		{"a schema of version 12 is raised to keep the session of each member's share", testSchemaRaisedForShareSessions},
		{"a schema of version 13 is raised to keep the share of each path of a member's", testSchemaRaisedForSharePaths},
		{"a schema of version 14 is raised to index the open quarantine entries by key and content", testSchemaRaisedForHeld},
		{"a schema of version 16 is raised to keep one open quarantine entry of a key and content indexed", testSchemaRaisedForUniqueHeld},
		{"an entry held before version 15 is found once the schema is raised to 18", testSchemaBackfillsHeld},
		{"the held values the raise to 18 computes are the engine's, byte for byte", testSchemaBackfillsHeldAsTheEngine},
		{"in a database not encoded as UTF8 the raise to 18 leaves the entries held before version 15 as they were", testSchemaBackfillsHeldInALatin1Database},
		{"a read-only open of an older schema says how to read it and how it is migrated", testSchemaOlderReadOnly},
		{"rows written as JSON before version 4 are read, and written back binary", testSchemaJSONRows},
		{"a schema the Go-string DDL created is migrated and opens, twice; its chains are kept", testSchemaGoStrings},
		{"the migrations create the tables, constraints and indexes the Go-string DDL and the later migrations did", testSchemaSameCatalog},
		{"a schema an earlier build's running member holds is not migrated, naming that member", testSchemaNotMigratedUnderARunningMember},
		{"a dead holder on this host is taken over at once", testLeaseDeadHolder},
		{"the chain of a member killed on this host is claimed by another at once", testChainOfAMemberKilledHereIsClaimedAtOnce},
		{"a stolen lease fences updates", testLeaseFenced},
		{"the lease is renewed in the background", testLeaseRenewed},
		{"a key another member inserted first is decided again", testLostKeyRace},
		{"a source another member is creating is waited for, and decided once", testCreatingSourceWaited},
		{"the rows an update claimed and did not write are dropped", testUnwrittenClaimsDropped},
		{"an update that may skip held rows names them and does not wait", testSkipHeld},
		{"an update that may skip held rows does not wait for a row written and not committed", testSkipHeldWritten},
		{"an update that may skip held rows does not wait for a row another update is creating", testSkipHeldClaimed},
		{"an update that skips held rows and is decided again counts them once", testSkipHeldCountedOnce},
		{"members creating the same rows in any order neither race nor deadlock", testCreatingRowsNoRaces},
		{"a batch that loses every race fails with ErrContention", testContention},
		{"a row lock held by another member is waited for and counted", testLockWait},
		{"keys are pruned by age and by count", testPrune},
		{"a new group's tables are analyzed once its keys are many", testAnalyzeNew},
		{"a failing analyze does not stop the pruning", testAnalyzeFailsPruneGoesOn},
		{"a context cancelled mid-update writes nothing", testCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newGroup(t, url)) })
	}
}

func testSchemaConcurrent(t *testing.T, g *group) {
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = g.open("m" + strconv.Itoa(i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.schema_version WHERE version = $1`, postgres.SchemaVersion); n != 1 {
		t.Fatalf("%d schema_version rows at version %d", n, postgres.SchemaVersion)
	}
	if n := count(t, g.url, `SELECT count(DISTINCT number) FROM `+g.schema+`.members`); n != 4 {
		t.Fatalf("%d member numbers for 4 members", n)
	}
}

func testSchemaNewer(t *testing.T, g *group) {
	g.mustOpen("m1").Close()
	run(t, g.url, `UPDATE `+g.schema+`.schema_version SET version = 99`)
	for _, m := range []string{"m1", ""} {
		_, err := g.open(m)
		if err == nil || !strings.Contains(err.Error(), "version 99, newer than this build knows") {
			t.Fatalf("open %q on a newer schema = %v", m, err)
		}
	}
}

// testSchemaRaisedForSparkplugRows: a build of schema version 11 reads
// source rows up to format 4, whose Sparkplug session is JSON; this one
// writes format 5, the session binary. A member of this build raises a
// version 11 schema to 12, which such a build refuses.
func testSchemaRaisedForSparkplugRows(t *testing.T, g *group) {
	g.mustOpen("m1").Close()
	run(t, g.url, `UPDATE `+g.schema+`.schema_version SET version = 11`)
	g.mustOpen("m1").Close()
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.schema_version WHERE version >= 12`); n != 1 {
		t.Fatalf("a member left the schema below version 12 (build version %d)", postgres.SchemaVersion)
	}
}

// testSchemaRaisedForShareSessions: a build of schema version 12 records
// a member's share group without the session holding it, which no member
// could adopt; a member of this build raises such a schema to 13, giving
// the leases their share_client and share_holder columns and the schema
// its share_claims table.
func testSchemaRaisedForShareSessions(t *testing.T, g *group) {
	g.mustOpen("m1").Close()
	run(t, g.url, `DROP TABLE `+g.schema+`.share_claims; ALTER TABLE `+g.schema+`.leases DROP COLUMN share_client, DROP COLUMN share_holder;
		UPDATE `+g.schema+`.schema_version SET version = 12`)
	g.mustOpen("m1").Close()
	if n := count(t, g.url, `SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'leases' AND column_name IN ('share_client', 'share_holder')`, g.schema); n != 2 {
		t.Fatalf("the leases have %d of the columns share_client and share_holder after the raise, want 2", n)
	}
	if n := count(t, g.url, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'share_claims'`, g.schema); n != 1 {
		t.Fatal("the schema was left without its share_claims table")
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.schema_version WHERE version >= 13`); n != 1 {
		t.Fatalf("a member left the schema below version 13 (build version %d)", postgres.SchemaVersion)
	}
}

// testSchemaRaisedForSharePaths: a build of schema version 13 records no
// share of a member's paths (mqtt.feeds), and takes its lease without
// clearing them; a member of this build raises such a schema to 14, giving
// it the share_paths and share_path_claims tables, which such a build
// refuses.
func testSchemaRaisedForSharePaths(t *testing.T, g *group) {
	g.mustOpen("m1").Close()
	run(t, g.url, `DROP TABLE `+g.schema+`.share_paths; DROP TABLE `+g.schema+`.share_path_claims;
		UPDATE `+g.schema+`.schema_version SET version = 13`)
	g.mustOpen("m1").Close()
	if n := count(t, g.url, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('share_paths', 'share_path_claims')`, g.schema); n != 2 {
		t.Fatalf("the schema has %d of the tables share_paths and share_path_claims after the raise, want 2", n)
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.schema_version WHERE version >= 14`); n != 1 {
		t.Fatalf("a member left the schema below version 14 (build version %d)", postgres.SchemaVersion)
	}
}

// testSchemaRaisedForHeld: a build of schema version 14 writes quarantine
// entries without their key and content; a member of this build raises
// such a schema to 15, giving the quarantine its held column and the
// partial index of the open entries that have one.
func testSchemaRaisedForHeld(t *testing.T, g *group) {
	g.mustOpen("m1").Close()
	run(t, g.url, `DROP INDEX `+g.schema+`.quarantine_held; ALTER TABLE `+g.schema+`.quarantine DROP COLUMN held;
		UPDATE `+g.schema+`.schema_version SET version = 14`)
	g.mustOpen("m1").Close()
	if n := count(t, g.url, `SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'quarantine' AND column_name = 'held'`, g.schema); n != 1 {
		t.Fatalf("the quarantine has %d held columns after the raise, want 1", n)
	}
	if n := count(t, g.url, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'quarantine_held' AND indexdef LIKE '%WHERE (held IS NOT NULL)%'`, g.schema); n != 1 {
		t.Fatalf("%d partial indexes quarantine_held after the raise, want 1", n)
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.schema_version WHERE version >= 15`); n != 1 {
		t.Fatalf("a member left the schema below version 15 (build version %d)", postgres.SchemaVersion)
	}
}

// testSchemaGivenTheShareColumn: version 11 was first written without
// the leases' share column (the share group a member that stops leaves),
// by the builds that recorded the routes' key derivations before members
// left their share groups; such a schema is given the column at open, on
// which every lease a member takes would fail otherwise.
func testSchemaGivenTheShareColumn(t *testing.T, g *group) {
	g.mustOpen("m1").Close()
	run(t, g.url, `ALTER TABLE `+g.schema+`.leases DROP COLUMN share; UPDATE `+g.schema+`.schema_version SET version = 11`)
	g.mustOpen("m1").Close()
	if n := count(t, g.url, `SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'leases' AND column_name = 'share'`, g.schema); n != 1 {
		t.Fatal("the schema was left without the leases' share column")
	}
	if n := count(t, g.url, `SELECT version FROM `+g.schema+`.schema_version`); n != int64(postgres.SchemaVersion) {
		t.Fatalf("schema version %d after the open, want %d", n, postgres.SchemaVersion)
	}
}

// testSchemaRaisedForConnected: a build of schema version 9 decodes an
// audit record without its connected (the first delivery of a broker
// connection, engine.AuditRecord.Connected), and so finds its hash wrong,
// as if the record had been altered: a member of this build raises a
// version 9 schema to 10, which such a build refuses.
func testSchemaRaisedForConnected(t *testing.T, g *group) {
	g.mustOpen("m1").Close()
	run(t, g.url, `UPDATE `+g.schema+`.schema_version SET version = 9`)
	g.mustOpen("m1").Close()
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.schema_version WHERE version >= 10`); n != 1 {
		t.Fatalf("a member left the schema below version 10 (build version %d)", postgres.SchemaVersion)
	}
}

func testLeaseDeadHolder(t *testing.T, g *group) {
	s := g.mustOpen("m1")
	base := s.QuarantineBase()
	// A process on this host that has exited holds the lease: a member
	// killed with -9.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host := strings.Fields(shared.NewHolder())[0] // the hostname and pid namespace
	dead := fmt.Sprintf("%s %d deadbeef", host, cmd.Process.Pid)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	hold(t, g, "m1", dead)
	again, err := g.open("m1")
	if err != nil {
		t.Fatalf("open over a dead holder: %v", err)
	}
	if again.QuarantineBase() != base {
		t.Fatalf("quarantine base %d, was %d", again.QuarantineBase(), base)
	}
	// A live holder elsewhere is refused, naming it.
	again.Close()
	hold(t, g, "m1", "otherhost 1 cafe")
	_, err = g.open("m1")
	if !errors.Is(err, engine.ErrMemberHeld) || !strings.Contains(err.Error(), "otherhost 1 cafe") {
		t.Fatalf("open over a live holder = %v", err)
	}
}

// testChainOfAMemberKilledHereIsClaimedAtOnce: an ingest killed with
// SIGKILL leaves its lease and its chain claim held for their whole ttl
// by a process that no longer exists, under a member id no process takes
// again. The next process on this host (the ingest run again) must claim
// that chain at once, to deliver it to the audit sinks and trim it, rather
// than leave it behind until a later process comes after the lease ran
// out.
func testChainOfAMemberKilledHereIsClaimedAtOnce(t *testing.T, g *group) {
	killed := g.mustOpen("killed")
	if err := killed.Commit(t.Context(), &engine.Batch{Audit: records("killed", 1, 3)}); err != nil {
		t.Fatal(err)
	}
	if err := killed.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("%s %d deadbeef", strings.Fields(shared.NewHolder())[0], cmd.Process.Pid)
	hold(t, g, "killed", dead)
	run(t, g.url, `INSERT INTO `+g.schema+`.chain_claims (member, holder, expires)
		SELECT number, $2, now() + interval '1 hour' FROM `+g.schema+`.members WHERE member = $1
		ON CONFLICT (member) DO UPDATE SET holder = excluded.holder, expires = excluded.expires`, "killed", dead)
	again := g.mustOpen("again")
	defer again.Close()
	got, err := again.ClaimChains(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"again", "killed"}) {
		t.Fatalf("claimed chains %v, want [again killed]: the killed member's holder is a process on this host that has died", got)
	}
	// A holder on another host is never presumed dead.
	run(t, g.url, `UPDATE `+g.schema+`.chain_claims SET holder = 'otherhost 1 cafe', expires = now() + interval '1 hour'
		WHERE member = (SELECT number FROM `+g.schema+`.members WHERE member = 'killed')`)
	hold(t, g, "killed", "otherhost 1 cafe")
	if got, err := again.ClaimChains(t.Context()); err != nil || !slices.Equal(got, []string{"again"}) {
		t.Fatalf("claimed chains %v, %v while another host's process holds the killed member's lease, want [again]", got, err)
	}
}

// hold gives member's lease to holder for an hour, as a process that
// holds it would have it.
func hold(t *testing.T, g *group, member, holder string) {
	t.Helper()
	run(t, g.url, `UPDATE `+g.schema+`.members SET holder = $2 WHERE member = $1`, member, holder)
	run(t, g.url, `UPDATE `+g.schema+`.leases SET expires = now() + interval '1 hour' WHERE member = $1`, member)
}

// leasesInMembers keeps the group's leases in its members table, as
// schemas before version 8 did.
func leasesInMembers(t *testing.T, g *group) {
	t.Helper()
	run(t, g.url, `ALTER TABLE `+g.schema+`.members ADD COLUMN lease_expires timestamptz NOT NULL DEFAULT '-infinity';
		UPDATE `+g.schema+`.members m SET lease_expires = l.expires FROM `+g.schema+`.leases l WHERE l.member = m.member;
		DROP TABLE `+g.schema+`.leases`)
}

func testLeaseFenced(t *testing.T, g *group) {
	s := g.mustOpen("m1")
	run(t, g.url, `UPDATE `+g.schema+`.members SET holder = 'otherhost 1 cafe' WHERE member = 'm1'`)
	err := s.Update(t.Context(), &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) {
		return &engine.Batch{Audit: records("m1", 1, 1)}, nil
	})
	if !errors.Is(err, engine.ErrMemberHeld) {
		t.Fatalf("Update after the lease was taken = %v, want ErrMemberHeld", err)
	}
	if err := s.Commit(t.Context(), &engine.Batch{Audit: records("m1", 1, 1)}); !errors.Is(err, engine.ErrMemberHeld) {
		t.Fatalf("Commit after the lease was taken = %v, want ErrMemberHeld", err)
	}
	if n := count(t, g.url, `SELECT count(*) FROM `+g.schema+`.audit`); n != 0 {
		t.Fatalf("a fenced member wrote %d records", n)
	}
	if st := s.SharedStats(); st.Failures != 2 || !strings.Contains(st.LastError, "lost its lease") {
		t.Fatalf("stats %+v", st)
	}
}

func testLeaseRenewed(t *testing.T, g *group) {
	o := g.options("m1")
	// Renewed every second, the lease lapses only if renewals starve for
	// three: a loaded test machine delays one by a few hundred ms.
	o.LeaseTTL = 3 * time.Second
	s, err := g.openWith(o)
	if err != nil {
		t.Fatal(err)
	}
	first := s.SharedStats().LeaseExpires
	time.Sleep(time.Until(first) + 200*time.Millisecond) // past the lease as it was taken
	st := s.SharedStats()
	if !st.LeaseExpires.After(first) || st.LeaseTTL != o.LeaseTTL {
		t.Fatalf("lease expires %v, was %v at open", st.LeaseExpires, first)
	}
	// The server runs on this host: its clock is this one, read between
	// the request and its answer.
	if off := st.ClockOffset.Abs(); st.ClockMeasured.IsZero() || off > st.ClockUncertainty+time.Millisecond {
		t.Fatalf("clock offset %v (±%v) measured at %v: the renewal measured no offset, or not the server's clock", st.ClockOffset, st.ClockUncertainty, st.ClockMeasured)
	}
	if _, err := g.open("m1"); !errors.Is(err, engine.ErrMemberHeld) {
		t.Fatalf("open of a renewed lease past its first expiry = %v", err)
	}
}

func testSchemaMigrated(t *testing.T, g *group) {
	recs := records("m1", 1, 4)
	s := g.mustOpen("m1")
	if err := s.Commit(t.Context(), &engine.Batch{Audit: recs[:3]}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// The schema as version 1 left it: no outbox, no chain bases, cursors
	// or claims.
	run(t, g.url, `DROP TABLE `+g.schema+`.outbox, `+g.schema+`.outbox_held, `+g.schema+`.outbox_claims,
			`+g.schema+`.chain_bases, `+g.schema+`.chain_cursors, `+g.schema+`.chain_claims, `+g.schema+`.routes;
		UPDATE `+g.schema+`.schema_version SET version = 1`)
	leasesInMembers(t, g)
	want := fmt.Sprintf("version 1, older than this build's %d", postgres.SchemaVersion)
	if _, err := g.open(""); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("read-only open of a version 1 schema = %v", err)
	}
	// A lease that ran out keeps no member of the earlier build running:
	// the schema is migrated (one still held is not:
	// testSchemaNotMigratedUnderARunningMember).
	run(t, g.url, `UPDATE `+g.schema+`.members SET holder = 'otherhost 1 cafe', lease_expires = now() - interval '1 second' WHERE member = 'm1'`)
	g.mustOpen("m2").Close()
	if n := count(t, g.url, `SELECT version FROM `+g.schema+`.schema_version`); n != int64(postgres.SchemaVersion) {
		t.Fatalf("schema version %d after the migration, want %d", n, postgres.SchemaVersion)
	}
	s = g.mustOpen("m1")
	if h, err := s.Head(t.Context()); err != nil || h.Position != 3 {
		t.Fatalf("head after the migration = %+v, %v", h, err)
	}
	e := engine.OutboxEntry{ID: engine.OutboxID(4, 0), Output: engine.OutputMQTT, Target: "clean/plant/m1/energy", Route: "meters",
		Topic: "plant/m1/energy", Key: recs[3].Key, Sequence: -1, Time: recs[3].Time, Payload: []byte(`{"kwh":1}`)}
	if err := s.Commit(t.Context(), &engine.Batch{Audit: recs[3:], Outbox: []engine.OutboxEntry{e}}); err != nil {
		t.Fatal(err)
	}
	if es, err := s.Outbox(t.Context(), "m1", 0, 10); err != nil || len(es) != 1 || string(es[0].Payload) != `{"kwh":1}` {
		t.Fatalf("outbox after the migration = %+v, %v", es, err)
	}
}
