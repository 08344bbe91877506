package failover

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// downstream is the system the forward effect feeds: a broker of its own,
// which does not fail over (the consumer's brokers do, and a standby
// started from an older copy would lose what the primary acknowledged to
// the output), and a subscriber on the clean topics that records every
// copy in arrival order.
type downstream struct {
	Broker *testbroker.Mosquitto
	Sub    *testbroker.Subscriber
}

// startDownstream starts the downstream broker and subscribes to it, so
// that every copy forwarded from then on is recorded.
func startDownstream(t testing.TB) *downstream {
	t.Helper()
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	return &downstream{Broker: b, Sub: testbroker.NewSubscriber(t, []string{b.URL()}, cleanPrefix+"#")}
}

// keys returns the distinct replayguard-key values received so far.
func (d *downstream) keys() map[string]bool {
	out := map[string]bool{}
	for _, m := range d.Sub.Messages() {
		out[m.User[forward.HeaderKey]] = true
	}
	return out
}

// WaitKeys waits until every key of want has been received.
func (d *downstream) WaitKeys(t testing.TB, want map[string]bool) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d keys received downstream", len(want)), time.Minute, func() bool { return d.hasAll(want) })
}

// appliedKeys returns the keys of the applied decisions among records.
func appliedKeys(records []engine.AuditRecord) map[string]bool {
	out := map[string]bool{}
	for _, rec := range records {
		if applies(rec.Outcome) {
			out[rec.Key.String()] = true
		}
	}
	return out
}

func applies(outcome string) bool {
	return outcome == engine.Applied.String() || outcome == engine.AppliedLate.String()
}

// forwarded is what the downstream subscriber received, measured against
// the audit records.
type forwarded struct {
	Copies   int // messages received
	Distinct int // distinct replayguard-key values among them
	Applied  int // applied decisions, each of which must be among them
}

// Surplus is how many copies were received beyond the first of each key.
func (f forwarded) Surplus() int { return f.Copies - f.Distinct }

func (f forwarded) String() string {
	return fmt.Sprintf("%d copies of %d distinct keys for %d applied decisions (%d copies sent again)",
		f.Copies, f.Distinct, f.Applied, f.Surplus())
}

// checkForward checks what the downstream subscriber received against the
// audit records of a stopped run (every chain of a group) and the
// publishers' record:
//
//   - the set of keys received is the set of keys of applied and
//     applied_late records: every applied event arrived at least once,
//     and nothing that was not applied did (no key of a decision that did
//     not apply, no content other than the applied message's);
//   - every copy is the applied message, byte for byte, on cleanPrefix +
//     its topic, with the key's route, source and sequence as user
//     properties;
//   - order per source: for each member's chain (the single chain of an
//     embedded store) and source, the keys in the order of their first
//     copies are that chain's applied keys of the source in audit
//     position order. Each member's outbox is delivered in its commit
//     order, by the member or by the one that took it over; two members'
//     outboxes are delivered independently, so a source that several
//     members decided on is ordered per member, not across them.
func checkForward(t testing.TB, records []engine.AuditRecord, copies []testbroker.Received, f feed) forwarded {
	t.Helper()
	errs := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if errs++; errs <= maxErrors {
			t.Errorf(format, args...)
		}
	}
	payloads := publishedPayloads(f)
	type chain struct{ member, route, source string }
	applied := map[string]engine.AuditRecord{}
	want := map[chain][]string{}
	ordered := slices.Clone(records)
	slices.SortStableFunc(ordered, func(a, b engine.AuditRecord) int {
		return cmp.Or(cmp.Compare(a.Member, b.Member), cmp.Compare(a.Position, b.Position))
	})
	for _, rec := range ordered {
		if !applies(rec.Outcome) {
			continue
		}
		key := rec.Key.String()
		applied[key] = rec
		c := chain{rec.Member, rec.Route, rec.Source[0]}
		want[c] = append(want[c], key)
	}

	res := forwarded{Copies: len(copies), Applied: len(applied)}
	got := map[chain][]string{}
	seen := map[string]bool{}
	for _, m := range copies {
		key := m.User[forward.HeaderKey]
		rec, ok := applied[key]
		if !ok {
			fail("received %s with key %q, which no applied decision has", m.Topic, key)
			continue
		}
		k, _, err := (&result{}).identify(rec)
		switch {
		case err != nil:
			fail("applied record %d: %v", rec.Position, err)
		case m.Topic != cleanPrefix+rec.Topic:
			fail("key %s (%s %v) received on %s, want %s", key, rec.Route, k, m.Topic, cleanPrefix+rec.Topic)
		case !bytes.Equal(m.Payload, payloads[conflictName(rec.Route, k)]):
			fail("key %s (%s %v) received with payload %s, but the applied message is %s", key, rec.Route, k, m.Payload, payloads[conflictName(rec.Route, k)])
		case !sameHeaders(m.User, rec):
			fail("key %s (%s %v) received with user properties %v", key, rec.Route, k, m.User)
		}
		if !seen[key] {
			seen[key] = true
			c := chain{rec.Member, rec.Route, rec.Source[0]}
			got[c] = append(got[c], key)
		}
	}
	res.Distinct = len(seen)
	for key, rec := range applied {
		if !seen[key] {
			k, _, _ := (&result{}).identify(rec)
			fail("%s %v applied (audit record %d, member %q) and never received downstream", rec.Route, k, rec.Position, rec.Member)
		}
	}
	for c, keys := range want {
		keys = slices.DeleteFunc(keys, func(k string) bool { return !seen[k] }) // reported above
		if i := firstDifference(got[c], keys); i >= 0 {
			fail("member %q, %s source %s: first copies arrive out of commit order from the %d-th of %d", c.member, c.route, c.source, i+1, len(keys))
		}
	}
	if errs > maxErrors {
		t.Errorf("… and %d more errors", errs-maxErrors)
	}
	t.Logf("downstream: %v", res)
	return res
}

