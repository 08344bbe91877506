package consume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/store/memory"
)

// failOnceStore holds its first commit until gate is closed, then fails it;
// every later commit goes through.
type failOnceStore struct {
	*memory.Store
	gate  chan struct{}
	calls atomic.Int32
}

func (s *failOnceStore) Commit(ctx context.Context, b *engine.Batch) error {
	if s.calls.Add(1) == 1 {
		<-s.gate
		return errors.New("injected commit failure")
	}
	return s.Store.Commit(ctx, b)
}

var orderRoute = engine.Route{
	Name: "incidents", Topic: "incidents/#",
	Source: []string{"agency", "source_id"}, Sequence: "sequence", Epoch: "boot_id",
	Effects: []engine.EffectSpec{{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "casualty_delta"}}},
}

func orderUpdate(seq, delta int) engine.Message {
	return engine.Message{Topic: "incidents/fd", Payload: []byte(fmt.Sprintf(
		`{"agency":"fd","source_id":"e1","boot_id":1,"sequence":%d,"incident_id":1,"casualty_delta":%d}`, seq, delta))}
}

// TestABatchHeldBehindAFailedCommitIsNotCommittedAheadOfIt: a batch
// collected while the one before it commits, whose Submit is held (by the
// outbox's Admit here; trim, waiting for the commits in flight, holds it
// too) until that commit has failed, is refused: decided on the reloaded
// state, it would commit ahead of the failed batch, whose older sequence
// would then fall below the window. The failure is taken by Land, on the
// loop's goroutine, not when the commit lands.
func TestABatchHeldBehindAFailedCommitIsNotCommittedAheadOfIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &failOnceStore{Store: memory.New(), gate: make(chan struct{})}
	var admits atomic.Int32
	admitting, admit := make(chan struct{}), make(chan struct{})
	e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{orderRoute}, SequenceSpan: 64,
		Admit: func(context.Context, func() int) error {
			if admits.Add(1) == 2 { // the second batch waits for room in the outbox
				close(admitting)
				<-admit
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	type delivery struct{ msg engine.Message }
	msg := func(d *delivery) *engine.Message { return &d.msg }
	c := NewCommitter("test", e, Backoff{Min: time.Millisecond, Max: time.Millisecond}, source.ObserverFunc(func(source.Event) {}), slog.New(slog.DiscardHandler))
	batches := [][]delivery{{{orderUpdate(1, 1)}}, {{orderUpdate(100, 2)}}}
	flights := make(chan *Flight, 4)
	submit := SubmitMessages(c, msg)
	var mu sync.Mutex
	var acked []string
	acks := make(chan struct{}, 4)
	l := Loop[delivery]{Size: 4,
		Collect: func(ctx context.Context, _ <-chan struct{}) ([]delivery, error) {
			if len(batches) > 0 {
				b := batches[0]
				batches = batches[1:]
				return b, nil
			}
			<-ctx.Done()
			return nil, nil
		},
		Commit: CommitMessages(c, msg),
		Submit: func(ctx context.Context, b []delivery) *Flight {
			f := submit(ctx, b)
			flights <- f
			return f
		},
		Land:      c.Land,
		BeforeAck: func(time.Time) {},
		Ack: func(b []delivery) {
			mu.Lock()
			for _, d := range b {
				acked = append(acked, string(d.msg.Payload))
				acks <- struct{}{}
			}
			mu.Unlock()
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	first := <-flights // [seq 1], its commit held
	<-admitting        // [seq 100] collected, its Submit waiting in Admit
	close(st.gate)     // [seq 1]'s commit fails
	<-first.Landed()
	close(admit)
	<-acks
	<-acks
	cancel()
	<-done
	if len(acked) != 2 || !strings.Contains(acked[0], `"sequence":1,`) {
		t.Fatalf("acked %q, want seq 1 then seq 100", acked)
	}
	got, _ := json.Marshal(engine.StateJSON(e.State()))
	if !strings.Contains(string(got), `"casualties":3`) {
		t.Fatalf("state %s, want 3 casualties: the batch behind the failed one committed ahead of it, and seq 1, passed again, was quarantined below the window", got)
	}
}

// failFirstUpdate is a group member whose first Update fails.
type failFirstUpdate struct {
	*groupMember
	updates int
}

func (f *failFirstUpdate) Capabilities() engine.Capabilities {
	c := f.groupMember.Capabilities()
	c.Shared = f
	return c
}

func (f *failFirstUpdate) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if f.updates++; f.updates == 1 {
		return errors.New("injected commit failure")
	}
	return f.groupMember.Update(ctx, r, decide)
}

// TestABatchBehindAFailedCommitOnASharedStoreIsNotCommittedAheadOfIt: on a
// shared store a batch's commit has landed, or failed, by the time its
// Submit returns. The batch collected next must not be submitted before
// the failure is taken: committed ahead of the failed batch, its later
// sequence would leave the earlier one a gap, filled late when the failed
// batch is committed again.
func TestABatchBehindAFailedCommitOnASharedStoreIsNotCommittedAheadOfIt(t *testing.T) {
	member, err := memory.NewGroup(0, 0).Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	st := &failFirstUpdate{groupMember: member}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{orderRoute}, SequenceSpan: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	type delivery struct{ msg engine.Message }
	msg := func(d *delivery) *engine.Message { return &d.msg }
	c := NewCommitter("test", e, Backoff{Min: time.Millisecond, Max: time.Millisecond}, source.ObserverFunc(func(source.Event) {}), slog.New(slog.DiscardHandler))
	batches := [][]delivery{{{orderUpdate(1, 1)}}, {{orderUpdate(2, 2)}}}
	var acked []string
	l := Loop[delivery]{Size: 4,
		Collect: func(ctx context.Context, _ <-chan struct{}) ([]delivery, error) {
			if len(batches) > 0 { // the next batch at once, as a full queue gives it
				b := batches[0]
				batches = batches[1:]
				return b, nil
			}
			cancel()
			return nil, nil
		},
		Commit:    CommitMessages(c, msg),
		Submit:    SubmitMessages(c, msg),
		Land:      c.Land,
		BeforeAck: func(time.Time) {},
		Ack: func(b []delivery) {
			for _, d := range b {
				acked = append(acked, string(d.msg.Payload))
			}
		},
	}
	l.Run(ctx)
	if len(acked) != 2 || !strings.Contains(acked[0], `"sequence":1,`) {
		t.Fatalf("acked %q, want seq 1 then seq 2", acked)
	}
	var outcomes []string
	if err := member.ScanAudit(context.Background(), 1, func(r engine.AuditRecord) error {
		if r.Sequence != nil {
			outcomes = append(outcomes, fmt.Sprintf("%d:%s", *r.Sequence, r.Outcome))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1:applied", "2:applied"}; !slices.Equal(outcomes, want) {
		t.Fatalf("audit %q, want %q: the batch behind the failed one was committed ahead of it", outcomes, want)
	}
}
