package jetstream

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// ackedMsg is a server message whose ack is noted in acked.
type ackedMsg struct {
	subject string
	acked   *[]string
}

func (m ackedMsg) Ack(...nats.AckOpt) error {
	*m.acked = append(*m.acked, m.subject)
	return nil
}

func (m ackedMsg) Nak(...nats.AckOpt) error        { return nil }
func (m ackedMsg) InProgress(...nats.AckOpt) error { return nil }

// noting commits by noting the subjects of each batch, or fails.
type noting struct {
	fail      bool
	committed [][]string
}

func (p *noting) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	if p.fail {
		return nil, errors.New("store down")
	}
	var b []string
	for _, m := range msgs {
		b = append(b, m.Topic)
	}
	p.committed = append(p.committed, b)
	return make([]engine.Decision, len(msgs)), nil
}

// TestTheDrainAcknowledgesTheCommittedBatchItIsHandedWithoutCommittingIt:
// the loop hands the drain messages it could not commit and, behind them,
// a batch committed already (on a shared store, one decided while the one
// before it failed). The drain commits the first, then acknowledges the
// committed batch, in order, without committing it again (it would be
// decided twice); a message still coming through joins no batch ahead of
// it. When the first cannot be committed, the committed batch is
// acknowledged all the same, and not returned as abandoned: left
// unacknowledged, it came back only after AckWait, and no count had it.
func TestTheDrainAcknowledgesTheCommittedBatchItIsHandedWithoutCommittingIt(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var acked []string
		d := func(subject string) delivery {
			return delivery{msg: engine.Message{Topic: subject}, js: ackedMsg{subject: subject, acked: &acked}}
		}
		p := &noting{fail: fail}
		ctx, cancel := context.WithCancel(context.Background())
		obs := source.ObserverFunc(func(e source.Event) {
			if e.Kind == source.CommitFailed {
				cancel() // the stop's deadline
			}
		})
		c := &Consumer{cfg: Config{BatchSize: 4}, log: slog.New(slog.DiscardHandler), obs: obs, holding: newHolding(time.Second),
			commits: consume.NewCommitter("jetstream", p, consume.Backoff{Min: time.Hour, Max: time.Hour}, obs, slog.New(slog.DiscardHandler))}
		in := make(chan delivery, 1)
		in <- d("s.5")
		close(in)
		left := c.drain(ctx, []delivery{d("s.1"), d("s.2"), d("s.3")}, []delivery{d("s.4")}, in)
		cancel()
		var leftSubjects []string
		for _, l := range left {
			leftSubjects = append(leftSubjects, l.msg.Topic)
		}
		wantCommitted, wantAcked, wantLeft := [][]string{{"s.1", "s.2", "s.3"}, {"s.5"}}, []string{"s.1", "s.2", "s.3", "s.4", "s.5"}, []string(nil)
		if fail {
			wantCommitted, wantAcked, wantLeft = nil, []string{"s.4"}, []string{"s.1", "s.2", "s.3"}
		}
		if !slices.EqualFunc(p.committed, wantCommitted, slices.Equal) || !slices.Equal(acked, wantAcked) || !slices.Equal(leftSubjects, wantLeft) {
			t.Fatalf("commit failing %v: committed %q, acked %q, left %q; want committed %q, acked %q, left %q",
				fail, p.committed, acked, leftSubjects, wantCommitted, wantAcked, wantLeft)
		}
	}
}