// publishedPayloads returns the bytes of every message the publishers
// sent, by conflictName.
func publishedPayloads(f feed) map[string][]byte {
	out := map[string][]byte{}
	for _, m := range f.Pub.All() {
		out[conflictName(routeName, seqKey{m.Source, m.Sequence})] = m.Payload
	}
	if f.Meters != nil {
		for _, m := range f.Meters.All() {
			out[conflictName(idRouteName, seqKey{m.Source, m.Sequence})] = m.Payload
		}
	}
	return out
}

// sameHeaders reports whether a copy's user properties name rec's route,
// its source and, on the sequenced route, its epoch and sequence.
func sameHeaders(user map[string]string, rec engine.AuditRecord) bool {
	src, _ := json.Marshal(rec.Source)
	if user[forward.HeaderRoute] != rec.Route || user[forward.HeaderSource] != string(src) {
		return false
	}
	if rec.Sequence == nil {
		_, seq := user[forward.HeaderSequence]
		return !seq
	}
	return user[forward.HeaderSequence] == strconv.FormatInt(*rec.Sequence, 10) && user[forward.HeaderEpoch] == rec.Epoch
}

// firstDifference returns the index of the first place a and b differ,
// -1 when they are equal.
func firstDifference(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// conflicting is a message sent again with another content: the one with
// value 2 where the original has 1.
type conflicting struct {
	Route string
	Key   seqKey
	Topic string
}

// sendConflicts publishes, through pub (or meters for the id route), a
// copy with value 2 of each message in msgs, all applied with value 1,
// waits until decided counts them as conflicts, and returns their names
// for feed.Conflicts.
func sendConflicts(t testing.TB, pub, meters *testbroker.Publisher, msgs []conflicting, decided func() float64) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := decided()
	out := map[string]bool{}
	for _, m := range msgs {
		var payload []byte
		via := pub
		if m.Route == idRouteName {
			via = meters
			payload = fmt.Appendf(nil, `{"msgId":%q,"value":2}`, meterID(m.Key.source, m.Key.seq))
		} else {
			payload = fmt.Appendf(nil, `{"source_id":%q,"sequence":%d,"boot_id":"boot-1","value":2}`, m.Key.source, m.Key.seq)
		}
		if !via.Send(ctx, m.Topic, payload) {
			t.Fatalf("the broker did not acknowledge the conflicting copy of %s %v", m.Route, m.Key)
		}
		out[conflictName(m.Route, m.Key)] = true
	}
	waitFor(t, fmt.Sprintf("%d conflicts decided", len(msgs)), 30*time.Second, func() bool {
		return decided()-before >= float64(len(msgs))
	})
	return out
}

// firstOf returns the first n sequences of every source, on the sequenced
// route, as messages to send again in conflict.
func firstOf(sources []string, n int) []conflicting {
	var out []conflicting
	for _, src := range sources {
		for seq := int64(1); seq <= int64(n); seq++ {
			out = append(out, conflicting{Route: routeName, Key: seqKey{src, seq}, Topic: topicPrefix + src})
		}
	}
	return out
}

// exportAudit returns `audit export` of a stopped daemon's store, parsed.
func exportAudit(t testing.TB, d *daemon) []engine.AuditRecord {
	t.Helper()
	var out []engine.AuditRecord
	sc := bufio.NewScanner(strings.NewReader(d.run("audit", "export")))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var rec engine.AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("audit export: %v: %s", err, sc.Bytes())
		}
		out = append(out, rec)
	}
	return out
}

// hasAll reports whether every key of want has been received.
func (d *downstream) hasAll(want map[string]bool) bool {
	got := d.keys()
	for k := range want {
		if !got[k] {
			return false
		}
	}
	return true
}
