package redis

import (
	"testing"
	"time"
)

// The Redis client's read timeout is go-redis's own (5s) when store.url
// sets none, with store.wait_replicas too: waiting for replicas raises it
// to the WAIT's bound and a second where that is longer, never lowers it.
func TestWaitingForReplicasNeverShortensTheClientsReadTimeout(t *testing.T) {
	for _, tc := range []struct {
		name        string
		wait        int
		waitTimeout time.Duration
		url, want   time.Duration
	}{
		{"no WAIT, none in the URL", 0, 0, 0, 0},
		{"no WAIT, 1s in the URL", 0, 0, time.Second, time.Second},
		{"WAIT 2s, none in the URL", 1, 2 * time.Second, 0, 5 * time.Second},
		{"WAIT 2s, 1s in the URL", 1, 2 * time.Second, time.Second, 3 * time.Second},
		{"WAIT 10s, none in the URL", 1, 10 * time.Second, 0, 11 * time.Second},
		{"WAIT 2s, no deadline in the URL", 1, 2 * time.Second, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{opts: Options{WaitReplicas: tc.wait, WaitTimeout: tc.waitTimeout}}
			if got := s.readTimeout(tc.url); got != tc.want {
				t.Fatalf("read timeout %v, want %v", got, tc.want)
			}
		})
	}
}
