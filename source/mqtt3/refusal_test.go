package mqtt3

import (
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
)

// A broker that refuses (0x80) to renew a share group's subscription on a
// new connection leaves the member connected and deaf while it tries
// again: readiness says the broker refuses, with its return code, not that
// the subscription is merely on its way.
func TestARefusedRenewalIsWhatReadinessSays(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	p := startProxy(t, m.Addr())
	cfg := testConfig(t, p.URL())
	cfg.ShareGroup = "workers"
	ev := &events{}
	cfg.Observer = ev
	r := start(t, cfg, newRecorder(t))
	r.waitReady(t)

	p.refuseSubacks.Store(true)
	p.Cut()
	waitFor(t, "a reconnect", 10*time.Second, func() bool { return ev.Sum(source.Connected) >= 2 && r.Connected() })
	waitFor(t, "the refusal in the readiness", 10*time.Second, func() bool { return strings.Contains(r.NotReady(), "0x80") })
	if r.Ready() {
		t.Fatal("ready while the broker refuses the subscription")
	}
	if why := r.NotReady(); !strings.Contains(why, "refuses") {
		t.Errorf("NotReady() = %q, want it to say the broker refuses", why)
	}

	p.refuseSubacks.Store(false)
	waitFor(t, "ready once the broker grants it", 10*time.Second, r.Ready)
	if why := r.NotReady(); why != "" {
		t.Errorf("NotReady() = %q once ready, want none", why)
	}
}
