package jetstream_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// water is n readings of meter m on plant.<m>.water, a subject no route of
// the tests takes.
func water(n int, m string) []testbroker.JSMessage {
	var out []testbroker.JSMessage
	for seq := 1; seq <= n; seq++ {
		out = append(out, testbroker.JSMessage{Subject: "plant." + m + ".water",
			Data: fmt.Appendf(nil, `{"seq":%d,"l":1}`, seq), ID: fmt.Sprintf("%s-water-%d", m, seq)})
	}
	return out
}

// consumeFiltered runs a consumer filtered to subjects until the server
// holds nothing unacknowledged for it, then stops it, and waits until no
// pull request of it waits at the server: one left there takes the next
// messages published and holds them unacknowledged, to be delivered again
// only after the consumer's ack wait (30 s), which the tests that follow
// would take for messages never delivered.
func consumeFiltered(t *testing.T, n *testbroker.NATS, subjects ...string) {
	t.Helper()
	e, _ := meters(t)
	cfg := testConfig(t, n.URL())
	cfg.Subjects = subjects
	r := start(t, cfg, e)
	allAcked(t, n, 10*time.Second)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no pull request of the stopped consumer waiting", 10*time.Second, func() bool {
		info, err := n.ConsumerInfo(testStream, testConsumer)
		return err == nil && info.NumWaiting == 0
	})
}

// The server keeps a durable consumer's position when its filter changes:
// jetstream.subjects widened past a filter the consumer has delivered
// through would pass over the earlier messages of the added subjects for
// good. Run refuses, naming the setting, rather than start past them.
func TestWideningTheSubjectsPastMessagesTheDurableSkippedIsRefused(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, append(readings(3, "m1"), water(3, "m1")...))
	consumeFiltered(t, n, "plant.*.water")

	e, _ := meters(t)
	runRefused(t, n, e, testConsumer, "jetstream.subjects")
	if got := kwh(e, "m1"); got != "" {
		t.Errorf("meter/m1 kwh = %s, want nothing applied", got)
	}
}

// Widening the subjects is no loss when the stream holds no message of the
// added ones up to the consumer's position: the durable is bound, and the
// messages that follow are taken. (A store of its own: a group's members
// share the durable's filter, and one whose subjects differ is refused.)
func TestWideningTheSubjectsPastNoSkippedMessageBindsTheDurable(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, water(5, "m1"))
	consumeFiltered(t, n, "plant.*.water")

	e, _ := meters(t)
	cfg := testConfig(t, n.URL())
	cfg.Alone = true // the memory store's
	r := start(t, cfg, e)
	publishAll(t, n, readings(4, "m1"))
	waitFor(t, "the readings published after the widening applied", 10*time.Second, func() bool { return kwh(e, "m1") == "4" })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// Past the messages it reads at start, the check cannot tell whether a
// message of an added subject lies below the position: the bind is
// refused, saying so, rather than started past what it could not read.
func TestWideningTheSubjectsPastMoreMessagesThanTheCheckReadsIsRefusedSayingSo(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, water(300, "m1"))
	consumeFiltered(t, n, "plant.*.water")

	e, _ := meters(t)
	runRefused(t, n, e, "first 256 messages", "cannot be told")
}
