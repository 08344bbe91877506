package mqtt3

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// Under MQTT 3.1.1 too, a consumer that adopts the session of a share
// group's member that is gone (it stopped without leaving) decides every
// message the session held, unsubscribes the group's filters so that the
// broker deals the gone member nothing more, and returns nil once the
// session went quiet: with the live member, every message is decided
// once, and the messages published after the adoption all go to the live
// member.
func TestAnAdoptedSessionIsDrainedAndLosesItsShareUnder311(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
	pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
	gone := testConfig(t, m.URL())
	gone.ShareGroup = "workers"
	g := start(t, gone, newRecorder(t))
	g.waitReady(t)
	if err := g.stop(); err != nil { // no LeaveShare: it keeps its subscription
		t.Fatal(err)
	}
	live := testConfig(t, m.URL())
	live.ShareGroup = "workers"
	liveRec := newRecorder(t)
	l := start(t, live, liveRec)
	l.waitReady(t)
	publish(t, pub, "s1", 40) // about half of them wait in the gone member's session

	adopt := gone
	adopt.Adopt, adopt.Adopted = true, "gone"
	adoptRec := newRecorder(t)
	c, err := New(adopt, adoptRec)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(t.Context()); err != nil {
		t.Fatalf("adopting Run = %v, want nil once the session went quiet", err)
	}
	if adoptRec.Len() == 0 {
		t.Fatal("the adopted session delivered nothing: the gone member's share was not in it")
	}
	waitFor(t, "the 40 messages decided", 10*time.Second, func() bool { return liveRec.Len()+adoptRec.Len() >= 40 })
	got := append(keys(t, liveRec.Committed()), keys(t, adoptRec.Committed())...)
	slices.SortFunc(got, func(a, b key) int { return int(a.Seq - b.Seq) })
	if want := seqs("s1", 1, 40); !slices.Equal(got, want) {
		t.Fatalf("decided %s, want %s", fmtKeys(got), fmtKeys(want))
	}

	publish(t, pub, "s1", 20)
	waitFor(t, "the live member deciding every message published after the adoption", 10*time.Second, func() bool {
		return liveRec.Count(key{Source: "s1", Seq: 60}) == 1 && liveRec.Len()+adoptRec.Len() == 60
	})
	for s := int64(41); s <= 60; s++ {
		if n := liveRec.Count(key{Source: "s1", Seq: s}); n != 1 {
			t.Errorf("the live member decided s1 %d %d times, want once: the gone member's session still takes a share", s, n)
		}
	}
}

// An adopting consumer whose client id has no session at the broker
// returns ErrNoSession: nothing waits for the gone member.
func TestAnAdoptedSessionTheBrokerDoesNotHoldEndsAtOnceUnder311(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
	cfg := testConfig(t, m.URL())
	cfg.ShareGroup, cfg.Adopt, cfg.Adopted = "workers", true, "never-seen"
	c, err := New(cfg, newRecorder(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(t.Context()); !errors.Is(err, ErrNoSession) {
		t.Fatalf("adopting Run = %v, want ErrNoSession", err)
	}
}

// An adopting consumer whose connection is taken by the gone member
// returning (MQTT 3.1.1 has no DISCONNECT from the broker: the
// connection just closes) returns ErrAdoption, without waiting for its
// shutdown timeout, and what it had not acknowledged goes to the
// returned member.
func TestAnAdoptionWhoseSessionIsTakenEndsUnder311(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
	pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
	gone := testConfig(t, m.URL())
	gone.ShareGroup = "workers"
	g := start(t, gone, newRecorder(t))
	g.waitReady(t)
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	publish(t, pub, "s1", 5) // all of them wait in the gone member's session

	adopt := gone
	adopt.Adopt, adopt.Adopted = true, "gone"
	adopt.ShutdownTimeout = time.Minute
	held, release := make(chan struct{}), make(chan struct{})
	adoptRec := newRecorder(t)
	adoptRec.Hook = func(_ context.Context, call int, _ []engine.Message) error {
		if call == 0 {
			close(held)
			<-release
		}
		return nil
	}
	c, err := New(adopt, adoptRec)
	if err != nil {
		t.Fatal(err)
	}
	ended, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		ended <- c.Run(t.Context())
	}()
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(func() { let(); <-done }) // t.Context is done by then: Run ends
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the adopted session delivered nothing")
	}
	returned := newRecorder(t)
	r := start(t, gone, returned) // takes the session: the broker closes the adopter's connection
	r.waitReady(t)
	let()
	select {
	case err := <-ended:
		if !errors.Is(err, ErrAdoption) {
			t.Fatalf("adopting Run = %v, want ErrAdoption", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the adopting Run goes on after the gone member took its session back")
	}
	waitFor(t, "the returned member deciding the 5 messages", 10*time.Second, func() bool {
		return returned.Count(key{Source: "s1", Seq: 5}) == 1
	})
	for s := int64(1); s <= 5; s++ {
		if n := returned.Count(key{Source: "s1", Seq: s}) + adoptRec.Count(key{Source: "s1", Seq: s}); n == 0 {
			t.Errorf("s1 %d decided by neither the adopter nor the returned member", s)
		}
	}
}
