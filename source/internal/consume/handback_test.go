package consume

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
)

// sharedStore stands in for an engine on a shared store, whose batches are
// decided on their own: the first batch submitted is held, the second is
// committed within Submit and then the first fails; later batches are
// refused at once. Every commit writes one audit record per delivery,
// applied the first time its topic is decided, duplicate after. process,
// when set, runs before each Process; an error from it fails the call.
type sharedStore struct {
	mu        sync.Mutex
	audited   map[string][]string // per topic, the outcome of each record
	submitted int
	first     chan struct{} // closed to land the first batch's commit
	process   func() error
}

func (s *sharedStore) decide(msgs []engine.Message) []engine.Decision {
	for _, m := range msgs {
		outcome := engine.Applied.String()
		if len(s.audited[m.Topic]) > 0 {
			outcome = engine.Duplicate.String()
		}
		s.audited[m.Topic] = append(s.audited[m.Topic], outcome)
	}
	return make([]engine.Decision, len(msgs))
}

func (s *sharedStore) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	if s.process != nil {
		if err := s.process(); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decide(msgs), nil
}

func (s *sharedStore) SubmitLanded(_ context.Context, msgs []engine.Message) (<-chan struct{}, func() ([]engine.Decision, error), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.submitted++
	switch s.submitted {
	case 1:
		s.first = make(chan struct{})
		return s.first, func() ([]engine.Decision, error) { return nil, errors.New("store down") }, nil
	case 2:
		out := s.decide(msgs)
		landed := make(chan struct{})
		close(landed)
		close(s.first)
		return landed, func() ([]engine.Decision, error) { return out, nil }, nil
	}
	return nil, nil, errors.New("refused")
}

// TestABatchCommittedBehindAFailedOneIsDecidedOnceAtAStop: on a shared
// store, a batch decided while the one before it commits is committed on
// its own; the one before fails, and the loop is stopped while it commits
// that one again. The committed batch waits to be acknowledged after it:
// the drain must acknowledge it once the failed one is committed, in
// order, without deciding it again (a second, duplicate, audit record for
// a delivery already applied) nor counting it abandoned; and every
// delivery received ends decided or abandoned, once (in flight 0).
func TestABatchCommittedBehindAFailedOneIsDecidedOnceAtAStop(t *testing.T) {
	for _, drained := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		drainCtx, stopDrain := context.WithCancel(context.Background())
		st := &sharedStore{audited: map[string][]string{}}
		calls := 0
		st.process = func() error {
			if calls++; calls == 1 { // the loop commits the failed batch again: the stop comes
				cancel()
				return errors.New("store down")
			}
			if !drained { // the store is still down: the drain cannot commit either
				stopDrain()
				return errors.New("store down")
			}
			return nil
		}
		abandoned, ackDropped := 0, 0
		obs := source.ObserverFunc(func(e source.Event) {
			switch e.Kind {
			case source.Abandoned:
				abandoned += e.N
			case source.AckDropped:
				ackDropped += e.N
			}
		})
		type delivery struct{ msg engine.Message }
		msg := func(d *delivery) *engine.Message { return &d.msg }
		topicsOf := func(batch []delivery) []string {
			var out []string
			for _, d := range batch {
				out = append(out, d.msg.Topic)
			}
			return out
		}
		c := NewCommitter("test", st, Backoff{Min: time.Hour, Max: time.Hour}, obs, slog.New(slog.DiscardHandler))
		var acked []string
		q := NewQueue[delivery]()
		b := &Batches[delivery]{Name: "test", Queue: q, Size: 3, Fatal: make(chan error),
			Commit: CommitMessages(c, msg), Submit: SubmitMessages(c, msg), Land: c.Land,
			BeforeAck: func(time.Time) {},
			Ack:       func(batch []delivery) { acked = append(acked, topicsOf(batch)...) },
			Log:       slog.New(slog.DiscardHandler), Observer: obs}
		topics := []string{"t/1", "t/2", "t/3", "t/4"}
		for _, topic := range topics {
			q.Push(delivery{engine.Message{Topic: topic}})
		}
		rest, committed, err := b.Consume(ctx)
		if err != nil || !slices.Equal(topicsOf(rest), topics[:3]) || !slices.Equal(topicsOf(committed), topics[3:]) {
			t.Fatalf("Consume = %v, %v, %v; want t/1..3 uncommitted, t/4 committed", topicsOf(rest), topicsOf(committed), err)
		}
		b.Drain(drainCtx, rest, committed, q.Close())
		cancel()
		stopDrain()

		decided := 0
		for _, topic := range topics {
			decided += len(st.audited[topic])
		}
		wantAcked, wantAudited, wantAbandoned, wantAckDropped := topics, map[string][]string{}, 0, 0
		if !drained { // t/1..3 abandoned; t/4 committed, left unacknowledged: the broker sends it again
			wantAcked, wantAbandoned, wantAckDropped = nil, 3, 1
		}
		for _, topic := range topics {
			if drained || topic == "t/4" {
				wantAudited[topic] = []string{engine.Applied.String()}
			}
		}
		inFlight := len(topics) - decided - abandoned
		// Committed = acknowledged + AckDropped: t/4 is counted either way.
		if !slices.Equal(acked, wantAcked) || abandoned != wantAbandoned || ackDropped != wantAckDropped || inFlight != 0 || !equalAudit(st.audited, wantAudited) {
			t.Fatalf("drain committing %v: acked %v, audited %v, abandoned %d, ack dropped %d, in flight %d; want acked %v, audited %v, abandoned %d, ack dropped %d, in flight 0",
				drained, acked, st.audited, abandoned, ackDropped, inFlight, wantAcked, wantAudited, wantAbandoned, wantAckDropped)
		}
	}
}

func equalAudit(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
