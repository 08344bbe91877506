package failover

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
)

// daemon is `replayguard run` as a child process, which a test can kill
// with SIGKILL and start again on the same configuration and store. Its
// output, over every start, goes to one log printed when the test fails.
type daemon struct {
	t      testing.TB
	bin    string
	setup  *setup
	log    string
	client *http.Client

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the exit status, once exited is closed

	Starts, Kills int
}

// startDaemon builds the binary if needed and starts `replayguard run`.
func startDaemon(t testing.TB, s *setup) *daemon {
	t.Helper()
	d := &daemon{t: t, bin: replayguardBinary(t), setup: s, log: filepath.Join(t.TempDir(), "run.log"),
		client: httpClient()}
	t.Cleanup(func() {
		if d.running() {
			d.signal(syscall.SIGKILL)
			<-d.exited
		}
		d.client.CloseIdleConnections()
		if t.Failed() {
			b, _ := os.ReadFile(d.log)
			t.Logf("replayguard run logged (last 64 KiB):\n%s", tail(b, 64<<10))
		}
	})
	d.Start()
	return d
}

func httpClient() *http.Client { return &http.Client{Timeout: 5 * time.Second} }

func tail(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return b[len(b)-n:]
}

// Start starts the daemon again and waits until it has opened its store
// and answers HTTP; it may still be connecting to a broker.
func (d *daemon) Start() {
	d.t.Helper()
	logs, err := os.OpenFile(d.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	fmt.Fprintf(logs, "--- start %d ---\n", d.Starts+1)
	cmd := exec.Command(d.bin, "run", "-c", d.setup.Path)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		logs.Close()
		d.t.Fatal(err)
	}
	d.Starts++
	d.cmd, d.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		d.err = cmd.Wait()
		logs.Close()
		close(exited)
	}(d.exited)
	waitFor(d.t, "replayguard run answering /healthz", 15*time.Second, func() bool {
		if !d.running() {
			d.t.Fatalf("replayguard run exited at start: %v", d.err)
		}
		return d.ok("/healthz")
	})
}

func (d *daemon) running() bool {
	if d.exited == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

func (d *daemon) signal(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("signal %v to replayguard run: %v", sig, err)
	}
}

// Kill ends the daemon with SIGKILL, a crash, and waits for it.
func (d *daemon) Kill() {
	d.t.Helper()
	d.signal(syscall.SIGKILL)
	<-d.exited
	d.Kills++
}

// Stop ends the daemon with SIGTERM, which must drain, commit, acknowledge
// and exit 0.
func (d *daemon) Stop() {
	d.t.Helper()
	d.signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.t.Fatal("replayguard run did not stop within 30 s of SIGTERM")
	}
	if d.err != nil {
		d.t.Fatalf("replayguard run after SIGTERM: %v", d.err)
	}
}

// Pause freezes the daemon (SIGSTOP): it receives, commits and
// acknowledges nothing until Resume, while its connection stays up.
func (d *daemon) Pause() { d.t.Helper(); d.signal(syscall.SIGSTOP) }

// Resume continues a paused daemon (SIGCONT).
func (d *daemon) Resume() { d.t.Helper(); d.signal(syscall.SIGCONT) }

func (d *daemon) url(path string) string { return "http://" + d.setup.Listen + path }

