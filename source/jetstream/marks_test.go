package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
	"github.com/replayguard/replayguard/source/jetstream"
	"github.com/replayguard/replayguard/store/memory"
)

// linesWith returns the log lines holding every one of parts.
func linesWith(logs *logBuffer, parts ...string) []string {
	var out []string
	for line := range strings.Lines(logs.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// markedConfig is routedConfig keeping the consumer's mark in st, with
// its events counted.
func markedConfig(t *testing.T, url string, st *memory.Store) (jetstream.Config, *logBuffer, *consumetest.Events) {
	t.Helper()
	cfg, logs := routedConfig(t, url)
	logs.lostExpected = true
	cfg.Marks = st.Capabilities().Marks
	events := &consumetest.Events{}
	cfg.Observer = events
	return cfg, logs, events
}

// decideFirst runs a consumer of cfg into e until the stream's first
// count readings of m1 are decided and acknowledged, then stops it.
func decideFirst(t *testing.T, n *testbroker.NATS, cfg jetstream.Config, p jetstream.Processor, count int) {
	t.Helper()
	r := start(t, cfg, p)
	publishAll(t, n, readings(count, "m1"))
	allAcked(t, n, 10*time.Second)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// A purge while replayguard is stopped moves the durable consumer's ack
// floor past the messages it removed: the server's state alone shows
// nothing of them. The mark the consumer kept at its stop (its ack floor,
// 5) does: the next start tells stream sequences 6 to 12 lost, counted,
// and consumes on from the stream's first message left.
func TestAPurgeWhileStoppedIsToldAtTheNextStartFromTheMarkKept(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, st := meters(t)
	cfg, logs, events := markedConfig(t, n.URL(), st)
	decideFirst(t, n, cfg, e, 5) // 1 to 5

	publishAll(t, n, readings(12, "m1")[5:]) // 6 to 12, while stopped
	if got := n.PurgeStream(testStream); got != 12 {
		t.Fatalf("purged %d messages, want 12", got)
	}
	if info, err := n.ConsumerInfo(testStream, testConsumer); err != nil || info.AckFloor.Stream != 12 {
		t.Fatalf("consumer info = %+v, %v; want the purge to have moved its ack floor to 12", info, err)
	}
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	publishAll(t, n, readings(15, "m1")[12:]) // 13 to 15
	allAcked(t, n, 10*time.Second)
	if got := kwh(e, "m1"); got != "8" {
		t.Errorf("meter/m1 kwh = %s, want 8: readings 1 to 5 and 13 to 15", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	lines := linesWith(logs, "removed messages this consumer had not decided while replayguard was stopped")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "from_sequence=6 through_sequence=12 messages=7") {
		t.Errorf("the purge while stopped told as %q, want one error naming stream sequences 6 to 12, 7 messages", lines)
	}
	if got := events.Sum(source.Lost); got != 7 {
		t.Errorf("%d messages counted lost, want 7", got)
	}
}

// A run that did not stop cleanly (killed) leaves the mark of its last
// check, kept while it ran: what it decided after that is not in it. A
// purge before the next start is then told from that mark as an upper
// bound, saying that a message decided after it is counted too.
func TestAPurgeAfterAStopThatWasNotCleanIsToldAsAnUpperBound(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, st := meters(t)
	cfg, logs, events := markedConfig(t, n.URL(), st)
	decideFirst(t, n, cfg, e, 5)
	name := testStream + "/" + testConsumer
	m, ok, err := st.StreamMark(context.Background(), name)
	if err != nil || !ok || !m.Stopped {
		t.Fatalf("mark kept at the stop = %+v, %v, %v", m, ok, err)
	}
	m.Decided, m.Stopped = 3, false // the last check's, readings 4 and 5 decided after it
	if err := st.SetStreamMark(context.Background(), name, m); err != nil {
		t.Fatal(err)
	}

	publishAll(t, n, readings(12, "m1")[5:])
	if got := n.PurgeStream(testStream); got != 12 {
		t.Fatalf("purged %d messages, want 12", got)
	}
	r := start(t, cfg, e)
	waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	lines := linesWith(logs, "removed messages this consumer had not decided while replayguard was stopped")
	if len(lines) != 1 || !strings.Contains(lines[0], "from_sequence=4 through_sequence=12 messages_at_most=9") ||
		!strings.Contains(lines[0], "did not stop cleanly: a message decided after it is counted too") {
		t.Errorf("the purge told as %q, want one error naming stream sequences 4 to 12, at most 9 messages, as the mark of a run that did not stop cleanly", lines)
	}
	if got := events.Sum(source.Lost); got != 9 {
		t.Errorf("%d messages counted lost, want 9", got)
	}
}

// undecidedAtStop runs a consumer whose every commit fails, so that it
// stops holding stream sequences 6 to 12 undecided (handed back to the
// server), after 1 to 5 were decided: the mark kept at the stop says so.
func undecidedAtStop(t *testing.T, n *testbroker.NATS, cfg jetstream.Config, e *engine.Engine, st *memory.Store) {
	t.Helper()
	decideFirst(t, n, cfg, e, 5)
	publishAll(t, n, readings(12, "m1")[5:])
	failing := newRecorder(e)
	failing.fail.Store(1 << 20)
	cfg.ShutdownTimeout = 200 * time.Millisecond
	r := start(t, cfg, failing)
	waitFor(t, "a commit attempted", 10*time.Second, func() bool { return failing.fail.Load() < 1<<20 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	m, ok, err := st.StreamMark(context.Background(), testStream+"/"+testConsumer)
	if err != nil || !ok || m.Decided != 5 || m.End != 12 || !m.Stopped {
		t.Fatalf("mark kept at the stop = %+v, %v, %v; want decided through 5 of 12, kept at the stop", m, ok, err)
	}
}

// A stream deleted while replayguard is stopped takes with it the
// messages the consumer had not decided. The next start finds no stream
// and refuses, as before, and tells them first from the mark kept at the
// stop: stream sequences 6 to 12. Once the stream is created again, the
// start after refuses (the consumer is missing) and tells nothing again.
func TestAStreamDeletedWhileStoppedIsToldAtTheNextStartFromTheMarkKept(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, st := meters(t)
	cfg, logs, events := markedConfig(t, n.URL(), st)
	undecidedAtStop(t, n, cfg, e, st)

	n.DeleteStream(testStream)
	c, err := jetstream.New(cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, jetstream.ErrStream) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("Run = %v, want ErrStream: the stream is not found", err)
	}
	told := "the stream was deleted with messages this consumer had not decided, while replayguard was stopped"
	lines := linesWith(logs, told)
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "stream="+testStream+" ") ||
		!strings.Contains(lines[0], "from_sequence=6 through_sequence=12 messages=7") {
		t.Errorf("the deletion while stopped told as %q, want one error naming stream %s and its sequences 6 to 12, 7 messages", lines, testStream)
	}
	if got := events.Sum(source.Lost); got != 7 {
		t.Errorf("%d messages counted lost, want 7", got)
	}

	n.CreateStream(testStream, "plant.>")
	if err := c.Run(ctx); !errors.Is(err, jetstream.ErrStream) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Run = %v, want ErrStream: the durable consumer is missing", err)
	}
	if lines := linesWith(logs, told); len(lines) != 1 {
		t.Errorf("the deletion told %d times, want once: %q", len(lines), lines)
	}
	if got := events.Sum(source.Lost); got != 7 {
		t.Errorf("%d messages counted lost, want 7, told once", got)
	}
}

// A stream deleted and created again while replayguard is stopped is
// another stream, its sequences starting over: the next start tells the
// messages the one deleted took with it, from the mark kept at the stop,
// and refuses as before, the durable consumer missing.
func TestAStreamCreatedAgainWhileStoppedIsToldAtTheNextStartFromTheMarkKept(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, st := meters(t)
	cfg, logs, events := markedConfig(t, n.URL(), st)
	undecidedAtStop(t, n, cfg, e, st)

	n.DeleteStream(testStream)
	n.CreateStream(testStream, "plant.>")
	c, err := jetstream.New(cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, jetstream.ErrStream) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Run = %v, want ErrStream: the durable consumer is missing", err)
	}
	lines := linesWith(logs, "the stream was deleted with messages this consumer had not decided", "created again")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "from_sequence=6 through_sequence=12 messages=7") {
		t.Errorf("the stream created again told as %q, want one error naming stream sequences 6 to 12 of the one deleted, 7 messages", lines)
	}
	if got := events.Sum(source.Lost); got != 7 {
		t.Errorf("%d messages counted lost, want 7", got)
	}
}

// After a stream was created again while replayguard was stopped, every
// start refuses saying to create the consumer from the new stream's first
// message, never at a sequence, which would pass over the new stream's
// first messages. Made elsewhere to start past them anyway, the consumer
// is bound, and the messages it passes over are told lost.
func TestAStreamCreatedAgainWhileStoppedIsResumedFromItsFirstMessageAndAStartPastItIsTold(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, st := meters(t)
	cfg, logs, events := markedConfig(t, n.URL(), st)
	decideFirst(t, n, cfg, e, 5) // 1 to 5 of the stream deleted

	n.DeleteStream(testStream)
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, readings(8, "m1")[5:]) // readings 6 to 8, stream sequences 1 to 3
	for start := range 2 {
		c, err := jetstream.New(cfg, e)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = c.Run(ctx)
		cancel()
		if !errors.Is(err, jetstream.ErrStream) || !strings.Contains(err.Error(), "--deliver all") || strings.Contains(err.Error(), "--deliver SEQ") {
			t.Fatalf("start %d: Run = %v, want ErrStream saying to create the consumer with --deliver all", start+1, err)
		}
	}
	lost := events.Sum(source.Lost) // none: 1 to 5 were decided
	durableMadeElsewhere(t, n, natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy, MaxDeliver: -1,
		DeliverPolicy: natsjs.DeliverByStartSequencePolicy, OptStartSeq: 3})
	r := start(t, cfg, e)
	allAcked(t, n, 10*time.Second)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := kwh(e, "m1"); got != "6" {
		t.Errorf("meter/m1 kwh = %s, want 6: readings 1 to 5, and 8 from stream sequence 3", got)
	}
	lines := linesWith(logs, "level=ERROR", "made elsewhere to start past messages of the stream this store never decided")
	if len(lines) != 1 || !strings.Contains(lines[0], "from_sequence=1 through_sequence=2 messages=2") || !strings.Contains(lines[0], "--deliver 1 ") {
		t.Errorf("the start past the new stream's first messages told as %q, want one error naming stream sequences 1 to 2, 2 messages", lines)
	}
	if got := events.Sum(source.Lost) - lost; got != 2 {
		t.Errorf("%d messages counted lost at the start past them, want 2", got)
	}
}
