package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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
// with no sign.
func TestAMemberWhoseSubjectsDifferFromItsGroupsIsRefused(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	g := memory.NewGroup(0, 0)
	cfg, _ := routedConfig(t, n.URL())
	a := start(t, cfg, groupMeters(t, g, "a"))
	waitFor(t, "member a bound", 10*time.Second, a.Ready)

	narrow := cfg
	narrow.Subjects = []string{"plant.m1.energy"}
	refusedAtBind(t, start(t, narrow, groupMeters(t, g, "b")), "every member must take the same subjects",
		"the shared durable, with its own narrower subjects")
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
}