func (d *daemon) ok(path string) bool {
	resp, err := d.client.Get(d.url(path))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitReady waits until the daemon is connected, subscribed and committing.
func (d *daemon) WaitReady() {
	d.t.Helper()
	waitFor(d.t, "replayguard run ready", 15*time.Second, func() bool {
		if why := d.exitedWhy(); why != "" {
			d.t.Fatalf("waiting for replayguard run to be ready:%s", why)
		}
		return d.ok("/readyz")
	})
}

func (d *daemon) getJSON(path string, v any) {
	d.t.Helper()
	resp, err := d.client.Get(d.url(path))
	if err != nil {
		d.t.Fatalf("GET %s: %v%s", path, err, d.exitedWhy())
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		d.t.Fatalf("GET %s: %v", path, err)
	}
}

// exitedWhy says, when the daemon is not running, how it exited (and
// how often the test started and killed it) and what it logged last,
// from its panic if it panicked: a failure to reach it names the cause
// though the logs printed at the test's end are cut.
func (d *daemon) exitedWhy() string {
	if d.running() || d.exited == nil {
		return ""
	}
	b, _ := os.ReadFile(d.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	from := max(len(lines)-12, 0)
	for i := len(lines) - 1; i >= 0 && !strings.HasPrefix(lines[i], "--- start "); i-- {
		if strings.HasPrefix(lines[i], "panic: ") || strings.HasPrefix(lines[i], "fatal error: ") {
			from = i
		}
	}
	return fmt.Sprintf("\nreplayguard run exited (%v) after %d starts and %d kills; it logged last:\n%s",
		d.err, d.Starts, d.Kills, strings.Join(lines[from:min(from+24, len(lines))], "\n"))
}

// Position is the daemon's audit head position.
func (d *daemon) Position() uint64 {
	d.t.Helper()
	var st struct {
		Position uint64 `json:"position"`
	}
	d.getJSON("/api/v1/stats", &st)
	return st.Position
}

// WaitHigh waits until every source's highest applied sequence, as the
// API reports it, is the one given.
func (d *daemon) WaitHigh(want map[string]int64) {
	d.t.Helper()
	d.waitSources(want, func(high, want int64) bool { return high == want })
}

// WaitApplied waits until every source's highest applied sequence has
// reached the one given.
func (d *daemon) WaitApplied(want map[string]int64) {
	d.t.Helper()
	d.waitSources(want, func(high, want int64) bool { return high >= want })
}

func (d *daemon) waitSources(want map[string]int64, ok func(high, want int64) bool) {
	d.t.Helper()
	waitFor(d.t, fmt.Sprintf("sources applied up to %v", want), time.Minute, func() bool {
		var reports []engine.SourceReport
		d.getJSON("/api/v1/sources", &reports)
		got := 0
		for _, r := range reports {
			if w, found := want[r.Source[0]]; found && ok(r.High, w) {
				got++
			}
		}
		return got == len(want)
	})
}

var outcomeLabel = regexp.MustCompile(`(?:outcome|result)="([a-z_]+)"`)

// Metrics returns the daemon's unlabelled samples, those of
// replayguard_decisions_total, replayguard_forwarded_total and
// replayguard_store_update_failures_total summed over their labels, its
// decisions by outcome under replayguard_decisions_total/OUTCOME
// (…/duplicate, …/conflict), its forwarded entries by result under
// replayguard_forwarded_total/RESULT (…/delivered) and its adoptions by
// outcome under replayguard_share_adoptions_total/OUTCOME (…/drained).
//
// It asks for the text uncompressed: benchmarks read it every 20 ms, and
// gzip made each read cost the daemon about a millisecond of CPU.
func (d *daemon) Metrics() map[string]float64 {
	d.t.Helper()
	req, err := http.NewRequest(http.MethodGet, d.url("/metrics"), nil)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := d.client.Do(req)
	if err != nil {
		d.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		if i := strings.IndexByte(name, '{'); i >= 0 {
			if name[:i] != "replayguard_decisions_total" && name[:i] != "replayguard_forwarded_total" &&
				name[:i] != "replayguard_store_update_failures_total" && !strings.HasPrefix(name[:i], "replayguard_store_loss") &&
				name[:i] != "replayguard_store_recovered_total" && name[:i] != "replayguard_journal_bytes" &&
				name[:i] != "replayguard_share_adoptions_total" {
				continue
			}
			if m := outcomeLabel.FindStringSubmatch(name[i:]); m != nil {
				out[name[:i]+"/"+m[1]] += v
			}
			name = name[:i]
		}
		out[name] += v
	}
	return out
}

// run runs the binary on the daemon's configuration (with the daemon
// stopped, or through its API while it runs) and returns its stdout.
func (d *daemon) run(args ...string) string {
	d.t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(d.bin, append(args, "-c", d.setup.Path)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		d.t.Fatalf("replayguard %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// openStore opens the daemon's store read-only; the daemon must not run.
func openStore(t testing.TB, s *setup) app.Store {
	t.Helper()
	st, err := app.OpenStore(s.Config.Store, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// checkFinalRun checks the accounting of a daemon's last run, started on a
// store whose audit head was at from and now drained: every delivery it
// received was decided and has its audit record (received = decisions =
// records added), none abandoned, none in flight.
func checkFinalRun(t testing.TB, d *daemon, from uint64) {
	t.Helper()
	checkRun(t, d, from, 0)
}

// checkRun is checkFinalRun allowing up to maxSurplus audit records more
// than decisions: those of writes a shared store failed to confirm, which
// may have landed all the same (the batch is then decided again and its
// messages found duplicate: two records for one delivery).
func checkRun(t testing.TB, d *daemon, from uint64, maxSurplus float64) {
	t.Helper()
	m := d.Metrics()
	pos := d.Position()
	recv, dec := m["replayguard_received_total"], m["replayguard_decisions_total"]
	t.Logf("last run: received %.0f, decided %.0f, audit records %d → %d", recv, dec, from, pos)
	if recv != dec || m["replayguard_abandoned_total"] != 0 || m["replayguard_in_flight"] != 0 {
		t.Errorf("last run: received %.0f, decided %.0f, abandoned %.0f, in flight %.0f",
			recv, dec, m["replayguard_abandoned_total"], m["replayguard_in_flight"])
	}
	if surplus := float64(pos-from) - dec; surplus < 0 || surplus > maxSurplus {
		t.Errorf("last run: %.0f decisions but %d audit records added (at most %.0f more allowed)", dec, pos-from, maxSurplus)
	} else if surplus > 0 {
		t.Logf("last run: %.0f audit records of writes the store did not confirm, decided again", surplus)
	}
}

// checkCLI runs `audit verify` and `state --json` on a stopped daemon's
// store and compares them with what the checks read.
func checkCLI(t testing.TB, d *daemon, r *result) {
	t.Helper()
	if got, want := d.run("audit", "verify"), fmt.Sprintf("audit chain intact: %d records\n", len(r.Records)); got != want {
		t.Errorf("audit verify: %q, want %q", got, want)
	}
	var state map[string]map[string]json.Number
	dec := json.NewDecoder(strings.NewReader(d.run("state", "--json")))
	dec.UseNumber()
	if err := dec.Decode(&state); err != nil {
		t.Fatalf("state --json: %v", err)
	}
	count := map[string]int{}
	for k := range r.AppliedSeqs {
		count[k.source]++
	}
	for src, n := range count {
		if got := state["src/"+src][countField].String(); got != strconv.Itoa(n) {
			t.Errorf("state --json: src/%s %s = %s, want %d", src, countField, got, n)
		}
	}
}
