package consume

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
)

// failing fails its first n calls.
type failing struct{ n, calls int }

func (f *failing) Process(context.Context, []engine.Message) ([]engine.Decision, error) {
	f.calls++
	if f.calls <= f.n {
		return nil, errors.New("store down")
	}
	return nil, nil
}

func TestCommitter(t *testing.T) {
	retry := Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}
	t.Run("retries a failing batch until it commits, and is not OK meanwhile", func(t *testing.T) {
		p := &failing{n: 2}
		var kinds []source.EventKind
		var c *Committer
		retried := 0
		c = NewCommitter("test", p, retry, source.ObserverFunc(func(e source.Event) {
			kinds = append(kinds, e.Kind)
			if e.Kind == source.CommitFailed {
				retried++
				if c.OK() {
					t.Error("OK while the batch fails")
				}
				if got := c.Failure(); got != "the last commit failed: store down" {
					t.Errorf("Failure %q while the batch fails", got)
				}
			}
			if e.N != 3 {
				t.Errorf("%v for %d messages, want 3", e.Kind, e.N)
			}
		}), slog.New(slog.DiscardHandler))
		err := c.Commit(context.Background(), make([]engine.Message, 3))
		if err != nil || p.calls != 3 || retried != 2 || !c.OK() || c.Failure() != "" {
			t.Fatalf("err %v after %d calls, %d retries, OK %v, failure %q", err, p.calls, retried, c.OK(), c.Failure())
		}
		want := []source.EventKind{source.CommitFailed, source.CommitFailed, source.Committed}
		if len(kinds) != len(want) || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
			t.Fatalf("events %v, want %v", kinds, want)
		}
	})
	t.Run("gives up with nothing committed when ctx is done", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		c := NewCommitter("test", &failing{n: 1 << 30}, Backoff{Min: time.Hour, Max: time.Hour},
			source.ObserverFunc(func(source.Event) { cancel() }), slog.New(slog.DiscardHandler))
		if err := c.Commit(ctx, make([]engine.Message, 1)); !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit = %v, want context.Canceled", err)
		}
		if c.OK() {
			t.Fatal("OK after a failed attempt")
		}
	})
}

func TestMessages(t *testing.T) {
	type delivery struct {
		msg engine.Message
		gen uint64
	}
	batch := []delivery{{msg: engine.Message{Topic: "a"}, gen: 1}, {msg: engine.Message{Topic: "b"}, gen: 2}}
	msgs := Messages(batch, func(d *delivery) *engine.Message { return &d.msg })
	if len(msgs) != 2 || msgs[0].Topic != "a" || msgs[1].Topic != "b" {
		t.Fatalf("messages %+v, want the batch's in order", msgs)
	}
}

// marking notes in the messages it is given, as the engine notes what a
// batch's first part committed, then fails, ending ctx; later calls record
// what they are given and succeed.
type marking struct {
	cancel context.CancelFunc
	calls  int
	got    []engine.Message
}

func (m *marking) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	if m.calls++; m.calls == 1 {
		msgs[0].Broker = "noted by the first attempt"
		m.cancel()
		return nil, errors.New("the second part failed")
	}
	m.got = msgs
	return nil, nil
}

// A batch whose commit ends with the stop keeps in its deliveries what
// the attempts noted in its messages, so that the drain passes the same
// messages again (Processor: what was committed of a batch is not decided
// twice).
func TestACommitThatStopsKeepsWhatItNotedInTheDeliveries(t *testing.T) {
	type delivery struct{ msg engine.Message }
	ctx, cancel := context.WithCancel(context.Background())
	p := &marking{cancel: cancel}
	commit := CommitMessages(NewCommitter("test", p, Backoff{Min: time.Hour, Max: time.Hour}, source.ObserverFunc(func(source.Event) {}),
		slog.New(slog.DiscardHandler)), func(d *delivery) *engine.Message { return &d.msg })
	batch := []delivery{{engine.Message{Topic: "a"}}, {engine.Message{Topic: "b"}}}
	if err := commit(ctx, batch); !errors.Is(err, context.Canceled) {
		t.Fatalf("first commit: %v, want context.Canceled", err)
	}
	if err := commit(context.Background(), batch); err != nil { // the drain
		t.Fatal(err)
	}
	if len(p.got) != 2 || p.got[0].Broker != "noted by the first attempt" || p.got[1].Topic != "b" {
		t.Fatalf("the drain passed %+v, not the messages the first attempt noted in", p.got)
	}
}

// submitting is a Submitter whose commits fail while fail is set; each
// attempt notes itself in its first message, as a shared store's partial
// commit does.
type submitting struct {
	failing
	fail bool
}

func (s *submitting) SubmitLanded(_ context.Context, msgs []engine.Message) (<-chan struct{}, func() ([]engine.Decision, error), error) {
	msgs[0].Broker = "noted by the attempt"
	fail := s.fail
	landed := make(chan struct{})
	close(landed)
	return landed, func() ([]engine.Decision, error) {
		if fail {
			return nil, errors.New("store down")
		}
		return make([]engine.Decision, len(msgs)), nil
	}, nil
}

func TestCommitterSubmit(t *testing.T) {
	type delivery struct{ msg engine.Message }
	msg := func(d *delivery) *engine.Message { return &d.msg }
	var kinds []source.EventKind
	obs := source.ObserverFunc(func(e source.Event) { kinds = append(kinds, e.Kind) })
	t.Run("a Processor that cannot submit gets no flight", func(t *testing.T) {
		c := NewCommitter("test", &failing{}, Backoff{}, obs, slog.New(slog.DiscardHandler))
		if f := SubmitMessages(c, msg)(context.Background(), make([]delivery, 1)); f != nil {
			t.Fatal("a flight from a Processor that cannot submit")
		}
	})
	t.Run("a flight that lands is reported committed", func(t *testing.T) {
		kinds = nil
		c := NewCommitter("test", &submitting{}, Backoff{}, obs, slog.New(slog.DiscardHandler))
		batch := make([]delivery, 2)
		if err := c.Land(SubmitMessages(c, msg)(context.Background(), batch)); err != nil || !c.OK() {
			t.Fatalf("Land = %v, OK %v", err, c.OK())
		}
		if len(kinds) != 1 || kinds[0] != source.Committed || batch[0].msg.Broker != "" {
			t.Fatalf("events %v, first delivery %+v", kinds, batch[0].msg)
		}
	})
	t.Run("a flight that fails is reported, is not OK, and keeps what the attempt noted in its deliveries", func(t *testing.T) {
		kinds = nil
		c := NewCommitter("test", &submitting{fail: true}, Backoff{}, obs, slog.New(slog.DiscardHandler))
		batch := make([]delivery, 2)
		if err := c.Land(SubmitMessages(c, msg)(context.Background(), batch)); err == nil || c.OK() {
			t.Fatalf("Land = %v, OK %v; want the failure", err, c.OK())
		}
		if len(kinds) != 1 || kinds[0] != source.CommitFailed || batch[0].msg.Broker != "noted by the attempt" {
			t.Fatalf("events %v, first delivery %+v", kinds, batch[0].msg)
		}
	})
}
