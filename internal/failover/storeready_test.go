package failover

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// storeNotice bounds how long an idle member takes to say that its store
// is down, or back: a check of the store every 5 s, each bounded by 5 s,
// and the lease renewed every 5 s.
const storeNotice = 20 * time.Second

// A member with nothing to decide finds its shared store down and reports
// not ready (/readyz and replayguard_ready) with the store's words, though
// no write of its own failed; and ready again once the store answers,
// though it wrote nothing meanwhile. A member whose lease another process
// takes stops, saying so: it could commit nothing more, and would hold
// what the broker deals it (docs/consumer-groups.md); a run started again
// is ready once the lease is free.
func TestAnIdleMemberIsReadyOnlyWhileItsStoreAnswers(t *testing.T) {
	for _, kind := range []string{config.StoreRedis, config.StorePostgres} {
		t.Run(kind, func(t *testing.T) { idleMemberReadiness(t, kind) })
	}
}

func idleMemberReadiness(t *testing.T, kind string) {
	skipShort(t)
	server := startStoreServer(t, kind)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	d := startDaemon(t, newSetupWith(t, []string{broker.URL()}, setupOptions{API: true,
		Store: fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL()), ShareGroup: shareGroup}))
	d.WaitReady()

	server.Kill()
	began := time.Now()
	waitFor(t, "not ready with the store down", storeNotice, func() bool { return !d.ok("/readyz") })
	t.Logf("not ready %v after the store was killed: %s", time.Since(began).Round(time.Millisecond), d.readyz())
	if got := d.Metrics()["replayguard_ready"]; got != 0 {
		t.Errorf("replayguard_ready = %v with the store down, want 0", got)
	}
	server.Restart()
	began = time.Now()
	waitFor(t, "ready with the store back", storeNotice, func() bool { return d.ok("/readyz") })
	t.Logf("ready %v after the store restarted", time.Since(began).Round(time.Millisecond))
	if got := d.Metrics()["replayguard_ready"]; got != 1 {
		t.Errorf("replayguard_ready = %v with the store back, want 1", got)
	}

	r, ok := server.(*testbroker.Redis)
	if !ok {
		return
	}
	lease := config.DefaultStorePrefix + "lease:" + member(d)
	if _, err := r.Do("SET", lease, "another holder"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "run stopped with its lease taken", storeNotice, func() bool { return !d.running() })
	if d.err == nil || !strings.Contains(d.logText(), "stopping: the store no longer lets this process write as its member") {
		t.Errorf("run with its lease taken exited with %v, its log not saying why", d.err)
	}
	if _, err := r.Do("DEL", lease); err != nil {
		t.Fatal(err)
	}
	d.Start()
	waitFor(t, "ready with the lease free again", storeNotice, func() bool { return d.ok("/readyz") })
}

// readyz is /readyz's status and body.
func (d *daemon) readyz() string {
	d.t.Helper()
	resp, err := d.client.Get(d.url("/readyz"))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Status + " " + strings.Join(strings.Fields(string(b)), " ")
}
