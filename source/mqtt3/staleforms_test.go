package mqtt3

import (
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// A persistent MQTT 3.1.1 session resumed in a share group it was not in
// holds only the group's form: the plain subscription (or another group's)
// it held before is removed. Mosquitto gives a 3.1.1 session one copy of a
// message its two forms match, so the cost shows across the group: through
// the old form the member got every message, and the other members their
// share again. Each message must be taken once by the group.
func TestAResumedSessionGetsEachMessageOnceAfterItsShareGroupChanged(t *testing.T) {
	const last = "replayguard/last/#" // every member gets its messages, after those before them
	for _, tc := range []struct {
		name   string
		before string
		former []string
	}{
		{"joining a share group", "", nil},
		{"moving to another share group", "old", []string{"old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
			member := func(group string, former []string) Config {
				cfg := testConfig(t, m.URL())
				cfg.ShareGroup, cfg.FormerShareGroups = group, former
				cfg.Filters = append(cfg.Filters, Filter{Topic: last, QoS: 1, Unshared: true})
				return cfg
			}
			a := member(tc.before, nil)
			first := start(t, a, newRecorder(t))
			first.waitReady(t)
			if err := first.stop(); err != nil {
				t.Fatal(err)
			}
			b := member("workers", nil)
			a.ShareGroup, a.FormerShareGroups = "workers", tc.former
			recs := []*recorder{newRecorder(t), newRecorder(t)}
			start(t, a, recs[0]).waitReady(t)
			start(t, b, recs[1]).waitReady(t)
			publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{}), "a", 20)
			// Published once the broker took every "a": each member's
			// copy of it queues behind its copies of those.
			publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{Topic: func(s string) string { return "replayguard/last/" + s }}), "z", 1)
			for i, rec := range recs {
				waitFor(t, fmt.Sprintf("member %d's last message", i+1), 10*time.Second, func() bool { return rec.Count(key{Source: "z", Seq: 1}) > 0 })
			}
			for _, k := range seqs("a", 1, 20) {
				if n := recs[0].Count(k) + recs[1].Count(k); n != 1 {
					t.Errorf("%v was taken %d times by the group, want once", k, n)
				}
			}
		})
	}
}
