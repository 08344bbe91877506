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
	"github.com/replayguard/replayguard/source/jetstream"
	"github.com/replayguard/replayguard/store/memory"
)

// groupMeters is the meters engine of member of a group whose store is g.
func groupMeters(t testing.TB, g *memory.Group, member string) *engine.Engine {
	t.Helper()
	st, err := g.Open(member)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(context.Background(), st, engine.Options{Routes: []engine.Route{metersRoute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// refusedAtBind waits for r's Run to end refused (ErrStream) saying want;
// it fails saying that r bound what instead.
func refusedAtBind(t *testing.T, r *running, want, what string) {
	t.Helper()
	select {
	case <-r.run.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the member bound %s", what)
	}
	if err := r.run.Err(); !errors.Is(err, jetstream.ErrStream) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run = %v, want it refused saying %q", err, want)
	}
}

// A member that has decided nothing yet, joining a group whose store holds
// another member's decisions, finds the durable consumer they shared
// missing: it is refused, as the member that decided them is. A durable it
// created would deliver the stream again from its first message, where an
// id route's messages whose keys have left the window apply again.
func TestANewMemberIsRefusedADurableMissingOnceItsGroupDecided(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	g := memory.NewGroup(0, 0)
	cfg, _ := routedConfig(t, n.URL())
	r := start(t, cfg, groupMeters(t, g, "a"))
	publishAll(t, n, readings(5, "m1"))
	allAcked(t, n, 10*time.Second)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	n.DeleteConsumer(testStream, testConsumer)

	refusedAtBind(t, start(t, cfg, groupMeters(t, g, "b")), "another member's",
		"a durable it created: the stream delivered again from its first message")
	if _, err := n.ConsumerInfo(testStream, testConsumer); err == nil {
		t.Error("member b created the durable consumer")
	}
}

// The members of a group share one durable consumer, whose filter is
// every member's: a member whose jetstream.subjects differ is refused at
// its bind, and the durable keeps its filter. Set to the member's, it
// would leave the messages of the subjects it takes out to no member,
// with no sign. So is a member given the stream's subjects of today
// beside one given none: the durable without a filter takes the subjects
// the stream gains, one filtered to today's does not (it passed, and a
// subject the stream gained later reached no member).
func TestAMemberWhoseSubjectsDifferFromItsGroupsIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		subjects []string
	}{
		{"narrower", []string{"plant.m1.energy"}},
		{"the stream's subjects of today, beside none", []string{"plant.>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testbroker.StartNATS(t, testbroker.NATSOptions{})
			n.CreateStream(testStream, "plant.>")
			g := memory.NewGroup(0, 0)
			cfg, _ := routedConfig(t, n.URL())
			a := start(t, cfg, groupMeters(t, g, "a"))
			waitFor(t, "member a bound", 10*time.Second, a.Ready)

			other := cfg
			other.Subjects = tc.subjects
			refusedAtBind(t, start(t, other, groupMeters(t, g, "b")), "every member must take the same subjects",
				"the shared durable, with subjects of its own")
			info, err := n.ConsumerInfo(testStream, testConsumer)
			if err != nil {
				t.Fatal(err)
			}
			if info.Config.FilterSubject != "" || len(info.Config.FilterSubjects) != 0 {
				t.Errorf("the shared durable is filtered to %q %q now, want no filter: the group's", info.Config.FilterSubject, info.Config.FilterSubjects)
			}
			publishAll(t, n, readings(2, "m1", "m2"))
			allAcked(t, n, 10*time.Second)
			if err := a.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// racingMember is a member's engine whose group, between the member's
// look for the durable (missing) and its read of the group's store, has
// another member create the durable and commit a batch: the group
// starting at once.
type racingMember struct {
	*engine.Engine
	n     *testbroker.NATS
	other *engine.Engine
}

func (r *racingMember) HoldsDecisions(ctx context.Context) (bool, error) {
	nc, js := r.n.JetStream()
	defer nc.Close()
	if _, err := js.CreateOrUpdateConsumer(ctx, testStream, natsjs.ConsumerConfig{Durable: testConsumer, AckPolicy: natsjs.AckExplicitPolicy, MaxDeliver: -1}); err != nil {
		return false, err
	}
	if _, err := r.other.Process(ctx, []engine.Message{{Topic: "plant/m1/energy", Payload: []byte(`{"seq":1,"kwh":"1"}`)}}); err != nil {
		return false, err
	}
	return r.Engine.HoldsDecisions(ctx)
}

// A member that finds the durable missing while another member of a group
// starting at once creates it and decides binds it: the durable exists.
// It was refused, told the durable was missing.
func TestAMemberStartingAsAnotherCreatesTheDurableBindsIt(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	g := memory.NewGroup(0, 0)
	cfg, _ := routedConfig(t, n.URL())
	b := start(t, cfg, &racingMember{Engine: groupMeters(t, g, "b"), n: n, other: groupMeters(t, g, "a")})
	waitFor(t, "member b bound", 10*time.Second, func() bool {
		select {
		case <-b.run.Done():
			t.Fatalf("member b was refused though the durable exists: %v", b.run.Err())
		default:
		}
		return b.Ready()
	})
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
}
