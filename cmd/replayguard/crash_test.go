package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// buildBinary builds replayguard once for the tests that need a child process.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "replayguard")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// crashFeed is a capture with failover bursts, late messages (within the
// window and below it), conflicts, malformed messages and epoch restarts,
// big enough that an ingest takes a while.
func crashFeed(t *testing.T, rng *rand.Rand, n int) string {
	t.Helper()
	var b strings.Builder
	var sent []string
	emit := func(line string) {
		sent = append(sent, line)
		b.WriteString(line + "\n")
	}
	type held struct {
		at   int // the message index after which it is sent
		line string
	}
	var later []held
	seq := map[int]int{}
	boot := map[int]int{}
	for i := 0; i < n; i++ {
		for len(later) > 0 && later[0].at <= i {
			emit(later[0].line)
			later = later[1:]
		}
		src := rng.IntN(20)
		if boot[src] == 0 || rng.IntN(5000) == 0 {
			boot[src]++
			seq[src] = 0
		}
		seq[src]++
		msg := func(delta int) string {
			return fmt.Sprintf(`{"topic":"incidents/fd/e%d","payload":{"agency":"fd","source_id":"e%d","boot_id":%d,"sequence":%d,"incident_id":"I%d","casualty_delta":%d,"unit_id":"U%d","unit_status":"s%d"}}`,
				src, src, boot[src], seq[src], src%7, delta, src, seq[src])
		}
		delta := 1 + rng.IntN(3)
		switch {
		case rng.IntN(300) == 0: // late: within the window (applied_late) or below it (quarantined)
			later = append(later, held{at: i + 1 + rng.IntN(3000), line: msg(delta)})
			slices.SortStableFunc(later, func(a, b held) int { return a.at - b.at })
		case rng.IntN(700) == 0: // then another content under the same key: a conflict
			emit(msg(delta))
			emit(msg(delta + 10))
		default:
			emit(msg(delta))
		}
		if rng.IntN(200) == 0 { // a failover burst
			from := max(0, len(sent)-1-rng.IntN(300))
			for _, l := range sent[from:] {
				b.WriteString(l + "\n")
			}
		}
		if rng.IntN(500) == 0 {
			fmt.Fprintf(&b, `{"topic":"plant/m%d/energy","payload":{"msgId":"m-%d","kwh":0.125}}`+"\n", src, i)
		}
		if rng.IntN(1000) == 0 { // malformed: the sequence is not an integer
			fmt.Fprintf(&b, `{"topic":"incidents/fd/e%d","payload":{"agency":"fd","source_id":"e%d","boot_id":%d,"sequence":"n%d"}}`+"\n", src, src, boot[src], i)
		}
	}
	for _, h := range later {
		emit(h.line)
	}
	path := filepath.Join(t.TempDir(), "feed.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// storeConfig writes a test configuration whose store section is store, a
// YAML flow mapping.
// withJournal puts a shared store's member journal in dir (beside the
// configuration), not in the package directory, where a journal left by
// an earlier run would be compared with a new server's store.
func withJournal(store, dir string) string {
	if !strings.HasPrefix(store, "{kind: postgres") && !strings.HasPrefix(store, "{kind: redis") || strings.Contains(store, "journal:") {
		return store
	}
	return strings.TrimSuffix(store, "}") + fmt.Sprintf(", journal: {path: %q}}", dir)
}

func storeConfig(t *testing.T, store string) string {
	t.Helper()
	path := testConfig(t, "")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	store = withJournal(store, filepath.Join(filepath.Dir(path), "journal"))
	cfg := regexp.MustCompile(`(?m)^store:.*$`).ReplaceAllLiteralString(string(b), "store: "+store)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A groupConfig writes a configuration on a store of the named group's own
// (a directory, a PostgreSQL schema or a Redis key prefix), with the extra
// store fields of a shared store ("member: m1").
type groupConfig func(t *testing.T, group string, fields ...string) string

func embeddedGroups(t *testing.T, _ string, _ ...string) string { return testConfig(t, "") }

// postgresGroups starts one PostgreSQL server; each group is a schema on it.
func postgresGroups(t *testing.T) groupConfig {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	return func(t *testing.T, group string, fields ...string) string {
		return storeConfig(t, fmt.Sprintf("{kind: postgres, url: %q, %s}", pg.URL(),
			strings.Join(append([]string{"schema: " + group}, fields...), ", ")))
	}
}

// redisGroups starts one redis-server; each group is a key prefix, its hash
// tag the group's name.
func redisGroups(t *testing.T) groupConfig {
	r := testbroker.StartRedis(t, testbroker.RedisOptions{})
	return func(t *testing.T, group string, fields ...string) string {
		return storeConfig(t, fmt.Sprintf("{kind: redis, url: %q, %s}", r.URL(),
			strings.Join(append([]string{`prefix: "{` + group + `}:"`}, fields...), ", ")))
	}
}

// TestKillDuringIngestThenIngestAgain kills `replayguard ingest` with
// SIGKILL at random moments, then ingests the same capture again, on each
// kind of store: state, sources and quarantine must equal one clean run's,
// no message may be applied twice, and every audit chain must verify (on a
// shared store each killed ingest left a chain of its own).
func TestKillDuringIngestThenIngestAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and ingests several times")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	bin := buildBinary(t)
	feed := crashFeed(t, rand.New(rand.NewPCG(seed, 3)), 40000)
	// A shared store commits each batch over the network: a shorter feed
	// keeps the test's time modest.
	sharedFeed := crashFeed(t, rand.New(rand.NewPCG(seed, 4)), 6000)
	t.Run("on the embedded store", func(t *testing.T) {
		killDuringIngest(t, bin, feed, rand.New(rand.NewPCG(seed, 5)), embeddedGroups)
	})
	t.Run("on PostgreSQL", func(t *testing.T) {
		killDuringIngest(t, bin, sharedFeed, rand.New(rand.NewPCG(seed, 6)), postgresGroups(t))
	})
	t.Run("on Redis", func(t *testing.T) {
		killDuringIngest(t, bin, sharedFeed, rand.New(rand.NewPCG(seed, 7)), redisGroups(t))
	})
}

// killDuringIngest ingests feed once cleanly, and into another group of the
// same kind of store five times killed and once to the end, and compares.
func killDuringIngest(t *testing.T, bin, feed string, rng *rand.Rand, groups groupConfig) {
	clean := groups(t, "clean")
	start := time.Now()
	runBin(t, bin, "ingest", "-c", clean, "--batch", "200", feed)
	cleanTook := time.Since(start)
	want := readResult(t, bin, clean)
	t.Logf("clean ingest took %s: %d applied, %d messages held", cleanTook, want.applied, len(want.quarantine))
	if len(want.quarantine) == 0 {
		t.Fatal("the feed left nothing in quarantine: comparing quarantines would prove nothing")
	}

	crashed := groups(t, "killed")
	kills, named := killIngests(t, bin, crashed, feed, rng, cleanTook, func() bool { return readResult(t, bin, crashed).records() > 0 })
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "ingest", "-c", crashed, "--batch", "200", feed)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ingest after the kills: %v\n%s", err, stderr.String())
	}
	last := memberNamed(stderr.String())
	named[last] = true

	got := readResult(t, bin, crashed)
	if got.records() <= want.records() {
		t.Fatalf("%d audit records after %d kills, %d in a clean run: no killed ingest committed anything, the test proved nothing",
			got.records(), kills, want.records())
	}
	if got.state != want.state {
		t.Fatalf("state after %d kills differs from a clean run's\n got: %.500s\nwant: %.500s", kills, got.state, want.state)
	}
	if got.sources != want.sources {
		t.Fatalf("sources after %d kills differ from a clean run's\n got: %.500s\nwant: %.500s", kills, got.sources, want.sources)
	}
	if got.applied != want.applied {
		t.Fatalf("%d applied or applied_late records over every chain after %d kills; a clean run has %d", got.applied, kills, want.applied)
	}
	for m, n := range got.members {
		if !named[m] {
			t.Errorf("the audit holds %d records of member %q, which no ingest named", n, m)
		}
	}
	if got.members[last] == 0 {
		t.Errorf("the last ingest's member %q has no audit records", last)
	}
	t.Logf("audit records per member: %v", got.members)
	t.Logf("quarantine: %d entries of %d messages; a clean run's: %d entries", got.entries(), len(got.quarantine), want.entries())
	// Each delivery of a held message is an entry of its own, so the
	// deliveries a killed ingest committed are held too: the same
	// messages, none with fewer entries than in the clean run.
	for msg, n := range want.quarantine {
		if got.quarantine[msg] < n {
			t.Errorf("after %d kills %d entries hold %.200s; a clean run has %d", kills, got.quarantine[msg], msg, n)
		}
	}
	for msg := range got.quarantine {
		if want.quarantine[msg] == 0 {
			t.Errorf("after %d kills quarantine holds %.200s, which a clean run does not", kills, msg)
		}
	}
}

