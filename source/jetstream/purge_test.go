package jetstream_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
	"github.com/replayguard/replayguard/source/jetstream"
)

// gate is a Processor whose Process calls wait while it is shut: a store
// so slow that the server holds the feed back at max_ack_pending.
type gate struct {
	p    jetstream.Processor
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newGate(p jetstream.Processor) *gate {
	g := &gate{p: p, open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) shut() { g.mu.Lock(); g.open = make(chan struct{}); g.mu.Unlock() }

func (g *gate) release() { g.mu.Lock(); close(g.open); g.mu.Unlock() }

func (g *gate) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	<-open
	return g.p.Process(ctx, msgs)
}

// slowConsumer runs a consumer of the test stream, with no subject filter,
// through a gate, holding at most two messages, checking the stream every
// 20ms; it returns the gate, the consumer's logs and its events.
func slowConsumer(t *testing.T, n *testbroker.NATS, e *engine.Engine) (*running, *gate, *logBuffer, *consumetest.Events) {
	t.Helper()
	cfg, logs := routedConfig(t, n.URL())
	logs.lostExpected = true
	cfg.MaxAckPending, cfg.BatchSize = 2, 1
	events := &consumetest.Events{}
	cfg.Observer = events
	g := newGate(e)
	r := start(t, cfg, g)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	return r, g, logs, events
}

// heldBack waits until the server has delivered held messages to the
// consumer, unacknowledged, and holds pending more back.
func heldBack(t *testing.T, n *testbroker.NATS, held int, pending uint64) {
	t.Helper()
	waitFor(t, "the feed held back at max_ack_pending", 10*time.Second, func() bool {
		info, err := n.ConsumerInfo(testStream, testConsumer)
		return err == nil && info.NumAckPending == held && info.NumPending == pending
	})
}

// lostLines returns the consumer's log lines telling messages it never
// received.
func lostLines(logs *logBuffer) []string {
	var out []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "never received") {
			out = append(out, line)
		}
	}
	return out
}

