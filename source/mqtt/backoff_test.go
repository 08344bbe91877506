package mqtt

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/source/internal/consume"
)

// step is one thing that happens to a connection, at an offset from the
// start of a reconnects test.
type step struct {
	at   time.Duration
	what string // "up", "traffic", "refused", "down"
}

func TestReconnects(t *testing.T) {
	const minWait, maxWait = time.Second, time.Minute
	// span is a range of waits: jitter draws from [ceil/2, ceil].
	type span struct{ lo, hi time.Duration }
	at0 := span{0, 0}
	var (
		up      = func(at time.Duration) step { return step{at, "up"} }
		traffic = func(at time.Duration) step { return step{at, "traffic"} }
		refused = func(at time.Duration) step { return step{at, "refused"} }
		down    = func(at time.Duration) step { return step{at, "down"} }
	)
	tests := []struct {
		name  string
		steps []step
		want  []span // the wait before round 1, 2, … of the next reconnection
	}{
		{"the first connection is attempted at once", nil,
			[]span{at0, {minWait / 2, minWait}}},
		{"a connection that delivered is followed by a round at once",
			[]step{up(0), traffic(time.Second), down(2 * time.Second)},
			[]span{at0}},
		{"deliveries handed over before the connection was reported up count",
			[]step{traffic(0), up(time.Millisecond), down(2 * time.Second)},
			[]span{at0}},
		{"a connection shorter than the shortest wait is a flap, though it delivered",
			[]step{up(0), traffic(time.Millisecond), down(minWait - time.Millisecond)},
			[]span{{minWait / 2, minWait}}},
		{"a connection that delivered and held the shortest wait is followed by a round at once",
			[]step{up(0), traffic(time.Millisecond), down(minWait)},
			[]span{at0}},
		{"failed rounds after a failover grow from the minimum, jittered",
			[]step{up(0), traffic(time.Second), down(2 * time.Second)},
			[]span{at0, {minWait / 2, minWait}, {minWait, 2 * minWait}, {2 * minWait, 4 * minWait}}},
		{"a connection that fell without delivering backs off before the first round",
			[]step{up(0), down(time.Second)},
			[]span{{minWait / 2, minWait}, {minWait, 2 * minWait}}},
		{"flaps in a row back off longer each time",
			[]step{up(0), down(time.Second), up(2 * time.Second), down(3 * time.Second), up(4 * time.Second), down(5 * time.Second)},
			[]span{{2 * minWait, 4 * minWait}}},
		{"a delivering connection after flaps resets the wait",
			[]step{up(0), down(time.Second), up(2 * time.Second), down(3 * time.Second),
				up(4 * time.Second), traffic(5 * time.Second), down(6 * time.Second)},
			[]span{at0, {minWait / 2, minWait}}},
		{"a connection that held for a minute without traffic is followed by a round at once",
			[]step{up(0), down(time.Minute)},
			[]span{at0}},
		{"a connection the broker ended asking for a backoff is a flap, though it delivered",
			[]step{up(0), traffic(time.Second), refused(2 * time.Second), down(2 * time.Second)},
			[]span{{minWait / 2, minWait}}},
		{"a refusal does not carry over to the next connection",
			[]step{up(0), traffic(time.Second), refused(2 * time.Second), down(2 * time.Second),
				up(3 * time.Second), traffic(4 * time.Second), down(5 * time.Second)},
			[]span{at0}},
		{"the traffic of a dropped connection proves nothing about the next one",
			[]step{up(0), traffic(time.Second), down(2 * time.Second), up(3 * time.Second), down(4 * time.Second)},
			[]span{{minWait / 2, minWait}}},
		{"a new Run forgets the flaps and the traffic of the last one",
			append(flaps(3), step{7 * time.Second, "up"}, step{7 * time.Second, "traffic"}, step{0, "reset"}),
			[]span{at0, {minWait / 2, minWait}}},
		{"waits stop growing at the maximum",
			flaps(100),
			[]span{{maxWait / 2, maxWait}, {maxWait / 2, maxWait}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 { // the jitter draws again each time
				r := &reconnects{b: consume.Backoff{Min: minWait, Max: maxWait}, stableAfter: time.Minute}
				start := time.Unix(1000, 0)
				for _, s := range tt.steps {
					switch s.what {
					case "up":
						r.up(start.Add(s.at))
					case "traffic":
						r.traffic()
					case "refused":
						r.refusedBy()
					case "down":
						r.down(start.Add(s.at))
					case "reset":
						r.reset()
					}
				}
				for attempt, w := range tt.want {
					if d := r.delay(attempt); d < w.lo || d > w.hi {
						t.Fatalf("wait before round %d = %v, want in [%v, %v]", attempt+1, d, w.lo, w.hi)
					}
					if round, wait := r.current(); round != attempt+1 {
						t.Fatalf("current() = round %d (wait %v), want round %d", round, wait, attempt+1)
					}
				}
			}
		})
	}
}

// flaps is n connections that each fell a second after coming up.
func flaps(n int) []step {
	var steps []step
	for i := range n {
		at := time.Duration(2*i) * time.Second
		steps = append(steps, step{at, "up"}, step{at + time.Second, "down"})
	}
	return steps
}

func TestAsksBackoff(t *testing.T) {
	tests := []struct {
		name   string
		reason byte
		want   bool
	}{
		{"a session taken over by another connection asks for a backoff", 0x8E, true},
		{"a busy server asks for a backoff", 0x89, true},
		{"an exceeded quota asks for a backoff", 0x97, true},
		{"an exceeded connection rate asks for a backoff", 0x9F, true},
		{"a server shutting down is a failover", 0x8B, false},
		{"a keepalive timeout is a failover", 0x8D, false},
		{"use another server is a failover", 0x9C, false},
		{"a normal disconnection is a failover", 0x00, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := asksBackoff(tt.reason); got != tt.want {
				t.Fatalf("asksBackoff(0x%02x) = %v, want %v", tt.reason, got, tt.want)
			}
		})
	}
}