// killIngests starts five ingests of feed one after the other and kills
// each with SIGKILL at a random moment. Until one of them has committed
// something (committed says), the moments are taken later: a machine
// slower than it was for the clean run must not kill every ingest before
// its first commit, which would prove nothing. It returns how many were
// killed before they ended, and the member ids they named.
func killIngests(t *testing.T, bin, cfg, feed string, rng *rand.Rand, cleanTook time.Duration, committed func() bool) (int, map[string]bool) {
	t.Helper()
	kills := 0
	named := map[string]bool{}
	proven, later := false, time.Duration(0) // later is added to each moment while nothing was committed
	for round := 0; round < 5 || !proven && round < 10; round++ {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "ingest", "-c", cfg, "--batch", "200", feed)
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Between a tenth and a half of a clean run's time: past the
		// first commits, and short of the end even when the rounds
		// before have done most of the work.
		delay := later + cleanTook/10 + time.Duration(rng.Int64N(int64(cleanTook*2/5)))
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if err != nil {
			kills++
		}
		if m := memberNamed(stderr.String()); m != "" {
			named[m] = true
		}
		t.Logf("round %d: killed after %s (%v)", round, delay, err)
		if round >= 3 && !proven {
			if proven = committed(); !proven {
				later += cleanTook / 2
			}
		}
	}
	if kills == 0 {
		t.Fatal("no ingest was killed mid-way: the test proved nothing")
	}
	return kills, named
}

