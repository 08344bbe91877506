package jetstream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// Two consumers of one durable, each on a store that admits no other
// member (a second `replayguard run` with an embedded store of its own and
// the same jetstream.consumer): each would decide only the part of the
// stream the server deals it, and neither store would hold the whole.
// The second waits, not ready and saying why, while the first pulls, and
// binds once the first has stopped.
func TestASecondConsumerOfTheDurableOnAStoreOfItsOwnWaitsForTheFirstToStop(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	first, _ := meters(t)
	cfg, _ := routedConfig(t, n.URL())
	cfg.Alone = true
	r1 := start(t, cfg, first)
	waitFor(t, "the first consumer bound", 10*time.Second, r1.Ready)

	second, _ := meters(t)
	cfg2, logs2 := routedConfig(t, n.URL())
	cfg2.Alone = true
	r2 := start(t, cfg2, second)
	waitFor(t, "the second consumer told why it waits", 10*time.Second, func() bool {
		return logs2.has("WARN", "cannot bind", "another client")
	})
	if r2.Ready() || !strings.Contains(r2.NotReady(), "another client") {
		t.Errorf("second consumer: ready %v, %q; want not ready, saying another client pulls", r2.Ready(), r2.NotReady())
	}
	publishAll(t, n, readings(20, "m1"))
	allAcked(t, n, 10*time.Second)
	if got, other := kwh(first, "m1"), kwh(second, "m1"); got != "20" || other != "" {
		t.Errorf("meter/m1 kwh: %q in the first store, %q in the second; want 20 and none", got, other)
	}

	if err := r1.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second consumer bound once the first stopped", 10*time.Second, r2.Ready)
	publishAll(t, n, readings(21, "m1")[20:])
	allAcked(t, n, 10*time.Second)
	if got := kwh(second, "m1"); got != "1" {
		t.Errorf("meter/m1 kwh in the second store = %q, want 1", got)
	}
	if err := r2.stop(); err != nil {
		t.Fatal(err)
	}
}
