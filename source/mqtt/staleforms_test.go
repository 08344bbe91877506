package mqtt_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/mqtt"
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

// A persistent session resumed without a filter it was subscribed to (a
// route removed) keeps that subscription unless the filter is named in
// FormerFilters: named, it is removed, and its messages stop coming to a
// configuration that has no route for them (each would be held).
func TestAResumedSessionStopsGettingAFormerFiltersMessages(t *testing.T) {
	for _, group := range []string{"", "workers"} {
		t.Run("share group "+fmt.Sprintf("%q", group), func(t *testing.T) {
			m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
			cfg := testConfig(t, m.URL())
			cfg.ShareGroup = group
			const old = "replayguard/old/#"
			cfg.Filters = append(cfg.Filters, mqtt.Filter{Topic: old, QoS: 1})
			first := start(t, cfg, newRecorder(t))
			first.waitReady(t)
			if err := first.stop(); err != nil {
				t.Fatal(err)
			}
			cfg.Filters, cfg.FormerFilters = cfg.Filters[:1], []string{old}
			rec := newRecorder(t)
			start(t, cfg, rec).waitReady(t)
			oldPub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{
				Topic: func(source string) string { return "replayguard/old/" + source }})
			publish(t, oldPub, "o", 5)
			// Published once the broker took every "o": the session's
			// copies of it would queue ahead of this one.
			publish(t, testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{}), "z", 1)
			waitFor(t, "the last message", 10*time.Second, func() bool { return rec.Count(key{Source: "z", Seq: 1}) > 0 })
			for _, k := range seqs("o", 1, 5) {
				if n := rec.Count(k); n != 0 {
					t.Errorf("%s of the former filter came %d times, want never", fmt.Sprint(k), n)
				}
			}
		})
	}
}