// ingestResult is what the read commands show of a store.
type ingestResult struct {
	state, sources string
	applied        int            // applied and applied_late records over every chain
	members        map[string]int // audit records per member id ("" on a single-owner store)
	quarantine     map[string]int // entries per held message, by topic and payload
}

// readResult reads a store through the commands, and fails the test unless
// `audit verify` passes.
// records counts the audit records of every chain.
func (r ingestResult) records() int {
	n := 0
	for _, c := range r.members {
		n += c
	}
	return n
}

// entries counts the quarantine entries.
func (r ingestResult) entries() int {
	n := 0
	for _, c := range r.quarantine {
		n += c
	}
	return n
}

func readResult(t *testing.T, bin, cfg string) ingestResult {
	t.Helper()
	r := ingestResult{
		state:      runBin(t, bin, "state", "--json", "-c", cfg),
		sources:    runBin(t, bin, "sources", "--json", "-c", cfg),
		members:    map[string]int{},
		quarantine: map[string]int{},
	}
	verified := runBin(t, bin, "audit", "verify", "-c", cfg)
	for _, line := range jsonLines(runBin(t, bin, "audit", "export", "-c", cfg)) {
		var rec struct{ Outcome, Member string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit export: %v: %.200s", err, line)
		}
		r.members[rec.Member]++
		if rec.Outcome == "applied" || rec.Outcome == "applied_late" {
			r.applied++
		}
	}
	// The last line totals every chain: "audit chains intact: 3 members, 120 records".
	if want := fmt.Sprintf(" %d records\n", r.records()); !strings.HasSuffix(verified, want) {
		t.Fatalf("audit verify checked other records than audit export's %d:\n%s", r.records(), verified)
	}
	for _, line := range jsonLines(runBin(t, bin, "quarantine", "list", "-c", cfg)) {
		var q struct {
			Topic      string
			Payload    json.RawMessage
			PayloadB64 string `json:"payload_b64"`
		}
		if err := json.Unmarshal([]byte(line), &q); err != nil {
			t.Fatalf("quarantine list: %v: %.200s", err, line)
		}
		r.quarantine[q.Topic+" "+string(q.Payload)+q.PayloadB64]++
	}
	return r
}

func jsonLines(s string) []string {
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// memberNamed is the member id an ingest's stderr names; "" when none.
func memberNamed(stderr string) string {
	m := regexp.MustCompile(`writing the audit chain of member (\S+) on`).FindStringSubmatch(stderr)
	if m == nil {
		return ""
	}
	return m[1]
}

func runBin(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("replayguard %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}
