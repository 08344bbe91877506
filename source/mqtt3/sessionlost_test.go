package mqtt3

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// logBuffer is an io.Writer safe for the consumer's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAReconnectThatFindsNoSessionWarnsThatTheBrokerLostIt: a broker that
// answers a reconnect of a persistent session (CleanSession 0) with no
// session (it restarted without persisting it, expired it under
// persistent_client_expiration, or is a standby that never had it) has
// lost whatever it held for the consumer meanwhile. The consumer says so, as a warning
// naming the broker; the first connection of a fresh client id, which
// has no session to lose, does not.
func TestAReconnectThatFindsNoSessionWarnsThatTheBrokerLostIt(t *testing.T) {
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
	var logs logBuffer
	cfg := testConfig(t, broker.URL())
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r := start(t, cfg, newRecorder(t))
	r.waitReady(t)
	const warning = "the broker has no session for this consumer"
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("the first connection warned of a lost session:\n%s", logs.String())
	}
	broker.Kill()
	broker.Restart() // without persistence: the session is gone
	waitFor(t, "the consumer reconnected", 10*time.Second, func() bool {
		return strings.Count(logs.String(), `msg="mqtt connected"`) == 2 && r.Ready()
	})
	if got := logs.String(); strings.Count(got, warning) != 1 || !strings.Contains(got, "broker="+broker.URL()) {
		t.Fatalf("no single warning that the broker lost the session:\n%s", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
