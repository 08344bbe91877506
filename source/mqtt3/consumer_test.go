package mqtt3

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
)

func TestConsumeAndAcknowledge(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	cfg := testConfig(t, b.URL())
	ev := &events{}
	cfg.Observer = ev
	rec := newRecorder(t)
	r := start(t, cfg, rec)
	r.waitReady(t)
	pub := testbroker.NewPublisher(t, []string{b.URL()}, testbroker.PublisherOptions{})
	publish(t, pub, "s1", 500)
	waitFor(t, "500 commits", 10*time.Second, func() bool { return rec.Len() == 500 })
	waitFor(t, "500 acks", 10*time.Second, func() bool { return ev.Sum(source.Acked) == 500 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(t, rec.Committed()), seqs("s1", 1, 500); !slices.Equal(got, want) {
		t.Fatalf("committed %s, want %s in order", fmtKeys(got), fmtKeys(want))
	}
	if ev.Sum(source.Received) != 500 || ev.Sum(source.Committed) != 500 || ev.Sum(source.AckDropped) != 0 {
		t.Errorf("received %d, committed %d, ack dropped %d", ev.Sum(source.Received), ev.Sum(source.Committed), ev.Sum(source.AckDropped))
	}
	if left := drainSession(t, b.URL(), cfg.ClientID, 300*time.Millisecond); len(left) != 0 {
		t.Errorf("the session still held %d messages: %s", len(left), fmtKeys(keys(t, left)))
	}
}

func TestUncommittedIsRedelivered(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	cfg := testConfig(t, b.URL())
	failing := newRecorder(t)
	failing.Hook = func(context.Context, int, []engine.Message) error { return errors.New("store down") }
	r := start(t, cfg, failing)
	r.waitReady(t)
	pub := testbroker.NewPublisher(t, []string{b.URL()}, testbroker.PublisherOptions{Window: 20})
	publish(t, pub, "s1", 50)
	waitFor(t, "a commit attempt", 10*time.Second, func() bool { return len(failing.Calls()) > 0 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	got := drainSession(t, b.URL(), cfg.ClientID, 300*time.Millisecond)
	// Mosquitto resends the messages in flight first, in its own order.
	ks := keys(t, got)
	slices.SortFunc(ks, func(a, b key) int { return int(a.Seq - b.Seq) })
	if want := seqs("s1", 1, 50); !slices.Equal(ks, want) {
		t.Fatalf("redelivered %s, want %s", fmtKeys(ks), fmtKeys(want))
	}
	dups := 0
	for _, m := range got {
		if m.Dup {
			dups++
		}
	}
	if dups == 0 {
		t.Error("no redelivered message carries the DUP flag, though every one was sent before")
	}
}

func TestResubscribeWhenTheSessionIsGone(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
	cfg := testConfig(t, b.URL())
	ev := &events{}
	cfg.Observer = ev
	rec := newRecorder(t)
	r := start(t, cfg, rec)
	r.waitReady(t)
	b.Restart() // no persistence: the session and its subscription are gone
	waitFor(t, "a reconnect", 10*time.Second, func() bool { return ev.Sum(source.Connected) >= 2 && r.Ready() })
	pub := testbroker.NewPublisher(t, []string{b.URL()}, testbroker.PublisherOptions{})
	publish(t, pub, "s1", 20)
	waitFor(t, "20 commits after the broker lost the session", 10*time.Second, func() bool { return rec.Len() == 20 })
}

func TestSharedSubscription(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	recs := []*recorder{newRecorder(t), newRecorder(t)}
	var members []*running
	for _, rec := range recs {
		cfg := testConfig(t, b.URL())
		cfg.ShareGroup = "grp"
		m := start(t, cfg, rec)
		m.waitReady(t)
		members = append(members, m)
	}
	pub := testbroker.NewPublisher(t, []string{b.URL()}, testbroker.PublisherOptions{})
	publish(t, pub, "s1", 100)
	waitFor(t, "100 commits over the group", 10*time.Second, func() bool { return recs[0].Len()+recs[1].Len() == 100 })
	for i, rec := range recs {
		if rec.Len() == 0 {
			t.Errorf("member %d received nothing: the group did not split the feed", i+1)
		}
		for s := int64(1); s <= 100; s++ {
			if n := recs[0].Count(key{Source: "s1", Seq: s}) + recs[1].Count(key{Source: "s1", Seq: s}); n != 1 {
				t.Fatalf("s1#%d committed %d times over the group", s, n)
			}
		}
	}
	for _, m := range members {
		if err := m.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCleanStartDiscardsTheSession(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	cfg := testConfig(t, b.URL())
	failing := newRecorder(t)
	failing.Hook = func(context.Context, int, []engine.Message) error { return errors.New("store down") }
	cfg.ShutdownTimeout = 50 * time.Millisecond
	r := start(t, cfg, failing)
	r.waitReady(t)
	pub := testbroker.NewPublisher(t, []string{b.URL()}, testbroker.PublisherOptions{})
	publish(t, pub, "s1", 10) // held in the session, unacknowledged
	waitFor(t, "a commit attempt", 10*time.Second, func() bool { return len(failing.Calls()) > 0 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	cfg.CleanStart = true
	rec := newRecorder(t)
	r = start(t, cfg, rec)
	r.waitReady(t)
	publish(t, pub, "s1", 1) // s1#11
	waitFor(t, "the new message", 10*time.Second, func() bool { return rec.Len() >= 1 })
	time.Sleep(200 * time.Millisecond)
	if got := keys(t, rec.Committed()); !slices.Equal(got, []key{{Source: "s1", Seq: 11}}) {
		t.Fatalf("committed %s after a clean start, want only s1#11", fmtKeys(got))
	}
}

func TestStallIsDetected(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	cfg := testConfig(t, b.URL())
	cfg.KeepAlive = time.Second
	ev := &events{}
	cfg.Observer = ev
	r := start(t, cfg, newRecorder(t))
	r.waitReady(t)
	b.Pause()
	waitFor(t, "the stall reported", 10*time.Second, func() bool { return ev.Sum(source.Stalled) == 1 })
	if r.Ready() {
		t.Error("ready while the broker answers nothing")
	}
	b.Resume()
	waitFor(t, "a reconnect", 10*time.Second, func() bool { return ev.Sum(source.Connected) >= 2 && r.Ready() })
}

// TestQoS0GrantEndsRun: a broker that grants the subscription at QoS 0
// (Mosquitto's max_qos 0; Mosquitto 2.0 grants a 3.1.1 subscription its
// ACL denies, so that is no refusal) could not redeliver what it loses.
func TestQoS0GrantEndsRun(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{Extra: []string{"max_qos 0"}})
	cfg := testConfig(t, b.URL())
	var ups, downs atomic.Int32
	cfg.Observer = source.ObserverFunc(func(e source.Event) {
		switch e.Kind {
		case source.Connected:
			ups.Add(1)
		case source.Disconnected:
			downs.Add(1)
		}
	})
	c, err := New(cfg, newRecorder(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, ErrSubscribe) || !strings.Contains(err.Error(), "granted at QoS 0") {
		t.Fatalf("Run: %v, want the refusal of a QoS 0 grant", err)
	}
	if ups.Load() != 1 || downs.Load() != 1 { // a feed's connected metric hears the end
		t.Fatalf("%d connections, %d disconnections observed; want one of each", ups.Load(), downs.Load())
	}
}

func TestConfigValidation(t *testing.T) {
	ok := func() Config {
		return Config{Brokers: []string{"tcp://h:1883"}, ClientID: "rg-1", Filters: []Filter{{Topic: "a/#", QoS: 1}}}
	}
	cases := []struct {
		name   string
		change func(*Config)
		want   string // "" for valid
	}{
		{"a complete configuration is valid", func(*Config) {}, ""},
		{"an empty client id is refused", func(c *Config) { c.ClientID = " " }, "empty client id: a persistent session needs a fixed one"},
		{"no broker is refused", func(c *Config) { c.Brokers = nil }, "no broker"},
		{"an unknown scheme is refused", func(c *Config) { c.Brokers = []string{"http://h:1"} }, "scheme must be"},
		{"credentials in the URL are refused", func(c *Config) { c.Brokers = []string{"tcp://u:p@h:1"} }, "credentials belong in username and password"},
		{"QoS 0 is refused", func(c *Config) { c.Filters[0].QoS = 0 }, "at QoS 0"},
		{"a $share prefix is refused", func(c *Config) { c.Filters[0].Topic = "$share/g/a" }, "set the share group instead"},
		{"a bad wildcard is refused", func(c *Config) { c.Filters[0].Topic = "a/b#" }, "'#' must be the whole last level"},
		{"a share group with a slash is refused", func(c *Config) { c.ShareGroup = "a/b" }, "contains /, + or #"},
		{"a keepalive in fractions of a second is refused", func(c *Config) { c.KeepAlive = 1500 * time.Millisecond }, "whole number of seconds"},
		{"a retry maximum below its minimum is refused", func(c *Config) { c.ConnectRetryMin, c.ConnectRetryMax = time.Second, time.Millisecond }, "a retry maximum is below its minimum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.change(&c)
			_, err := New(c, newRecorder(t))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}
