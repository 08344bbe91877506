package failover

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// A member of a group on PostgreSQL or Redis killed with SIGKILL after it
// committed and journaled a batch that held two messages (one below its
// window, one malformed) and before its acknowledgements reached the
// broker is delivered the batch again when it starts: each held message
// is then a duplicate of its entry, so the quarantine holds one entry per
// held delivery, and a release applies the message once.
func TestAHeldMessageDeliveredAgainAfterAKillKeepsOneEntry(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { heldOnceAfterAKill(t, kind) })
	}
}

func heldOnceAfterAKill(t *testing.T, kind string) {
	skipShort(t)
	// Long enough a hold between commit and acknowledgement for the kill
	// to land in it every time.
	t.Setenv("REPLAYGUARD_FAILPOINT_BEFORE_ACK", "3s")
	server := startStoreServer(t, kind)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	// A batch waits a second after its first delivery: the three must
	// be decided in one batch, none acknowledged before the kill. In
	// batches of their own, the first one's hold keeps the third from
	// being decided until the first is acknowledged (and the second, not
	// held, with it), and only the third is delivered again.
	s := newSetupWith(t, []string{broker.URL()}, setupOptions{API: true,
		Store: fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL()), ShareGroup: shareGroup,
		BatchLinger: "1s"})
	d := startDaemon(t, s)
	d.WaitReady()
	// Published while the member is stopped (its session keeps its
	// subscription: no other member is live to leave to), the three come
	// in one burst as it connects again, within the linger, and so in one
	// batch: the journal's last, whose held messages it notes as it
	// starts. Published while it runs, they could come in batches of
	// their own, and the earlier ones be acknowledged before the kill.
	d.Stop()
	pub := newPublisher(t, []string{broker.URL()}, 10)
	ctx := context.Background()
	for _, p := range []string{
		`{"source_id":"s1","boot_id":1,"sequence":5000,"value":1}`,
		`{"source_id":"s1","boot_id":1,"sequence":1,"value":1}`, // below the window
		`{"source_id":`, // malformed
	} {
		if !pub.Send(ctx, topicPrefix+"s1", []byte(p)) {
			t.Fatalf("publish %s: not acknowledged", p)
		}
	}
	d.Start()
	waitFor(t, "the three messages decided", 15*time.Second, func() bool { return d.Position() >= 3 })
	d.Kill()
	d.Start()
	d.WaitReady()
	waitFor(t, "the batch delivered again", 15*time.Second, func() bool { return d.Position() > 3 })
	waitStable(t, "the audit position", 4*time.Second, 30*time.Second, d.Position)
	d.Stop()

	st := openStore(t, s)
	chain := st.Capabilities().Chains
	var held []engine.QuarantineEntry
	if err := st.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error { held = append(held, q); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 {
		_ = chain.ScanChain(ctx, member(d), 1, func(r engine.AuditRecord) error {
			t.Logf("record %d: %s dup=%v %q", r.Position, r.Outcome, r.Dup, r.Reason)
			return nil
		})
		t.Fatalf("%d quarantine entries, want 2 (one below the window, one malformed): %+v", len(held), held)
	}
	var again int
	err := chain.ScanChain(ctx, member(d), 1, func(r engine.AuditRecord) error {
		if r.Position <= 3 {
			return nil
		}
		if r.Outcome != engine.Duplicate.String() {
			t.Errorf("record %d, delivered again: %s (%s), want a duplicate", r.Position, r.Outcome, r.Reason)
		}
		if strings.Contains(r.Reason, "held in quarantine as #") {
			again++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if again != 2 {
		t.Errorf("%d records of a held message delivered again naming its entry, want 2", again)
	}
	if out := d.run("audit", "verify"); !strings.Contains(out, "intact") {
		t.Errorf("audit verify: %s", out)
	}
	var below uint64
	for _, q := range held {
		if q.Outcome == engine.Quarantined.String() {
			below = q.ID
		}
	}
	if out := d.run("quarantine", "release", fmt.Sprint(below)); !strings.Contains(out, "released: applied") {
		t.Errorf("release #%d: %s, want it applied", below, out)
	}
	if out := d.run("state"); !strings.Contains(out, "count=2") {
		t.Errorf("state after the release:\n%s\nwant src/s1 count=2: sequences 5000 and 1 applied once each", out)
	}
}
