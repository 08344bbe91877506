package consume

import (
	"context"
	"errors"
	"testing"
)

// An adopting Run whose ctx is done ends with why, and an adoption that
// ended once keeps its first reason: a later one does not block.
func TestAnAdoptionEndsOnceWithItsFirstReason(t *testing.T) {
	errAdoption := errors.New("adoption ended")
	fatal := make(chan error, 1)
	a := &Adoption{Fatal: fatal, Err: errAdoption}
	ctx, cancel := context.WithCancel(context.Background())
	adoptCtx, stop := a.Start(ctx)
	defer stop()
	cancel()
	err := <-fatal
	if !errors.Is(err, errAdoption) || err.Error() != "adoption ended: stopped" {
		t.Fatalf("ended with %v, want the adoption stopped", err)
	}
	a.End(errors.New("first"))
	a.End(errors.New("second")) // the first waits: this one is dropped
	if err := <-fatal; err.Error() != "first" {
		t.Fatalf("ended with %v, want the first reason", err)
	}
	if adoptCtx.Err() != nil {
		t.Fatal("the adopting context is done before the session was resumed")
	}
	a.Begin()
	<-adoptCtx.Done()
}

// An adopting Run returns why it ended early, else nil only once the
// session went quiet.
func TestAnAdoptionsResultSaysWhetherTheSessionWentQuiet(t *testing.T) {
	errAdoption := errors.New("adoption ended")
	a := &Adoption{Fatal: make(chan error, 1), Err: errAdoption}
	runErr := errors.New("refused")
	if err := a.Result(runErr, &Leaving{}); err != runErr {
		t.Fatalf("Result = %v, want the Run's error", err)
	}
	if err := a.Result(nil, &Leaving{}); !errors.Is(err, errAdoption) {
		t.Fatalf("Result = %v, want the adoption ended: the session did not go quiet", err)
	}
	quiet := &Leaving{}
	quiet.quiet.Store(true)
	if err := a.Result(nil, quiet); err != nil {
		t.Fatalf("Result = %v, want nil once the session went quiet", err)
	}
}

// An adopting consumer's leave is granted at once, and nothing is
// recorded as the broker grants subscriptions.
func TestAnAdoptingLeavingAsksAndRecordsNothing(t *testing.T) {
	join := func(context.Context) error { return nil }
	l := &Leaving{Group: "g", Ask: func(context.Context) (bool, error) { return false, nil }, Join: join, Quit: join}
	l.Adopting("gone")
	if ok, err := l.Ask(context.Background()); !ok || err != nil {
		t.Fatalf("Ask = %v, %v; want leave granted", ok, err)
	}
	if l.Join != nil || l.Quit != nil || l.Adopted != "gone" {
		t.Fatalf("Join set %v, Quit set %v, Adopted %q; want none, none, gone", l.Join != nil, l.Quit != nil, l.Adopted)
	}
}
