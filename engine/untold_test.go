package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// gatedCommits is an embedded store whose commits wait at gate (when set)
// and fail while fail is set; looking up a quarantine entry is signalled.
type gatedCommits struct {
	*embedded.Store
	fail    atomic.Bool
	gate    chan struct{}
	entered chan struct{}
	// looked is closed at a release's read of its entry under the
	// engine's lock: the second, after the one that reads the audit log
	// for an earlier application before it takes the lock.
	looked chan struct{}
	reads  atomic.Int32
	once   sync.Once
}

func (s *gatedCommits) Commit(ctx context.Context, b *engine.Batch) error {
	if s.gate != nil {
		if s.entered != nil {
			s.once.Do(func() { close(s.entered) })
		}
		<-s.gate
	}
	if s.fail.Load() {
		return errors.New("injected commit failure")
	}
	return s.Store.Commit(ctx, b)
}

func (s *gatedCommits) Quarantined(ctx context.Context, id uint64) (engine.QuarantineEntry, error) {
	if s.looked != nil && s.reads.Add(1) == 2 {
		close(s.looked)
	}
	return s.Store.Quarantined(ctx, id)
}

// TestAReleaseAbortedBehindAFailedCommitKeepsLaterBatchesRefused: an
// operator's release aborted behind a failed commit must not let the
// submitting caller, which has not taken the failure yet, submit a batch
// that commits ahead of the failed ones (whose sequences would then fall
// below the window).
func TestAReleaseAbortedBehindAFailedCommitKeepsLaterBatchesRefused(t *testing.T) {
	ctx := context.Background()
	es, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	s := &gatedCommits{Store: es}
	e, err := engine.New(ctx, s, engine.Options{Routes: []engine.Route{incidentRoute}, SequenceSpan: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	msg := func(seq int) engine.Message { return inc("fd", "e1", 1, seq, `"incident_id":1,"casualty_delta":1`) }
	ds, err := e.Process(ctx, []engine.Message{msg(1000), msg(1)}) // 1 is below the window: held
	if err != nil || ds[1].Outcome != engine.Quarantined {
		t.Fatalf("setup: %+v %v", ds, err)
	}
	held := ds[1].Position

	s.gate, s.entered, s.looked = make(chan struct{}), make(chan struct{}), make(chan struct{})
	s.fail.Store(true)
	waitA, err := e.Submit(ctx, []engine.Message{msg(1001)})
	if err != nil {
		t.Fatal(err)
	}
	<-s.entered // A's commit is under way (and will fail)
	waitB, err := e.Submit(ctx, []engine.Message{msg(1002)})
	if err != nil {
		t.Fatal(err)
	}
	looked := s.looked
	released := make(chan error, 1)
	go func() { _, err := e.Release(ctx, held, "op"); released <- err }()
	<-looked  // the release holds the engine's lock
	e.Stats() // takes the lock once the release has sealed its batch and waits for it
	close(s.gate)
	if err := <-released; err == nil {
		t.Fatal("the release behind the failed commit committed")
	}
	s.fail.Store(false)
	// The caller has not taken A's failure yet: a batch it submits now
	// would commit ahead of A and B.
	_, err = e.Submit(ctx, []engine.Message{msg(1200)})
	if _, errA := waitA(); errA == nil {
		t.Fatal("A committed")
	}
	waitB()
	if !errors.Is(err, engine.ErrAborted) {
		ds, _ := e.Process(ctx, []engine.Message{msg(1001), msg(1002)}) // A and B again, in order
		t.Fatalf("a batch submitted before the failure was taken: %v, want ErrAborted; A and B passed again after it: %s, %s (%s)",
			err, ds[0].Outcome, ds[1].Outcome, ds[0].Reason)
	}
}

// failedReleases fails the commits that resolve a quarantine entry.
type failedReleases struct{ gatedCommits }

func (s *failedReleases) Commit(ctx context.Context, b *engine.Batch) error {
	if len(b.Resolved) > 0 {
		if s.gate != nil {
			<-s.gate
		}
		return errors.New("injected commit failure")
	}
	return s.gatedCommits.Commit(ctx, b)
}

// TestAReleaseWhoseCommitFailedKeepsTheBatchBehindItsFailureRefused: a
// release whose own commit fails aborts the submitted batch decided on top
// of it; until that batch's wait has returned, the submitter's next batch
// must be refused, or it commits ahead of the aborted one.
func TestAReleaseWhoseCommitFailedKeepsTheBatchBehindItsFailureRefused(t *testing.T) {
	ctx := context.Background()
	es, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	s := &failedReleases{gatedCommits{Store: es}}
	e, err := engine.New(ctx, s, engine.Options{Routes: []engine.Route{incidentRoute}, SequenceSpan: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	msg := func(seq int) engine.Message { return inc("fd", "e1", 1, seq, `"incident_id":1,"casualty_delta":1`) }
	ds, err := e.Process(ctx, []engine.Message{msg(1000), msg(1)})
	if err != nil || ds[1].Outcome != engine.Quarantined {
		t.Fatalf("setup: %+v %v", ds, err)
	}
	held := ds[1].Position

	s.looked = make(chan struct{})
	looked := s.looked
	s.gate = make(chan struct{})
	released := make(chan error, 1)
	go func() { _, err := e.Release(ctx, held, "op"); released <- err }()
	<-looked
	e.Stats()                                                // the release's batch is sealed; its commit waits at the gate
	waitB, err := e.Submit(ctx, []engine.Message{msg(1001)}) // decided on top of the release
	if err != nil {
		t.Fatal(err)
	}
	close(s.gate)
	if err := <-released; err == nil {
		t.Fatal("the release committed")
	}
	// B was aborted behind the release; its submitter has not taken that yet.
	_, err = e.Submit(ctx, []engine.Message{msg(1200)})
	if _, errB := waitB(); errB == nil {
		t.Fatal("B committed")
	}
	if !errors.Is(err, engine.ErrAborted) {
		ds, _ := e.Process(ctx, []engine.Message{msg(1001)}) // B again
		t.Fatalf("a batch submitted before B's failure was taken: %v, want ErrAborted; B passed again after it: %s (%s)",
			err, ds[0].Outcome, ds[0].Reason)
	}
}
