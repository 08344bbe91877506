package mqtt_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// A persistent session resumed under another subscription form (into a
// share group, out of one, into another) holds only the form configured:
// the one it was subscribed under before is removed, and each message
// comes once, not once per form.
func TestAResumedSessionGetsEachMessageOnceAfterItsShareGroupChanged(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after string
		former        []string
	}{
		{"joining a share group", "", "workers", nil},
		{"leaving a share group named former", "workers", "", []string{"workers"}},
		{"moving to another share group", "old", "workers", []string{"old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
			cfg := testConfig(t, m.URL())
			cfg.ShareGroup = tc.before
			first := start(t, cfg, newRecorder(t))
			first.waitReady(t)
			if err := first.stop(); err != nil {
				t.Fatal(err)
			}
			cfg.ShareGroup, cfg.FormerShareGroups = tc.after, tc.former
			rec := newRecorder(t)
			start(t, cfg, rec).waitReady(t)
			pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
			publish(t, pub, "a", 20)
			// Published once the broker took every "a": the session's
			// copies of it queue behind every copy of those.
			publish(t, pub, "z", 1)
			waitFor(t, "the last message", 10*time.Second, func() bool { return rec.Count(key{Source: "z", Seq: 1}) > 0 })
			for _, k := range seqs("a", 1, 20) {
				if n := rec.Count(k); n != 1 {
					t.Errorf("%s came %d times, want once", fmt.Sprint(k), n)
				}
			}
		})
	}
}