// A purge of messages the server had not yet delivered to the consumer
// (a store so slow that the feed waits at max_ack_pending) makes the
// server move the consumer past them at once: they are never decided. The
// consumer tells exactly the stream sequences lost, and counts them; the
// messages it held when the purge came are decided, and a purge of only
// those, or of messages decided already, tells nothing.
func TestAPurgeOfMessagesTheConsumerHadNotReceivedIsToldWithTheirSequences(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	r, g, logs, events := slowConsumer(t, n, e)
	publishAll(t, n, readings(5, "m1")) // 1 to 5
	allAcked(t, n, 10*time.Second)

	// Decided and in hand only: nothing lost.
	g.shut()
	publishAll(t, n, readings(7, "m1")[5:]) // 6 and 7, held
	heldBack(t, n, 2, 0)
	if got := n.PurgeStream(testStream); got != 7 {
		t.Fatalf("purged %d messages, want 7", got)
	}
	g.release()
	waitFor(t, "readings 1 to 7 decided", 10*time.Second, func() bool { return kwh(e, "m1") == "7" })

	// 8 and 9 held, 10 to 17 waiting at the server; keeping the last 3
	// removes 1 to 14: 10 to 14 are lost, 15 to 17 are delivered.
	g.shut()
	publishAll(t, n, readings(17, "m1")[7:])
	heldBack(t, n, 2, 8)
	if got := n.PurgeStream(testStream, natsjs.WithPurgeKeep(3)); got != 7 {
		t.Fatalf("purged %d messages, want 7", got)
	}
	g.release()
	// nats-server 2.9 does not wake a pull request that waits on a purge:
	// the next message published does.
	publishAll(t, n, readings(18, "m1")[17:])
	waitFor(t, "readings 8, 9 and 15 to 18 decided", 10*time.Second, func() bool { return kwh(e, "m1") == "13" })
	waitFor(t, "the lost messages told", 10*time.Second, func() bool { return len(lostLines(logs)) > 0 })
	lines := lostLines(logs)
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "from_sequence=10 through_sequence=14 messages=5 ") {
		t.Errorf("lost messages told as %q, want one error naming stream sequences 10 to 14, 5 messages", lines)
	}
	if got := events.Sum(source.Lost); got != 5 {
		t.Errorf("%d messages counted lost, want 5", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// A purge of one subject removes its messages from the middle of the
// stream, and nats-server 2.9 moves the consumer to that subject's first
// message left, past every other subject's messages it had not yet
// delivered, which the stream keeps. The consumer tells both, apart: the
// messages removed, and those the stream still holds, with their stream
// sequences, to take them from there.
func TestAPurgeOfOneSubjectTellsTheMessagesRemovedAndThosePassedOver(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	r, g, logs, events := slowConsumer(t, n, e)
	publishAll(t, n, readings(2, "m1", "m2")) // 1 to 4: m1 at odd sequences, m2 at even ones
	allAcked(t, n, 10*time.Second)

	// 5 (m1) and 6 (m2) held, 7 to 12 waiting at the server.
	g.shut()
	publishAll(t, n, readings(6, "m1", "m2")[4:])
	heldBack(t, n, 2, 6)
	if got := n.PurgeStream(testStream, natsjs.WithPurgeSubject("plant.m2.energy")); got != 6 {
		t.Fatalf("purged %d messages, want 6", got)
	}
	g.release()
	waitFor(t, "readings 1 to 3 of each meter decided", 10*time.Second, func() bool { return kwh(e, "m1") == "3" && kwh(e, "m2") == "3" })
	waitFor(t, "the lost messages told", 10*time.Second, func() bool { return len(lostLines(logs)) >= 2 })
	lines := lostLines(logs)
	removed := "from_sequence=8 through_sequence=12 messages=3 sequences=8,10,12"
	held := "from_sequence=7 through_sequence=11 messages=3 sequences=7,9,11"
	if len(lines) != 2 || !strings.Contains(lines[0]+lines[1], "stream removed messages") || !strings.Contains(lines[0]+lines[1], removed) ||
		!strings.Contains(lines[0]+lines[1], "still holds") || !strings.Contains(lines[0]+lines[1], held) {
		t.Errorf("lost messages told as %q, want one error with %s removed, one with %s the stream still holds", lines, removed, held)
	}
	if got := n.StreamMessages(testStream); got != 6 {
		t.Errorf("the stream holds %d messages, want 6: m1's 1 to 6", got)
	}
	if got := events.Sum(source.Lost); got != 6 {
		t.Errorf("%d messages counted lost, want 6", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// A consumer that takes part of the stream (jetstream.subjects) cannot
// tell which of the messages removed before it received them were its
// own: it tells the stream sequences from the last one it received or
// passed, as an upper bound.
func TestAPurgeAheadOfAFilteredConsumerIsToldAsAnUpperBound(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	logs.lostExpected = true
	cfg.MaxAckPending, cfg.BatchSize = 2, 1
	cfg.Subjects = []string{"plant.m1.energy"}
	g := newGate(e)
	r := start(t, cfg, g)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	publishAll(t, n, readings(2, "m1", "m2")) // 1 to 4: m1 at odd sequences
	waitFor(t, "m1's readings 1 and 2 decided", 10*time.Second, func() bool { return kwh(e, "m1") == "2" })

	// m1's 5 and 7 held, its 9 and 11 waiting at the server; a purge up to
	// 11 removes m1's 9 and m2's 8 and 10.
	g.shut()
	publishAll(t, n, readings(6, "m1", "m2")[4:])
	heldBack(t, n, 2, 2)
	if got := n.PurgeStream(testStream, natsjs.WithPurgeSequence(11)); got != 10 {
		t.Fatalf("purged %d messages, want 10", got)
	}
	g.release()
	publishAll(t, n, readings(7, "m1")[6:]) // wakes the pull request that waits
	waitFor(t, "m1's readings 3, 4, 6 and 7 decided", 10*time.Second, func() bool { return kwh(e, "m1") == "6" })
	waitFor(t, "the lost messages told", 10*time.Second, func() bool { return len(lostLines(logs)) > 0 })
	lines := lostLines(logs)
	if len(lines) != 1 || !strings.Contains(lines[0], "from_sequence=8 through_sequence=10 messages_at_most=3") ||
		!strings.Contains(lines[0], "jetstream.subjects") {
		t.Errorf("lost messages told as %q, want one error naming stream sequences 8 to 10, at most 3 messages, some perhaps not the consumer's", lines)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// Members of a group share one durable consumer, and none receives every
// delivery: a member cannot tell the messages another one received from
// those nobody did. Each tells what the stream removed beyond what it
// knows was delivered: exactly, when it can show that no delivery since
// went elsewhere, else as an upper bound saying that another member may
// have decided some.
func TestAPurgeAheadOfAGroupIsToldByEachMemberExactlyOrAsAnUpperBound(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	type member struct {
		r    *running
		g    *gate
		logs *logBuffer
	}
	var members []member
	for range 2 {
		cfg, logs := routedConfig(t, n.URL())
		logs.lostExpected = true
		cfg.MaxAckPending, cfg.BatchSize = 2, 1
		g := newGate(e)
		members = append(members, member{start(t, cfg, g), g, logs})
	}
	for _, m := range members {
		waitFor(t, "the member bound", 10*time.Second, m.r.Ready)
	}
	publishAll(t, n, readings(4, "m1")) // 1 to 4
	allAcked(t, n, 10*time.Second)

	for _, m := range members {
		m.g.shut()
	}
	publishAll(t, n, readings(14, "m1")[4:]) // 5 and 6 held, 7 to 14 waiting
	heldBack(t, n, 2, 8)
	if got := n.PurgeStream(testStream, natsjs.WithPurgeKeep(3)); got != 11 {
		t.Fatalf("purged %d messages, want 11", got)
	}
	for _, m := range members {
		m.g.release()
	}
	publishAll(t, n, readings(15, "m1")[14:]) // wakes the pull requests that wait
	waitFor(t, "readings 5, 6 and 12 to 15 decided", 10*time.Second, func() bool { return kwh(e, "m1") == "10" })
	for i, m := range members {
		waitFor(t, "the lost messages told", 10*time.Second, func() bool { return len(lostLines(m.logs)) > 0 })
		lines := lostLines(m.logs)
		exact := len(lines) == 1 && strings.Contains(lines[0], "from_sequence=7 through_sequence=11 messages=5 ") && !strings.Contains(lines[0], "another member")
		bound := len(lines) == 1 && strings.Contains(lines[0], "through_sequence=11 messages_at_most=") && strings.Contains(lines[0], "another member of the group")
		if !exact && !bound {
			t.Errorf("member %d told lost messages as %q, want one error naming stream sequences 7 to 11, or through 11 as an upper bound that another member may have decided some", i, lines)
		}
	}
	for _, m := range members {
		if err := m.r.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// A durable made elsewhere to deliver only new messages never delivers
// those the stream held when it was made: they are no loss, and are not
// told. A purge after its start, of messages it had not received yet, is
// told all the same, and only it.
func TestADurableMadeToDeliverNewMessagesTellsNoneBeforeItsStartLostButAPurgeAfterIt(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, readings(3, "m1")) // 1 to 3, before the consumer's start
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy, DeliverPolicy: natsjs.DeliverNewPolicy, MaxDeliver: -1})
	e, _ := meters(t)
	r, g, logs, events := slowConsumer(t, n, e)
	publishAll(t, n, readings(5, "m1")[3:]) // 4 and 5
	allAcked(t, n, 10*time.Second)
	if got := kwh(e, "m1"); got != "2" {
		t.Fatalf("meter/m1 kwh = %s, want 2: readings 4 and 5 only", got)
	}

	// 6 and 7 held, 8 to 12 waiting at the server; keeping the last 3
	// removes 1 to 9: 8 and 9 are lost, 10 to 12 are delivered.
	g.shut()
	publishAll(t, n, readings(12, "m1")[5:])
	heldBack(t, n, 2, 5)
	if got := n.PurgeStream(testStream, natsjs.WithPurgeKeep(3)); got != 9 {
		t.Fatalf("purged %d messages, want 9", got)
	}
	g.release()
	publishAll(t, n, readings(13, "m1")[12:]) // wakes the pull request the purge left waiting
	waitFor(t, "readings 4 to 7 and 10 to 13 decided", 10*time.Second, func() bool { return kwh(e, "m1") == "8" })
	waitFor(t, "the lost messages told", 10*time.Second, func() bool { return len(lostLines(logs)) > 0 })
	lines := lostLines(logs)
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "from_sequence=8 through_sequence=9 messages=2 ") {
		t.Errorf("lost messages told as %q, want one error naming stream sequences 8 and 9, 2 messages", lines)
	}
	if got := events.Sum(source.Lost); got != 2 {
		t.Errorf("%d messages counted lost, want 2", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
