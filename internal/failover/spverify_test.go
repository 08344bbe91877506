package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
)

// checkSession runs `sources --json` and `sources` (through the API while
// the daemon runs, on the store once it has stopped) and checks the edge's
// session: 256 (bdSeq 0 after 255), online or not.
func checkSession(t *testing.T, d *daemon, online bool) {
	t.Helper()
	var reps []engine.SourceReport
	if err := json.Unmarshal([]byte(d.run("sources", "--json")), &reps); err != nil {
		t.Fatalf("sources --json: %v", err)
	}
	if len(reps) != 1 || reps[0].Sparkplug == nil {
		t.Fatalf("sources --json: %+v, want the edge's session", reps)
	}
	r := reps[0]
	if r.Epoch != "256" || r.Sparkplug.BdSeq != 0 || r.Sparkplug.BdSeqUnwrapped != 256 || r.Sparkplug.Online != online || r.Sparkplug.LastBirth.IsZero() {
		t.Errorf("sources --json: epoch %q, session %+v; want epoch 256, bdSeq 0 (unwrapped 256), online %v, a birth time",
			r.Epoch, *r.Sparkplug, online)
	}
	if len(r.Gaps) != 0 {
		t.Errorf("sources --json: gaps %v in session 256: a message was lost", r.Gaps)
	}
	want := map[bool]string{true: "online bdSeq 0 (unwrapped 256)", false: "offline bdSeq 0 (unwrapped 256)"}[online]
	if text := d.run("sources"); !strings.Contains(text, want) {
		t.Errorf("sources: want %q in\n%s", want, text)
	}
}

// verifySparkplug checks a stopped daemon's store against the edge's
// record: every acknowledged message (and the Will) applied once, nothing
// else applied, every copy a duplicate, no other outcome; the broker's
// restart and the consumer's kills each sent something again; the meter's
// state equal to the edge's sums; the CLI's `audit verify`, `state` and
// `sources` agree.
func verifySparkplug(t *testing.T, d *daemon, s *setup, e *spEdge) {
	t.Helper()
	recs := spRecords(t, s)
	sent := e.Sent()
	copies, ncopies := e.Copies()
	truth := make(map[spKey]spSent, len(sent))
	for _, m := range sent {
		truth[m.spKey] = m
	}
	applied, dups := spOutcomes(t, recs, truth)
	redelivered := map[string]int{} // duplicates beyond the copies, per session
	for k, n := range dups {
		if applied[k] == 0 {
			t.Errorf("%s: %d duplicates of a message never applied", k, n)
		}
		if n < copies[k] {
			t.Errorf("%s: %d duplicates for %d copies sent", k, n, copies[k])
		}
		redelivered[k.Epoch] += n - copies[k]
	}
	t.Logf("%d messages acknowledged (and the Will), %d copies, %d audit records; duplicates beyond the copies: %v",
		len(sent), ncopies, len(recs), redelivered)
	if redelivered["255"] == 0 {
		t.Error("session 255: no delivery came again after the broker's restart")
	}
	if redelivered["256"] == 0 {
		t.Error("session 256: no delivery came again after the consumer's kills")
	}
	if got, want := d.run("audit", "verify"), fmt.Sprintf("audit chain intact: %d records\n", len(recs)); got != want {
		t.Errorf("audit verify: %q, want %q", got, want)
	}
	checkMeter(t, d, sent)
	checkSession(t, d, false)
}

// spOutcomes counts the applied and duplicate records of each message,
// and fails the test on any other outcome, on a message applied more than
// once or never published, and on one acknowledged (truth) and never
// applied.
func spOutcomes(t *testing.T, recs []engine.AuditRecord, truth map[spKey]spSent) (applied, dups map[spKey]int) {
	t.Helper()
	applied, dups = map[spKey]int{}, map[spKey]int{}
	for _, r := range recs {
		k := recordKey(r)
		switch r.Outcome {
		case engine.Applied.String(), engine.AppliedLate.String():
			applied[k]++
		case engine.Duplicate.String():
			dups[k]++
		default:
			t.Errorf("%s (%s, member %q): %s, %s", k, r.Topic, r.Member, r.Outcome, r.Reason)
		}
	}
	for k, n := range applied {
		if _, ok := truth[k]; !ok || n != 1 {
			t.Errorf("%s applied %d times; published: %v", k, n, ok)
		}
	}
	for k := range truth {
		if applied[k] == 0 {
			t.Errorf("%s acknowledged by the broker, never applied: lost", k)
		}
	}
	return applied, dups
}

// spRecords verifies the store's audit chain and returns its records.
func spRecords(t *testing.T, s *setup) []engine.AuditRecord {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, s)
	snap, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := audit.Verify(ctx, st, snap.AuditHead); err != nil {
		t.Errorf("audit chain broken after %d records: %v", n, err)
	}
	var recs []engine.AuditRecord
	err = st.ScanAudit(ctx, 1, func(r engine.AuditRecord) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// recordKey names the message a record decided, as spEdge does.
func recordKey(r engine.AuditRecord) spKey {
	k := spKey{Epoch: r.Epoch, Seq: -1}
	if r.Sequence != nil && strings.Split(r.Topic, "/")[2] != "NDEATH" {
		k.Seq = *r.Sequence
	}
	return k
}

// checkMeter compares `state --json` with the edge's record: kWh the exact
// sum of every message's Energy, temperature the last NDATA's.
func checkMeter(t *testing.T, d *daemon, sent []spSent) {
	t.Helper()
	var quarters int64
	var last spSent
	for _, m := range sent {
		quarters += m.Quarters
		if m.Type == "NDATA" {
			last = m
		}
	}
	var state map[string]map[string]json.Number
	dec := json.NewDecoder(strings.NewReader(d.run("state", "--json")))
	dec.UseNumber()
	if err := dec.Decode(&state); err != nil {
		t.Fatalf("state --json: %v", err)
	}
	meter := state[spEntity]
	kwh, ok := new(big.Rat).SetString(meter["kwh"].String())
	if want := big.NewRat(quarters, 4); !ok || kwh.Cmp(want) != 0 {
		t.Errorf("state: %s kwh = %s, want exactly %s", spEntity, meter["kwh"], want.FloatString(2))
	}
	if got, want := meter["temperature"].String(), fmt.Sprint(last.Temp); got != want {
		t.Errorf("state: %s temperature = %s, want %s (NDATA %s, the last)", spEntity, got, want, last.spKey)
	}
}
