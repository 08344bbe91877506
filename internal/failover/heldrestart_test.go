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

// TestAHeldMessageDeliveredAgainAfterABrokerRestartKeepsOneEntry: a
// message held below its source's window is committed, and Mosquitto is
// stopped and started again before the consumer's acknowledgement
// reaches it. The broker's persistent session delivers the message again
// to the running consumer, on the embedded store, PostgreSQL or Redis:
// it is a duplicate of the open entry that holds it, so the quarantine
// holds one entry, which a release applies once. Without the index of
// open entries it was held under a second entry, each applying the
// message once released after window.ttl.
func TestAHeldMessageDeliveredAgainAfterABrokerRestartKeepsOneEntry(t *testing.T) {
	for _, kind := range []string{config.StoreEmbedded, config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { heldOnceAfterABrokerRestart(t, kind) })
	}
}

func heldOnceAfterABrokerRestart(t *testing.T, kind string) {
	skipShort(t)
	// Long enough a hold between commit and acknowledgement for the
	// broker's restart to land in it every time.
	t.Setenv("REPLAYGUARD_FAILPOINT_BEFORE_ACK", "3s")
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	o := setupOptions{API: true}
	if kind != config.StoreEmbedded {
		server := startStoreServer(t, kind)
		o.Store, o.ShareGroup = fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL()), shareGroup
	}
	s := newSetupWith(t, []string{broker.URL()}, o)
	d := startDaemon(t, s)
	d.WaitReady()
	pub := newPublisher(t, []string{broker.URL()}, 10)
	ctx := context.Background()
	for _, p := range []string{
		`{"source_id":"s1","boot_id":1,"sequence":5000,"value":1}`,
		`{"source_id":"s1","boot_id":1,"sequence":1,"value":1}`, // below the window
	} {
		if !pub.Send(ctx, topicPrefix+"s1", []byte(p)) {
			t.Fatalf("publish %s: not acknowledged", p)
		}
	}
	waitFor(t, "the two messages committed", 15*time.Second, func() bool { return d.Position() >= 2 })
	broker.Restart() // SIGTERM: Mosquitto saves the session, the held message unacknowledged in it
	waitFor(t, "the held message delivered again", 30*time.Second, func() bool { return d.Position() > 2 })
	waitStable(t, "the audit position", 4*time.Second, 30*time.Second, d.Position)
	d.Stop()

	st := openStore(t, s)
	var held []engine.QuarantineEntry
	if err := st.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error { held = append(held, q); return nil }); err != nil {
		t.Fatal(err)
	}
	var recs []engine.AuditRecord
	keep := func(r engine.AuditRecord) error { recs = append(recs, r); return nil }
	var err error
	if chains := st.Capabilities().Chains; chains != nil {
		err = chains.ScanChain(ctx, member(d), 1, keep)
	} else {
		err = st.ScanAudit(ctx, 1, keep)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 {
		for _, r := range recs {
			t.Logf("record %d: %s dup=%v %q", r.Position, r.Outcome, r.Dup, r.Reason)
		}
		t.Fatalf("%d quarantine entries, want 1: the message below the window, held once", len(held))
	}
	again := 0
	want := fmt.Sprintf("delivered again: held in quarantine as #%d, an open entry of the same key and content", held[0].ID)
	for _, r := range recs[2:] {
		if r.Outcome != engine.Duplicate.String() {
			t.Errorf("record %d, delivered again: %s (%s), want a duplicate", r.Position, r.Outcome, r.Reason)
		}
		if strings.HasPrefix(r.Reason, want) {
			again++
		}
	}
	if again == 0 {
		t.Errorf("no record of the held message delivered again names entry #%d (%d records after the first two)", held[0].ID, len(recs)-2)
	}
	st.Close()
	if out := d.run("audit", "verify"); !strings.Contains(out, "intact") {
		t.Errorf("audit verify: %s", out)
	}
	if out := d.run("quarantine", "release", fmt.Sprint(held[0].ID)); !strings.Contains(out, "released: applied") {
		t.Errorf("release #%d: %s, want it applied", held[0].ID, out)
	}
	if out := d.run("state"); !strings.Contains(out, "count=2") {
		t.Errorf("state after the release:\n%s\nwant src/s1 count=2: sequences 5000 and 1 applied once each", out)
	}
}
