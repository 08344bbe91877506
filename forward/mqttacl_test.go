package forward_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// A broker whose ACL denies the topic of one source answers each of its
// copies with PUBACK 0x87 (not authorized); Mosquitto 2.0 then closes the
// connection. Each such copy is held, saying why, and the copies of the
// other sources go on at once: an attempt that delivered or held entries
// before it failed is progress, and the wait after it starts again from
// the shortest, rather than doubling from one denied copy to the next (to
// 30 s each, with the whole feed waiting behind the outbox).
func TestCopiesABrokersACLDeniesAreHeldWithoutSlowingTheOthers(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	lines := "topic read clean/#\n"
	for s := range 7 {
		lines += fmt.Sprintf("topic write clean/incidents/fd/e%d\n", s)
	}
	if err := os.WriteFile(acl, []byte(lines), 0o644); err != nil { // e7 denied
		t.Fatal(err)
	}
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{Extra: []string{"acl_file " + acl}})
	sub := testbroker.NewSubscriber(t, []string{broker.URL()}, "clean/#")
	r := newRig(t, engine.ForwardSpec{Topic: "clean/{topic}"}, map[string]forward.Output{engine.OutputMQTT: mqttOutput(t, broker, 64)},
		forward.Options{MinBackoff: forward.DefaultMinBackoff, MaxBackoff: forward.DefaultMaxBackoff})
	r.run()
	ctx := context.Background()
	var msgs []engine.Message
	for seq := 1; seq <= 12; seq++ {
		for s := range 8 {
			msgs = append(msgs, incident(fmt.Sprintf("e%d", s), seq))
		}
	}
	r.keys(ctx, msgs...)

	start := time.Now()
	waitFor(t, "every copy delivered or held", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
	took := time.Since(start)
	held, err := r.store.OutboxHeld(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 12 {
		t.Fatalf("%d entries held, want the 12 of e7", len(held))
	}
	for _, h := range held {
		if !strings.Contains(h.Reason, `reason code 0x87 (not authorized) for topic "clean/incidents/fd/e7"`) {
			t.Fatalf("held %d: %q", h.ID, h.Reason)
		}
	}
	got := map[string]bool{}
	waitFor(t, "the 84 others reach the subscriber", func() bool {
		for _, m := range sub.Messages() {
			got[m.User[forward.HeaderKey]] = true
		}
		return len(got) == 84
	})
	// Twelve refusals, each followed by a connection the broker closed:
	// with waits doubling from 100 ms they take more than 30 s; starting
	// again from 100 ms after each, a second or two.
	if took > 10*time.Second {
		t.Fatalf("the outbox took %v to drain past 12 refused copies", took.Round(time.Millisecond))
	}
	t.Logf("drained in %v", took.Round(time.Millisecond))
}
