package jetstream_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
	"github.com/replayguard/replayguard/source/jetstream"
)

// goneLines returns the consumer's log lines telling the messages a
// deleted stream took with it.
func goneLines(logs *logBuffer) []string {
	var out []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "the stream was deleted with messages") {
			out = append(out, line)
		}
	}
	return out
}

// A stream deleted while replayguard consumes it takes with it the
// messages the consumer had not received: never decided, and nothing
// will deliver them. Here a store so slow that the server holds the feed
// back at max_ack_pending: the consumer holds stream sequences 1 and 2
// (decided once the store answers), and 3 to 15 wait at the server when
// the stream goes. Run ends saying how to resume, and an error names the
// stream and the 13 messages it had not decided, counted lost.
func TestAStreamDeletedWhileConsumedTellsTheMessagesNotDecided(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, readings(15, "m1")) // 1 to 15
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	logs.lostExpected = true
	cfg.MaxAckPending, cfg.BatchSize = 2, 1
	events := &consumetest.Events{}
	cfg.Observer = events
	g := newGate(e)
	g.shut()
	r := start(t, cfg, g)
	heldBack(t, n, 2, 13)

	n.DeleteStream(testStream)
	g.release()
	<-r.run.Done()
	if err := r.run.Err(); !errors.Is(err, jetstream.ErrConsumerDeleted) {
		t.Fatalf("Run = %v, want ErrConsumerDeleted", err)
	}
	if got := kwh(e, "m1"); got != "2" {
		t.Errorf("meter/m1 kwh = %s, want 2: the readings held when the stream went", got)
	}
	lines := goneLines(logs)
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "stream="+testStream+" ") ||
		!strings.Contains(lines[0], "from_sequence=3 through_sequence=15 messages=13 ") {
		t.Errorf("the stream's deletion told as %q, want one error naming stream %s and its sequences 3 to 15, 13 messages not decided", lines, testStream)
	}
	if got := events.Sum(source.Lost); got != 13 {
		t.Errorf("%d messages counted lost, want 13", got)
	}
}

// A stream deleted after the consumer decided every message it held
// takes nothing undecided with it: Run ends saying how to resume, and
// tells no loss.
func TestAStreamDeletedWithEveryMessageDecidedTellsNoLoss(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	cfg, logs := routedConfig(t, n.URL())
	events := &consumetest.Events{}
	cfg.Observer = events
	r := start(t, cfg, e)
	publishAll(t, n, readings(5, "m1"))
	allAcked(t, n, 10*time.Second)

	n.DeleteStream(testStream)
	<-r.run.Done()
	if err := r.run.Err(); !errors.Is(err, jetstream.ErrConsumerDeleted) {
		t.Fatalf("Run = %v, want ErrConsumerDeleted", err)
	}
	if lines := goneLines(logs); len(lines) != 0 {
		t.Errorf("a deletion with nothing undecided told as %q", lines)
	}
	if got := events.Sum(source.Lost); got != 0 {
		t.Errorf("%d messages counted lost, want 0", got)
	}
}
