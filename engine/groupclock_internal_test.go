package engine

import (
	"testing"
	"time"
)

// fakeServer is a store's latest reading of its server's clock.
type fakeServer struct {
	r  ServerReading
	ok bool
}

func (f *fakeServer) ServerTime() (ServerReading, bool) { return f.r, f.ok }

func TestTheGroupClockFollowsTheStoreServersReadings(t *testing.T) {
	const ttl = 30 * time.Minute
	server := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	local := time.Now() // a reading with a monotonic clock, as the stores take them
	// setup returns a clock whose monotonic clock reads *el after local,
	// as does its wall clock but for *step, and the server reading it
	// follows.
	var step time.Duration
	setup := func(rtt time.Duration) (*groupClock, *fakeServer, *time.Duration) {
		el := new(time.Duration)
		step = 0
		f := &fakeServer{r: ServerReading{Server: server, Sent: local, Received: local.Add(rtt)}, ok: true}
		c := &groupClock{src: f, since: func(at time.Time) time.Duration { return local.Add(*el).Sub(at) },
			wall: func() time.Time { return local.Add(*el + step) }}
		return c, f, el
	}
	ns := func(t time.Time) int64 { return t.UnixNano() }
	t.Run("before the first reading there is no clock", func(t *testing.T) {
		c, f, _ := setup(0)
		f.ok = false
		if c.anchor() {
			t.Fatal("a clock without a reading")
		}
	})
	t.Run("keys are stamped by the top of the round trip and judged by its bottom", func(t *testing.T) {
		c, _, el := setup(2 * time.Second) // the server read its clock somewhere in 2s
		*el = time.Second                  // the round trip's middle
		stamp, cutoff := c.now(ttl)
		if stamp != ns(server.Add(time.Second)) || cutoff != ns(server.Add(-time.Second-ttl)) {
			t.Fatalf("stamp %v cutoff %v, want the server's reading ±1s", time.Unix(0, stamp).UTC(), time.Unix(0, cutoff).UTC())
		}
	})
	t.Run("between readings the clock runs with the monotonic clock, widened by the drift", func(t *testing.T) {
		c, _, el := setup(0)
		*el = time.Hour // renewals failed for an hour: the last reading still holds
		stamp, cutoff := c.now(ttl)
		drift := time.Hour / 1e6 * clockDrift
		if stamp != ns(server.Add(time.Hour+drift)) || cutoff != ns(server.Add(time.Hour-drift-ttl)) {
			t.Fatalf("stamp %v cutoff %v after an hour", time.Unix(0, stamp).UTC(), time.Unix(0, cutoff).UTC())
		}
	})
	t.Run("after a suspension, keys are stamped as far ahead as the wall clock ran ahead of the monotonic", func(t *testing.T) {
		c, _, el := setup(0)
		*el, step = time.Second, 2*time.Hour // the monotonic clock stood still for the 2h suspended
		stamp, cutoff := c.now(ttl)
		drift := time.Second / 1e6 * clockDrift
		if stamp != ns(server.Add(time.Second+drift+2*time.Hour)) || cutoff != ns(server.Add(time.Second-drift-ttl)) {
			t.Fatalf("stamp %v cutoff %v", time.Unix(0, stamp).UTC(), time.Unix(0, cutoff).UTC())
		}
		step = -2 * time.Hour // a wall clock stepped back stamps nothing behind
		if stamp, _ := c.now(ttl); stamp != ns(server.Add(time.Second+drift)) {
			t.Fatalf("stamp %v after the wall clock stepped back", time.Unix(0, stamp).UTC())
		}
	})
	for _, step := range []time.Duration{3 * time.Hour, -3 * time.Hour} {
		t.Run("a step of the server's clock, or a failover to one that differs, is followed and told: "+step.String(), func(t *testing.T) {
			c, f, el := setup(0)
			c.now(ttl)
			*el = 5 * time.Second
			f.r = ServerReading{Server: server.Add(5*time.Second + step), Sent: local.Add(*el), Received: local.Add(*el)}
			stamp, cutoff := c.now(ttl)
			if stamp != ns(server.Add(5*time.Second+step)) || cutoff != ns(server.Add(5*time.Second+step-ttl)) {
				t.Fatalf("stamp %v cutoff %v", time.Unix(0, stamp).UTC(), time.Unix(0, cutoff).UTC())
			}
			if drift := 5 * time.Second / 1e6 * clockDrift; c.stepped.Abs() != step.Abs()-drift || c.stepped*step < 0 {
				t.Fatalf("step told: %v, want %v less the drift allowed", c.stepped, step)
			}
		})
	}
	t.Run("a renewal within the round trips and the drift is no step", func(t *testing.T) {
		c, f, el := setup(10 * time.Millisecond)
		c.now(ttl)
		*el = 5 * time.Second
		f.r = ServerReading{Server: server.Add(5*time.Second + 6*time.Millisecond), Sent: local.Add(*el), Received: local.Add(*el + 4*time.Millisecond)}
		c.now(ttl)
		if c.stepped != 0 {
			t.Fatalf("step told: %v", c.stepped)
		}
	})
}
