package jetstream_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// advisorySubject is where the server tells, for the tests' consumer, each
// message it gives up on after max_deliver deliveries.
const advisorySubject = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + testStream + "." + testConsumer

// warner is what /readyz reads of a source besides its readiness.
type warner interface{ Warning() string }

// A user the server does not allow to subscribe to the advisory of the
// messages it gives up on (max_deliver) leaves replayguard deaf to them:
// such a message would be neither decided nor told lost. The consumer
// says so at the start, naming the subject and what follows, and
// /readyz carries it as a warning while the consumer stays ready; a user
// allowed the subscription hears no such warning.
func TestAUserNotAllowedTheGaveUpAdvisoryIsWarnedOfAtStartAndInReadiness(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "auth.conf")
	if err := os.WriteFile(conf, []byte(`no_auth_user: admin
authorization {
  users: [
    {user: admin, password: admin}
    {user: consumer, password: consumer, permissions: {subscribe: {deny: ["$JS.EVENT.ADVISORY.>"]}}}
  ]
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := testbroker.StartNATS(t, testbroker.NATSOptions{Extra: []string{"-c", conf}})
	n.CreateStream(testStream, "plant.>")
	publishAll(t, n, readings(3, "m1"))

	t.Run("a user allowed the subscription is not warned", func(t *testing.T) {
		e, _ := meters(t)
		cfg, logs := routedConfig(t, n.URL())
		r := start(t, cfg, e)
		allAcked(t, n, 10*time.Second)
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(logs.String(), advisorySubject) {
			t.Errorf("the log names %s, which the user may subscribe to", advisorySubject)
		}
		if w, ok := any(r.Consumer).(warner); ok && w.Warning() != "" {
			t.Errorf("readiness warns %q of a user allowed every subscription", w.Warning())
		}
	})

	t.Run("a user refused it is warned at start and in readiness", func(t *testing.T) {
		e, _ := meters(t)
		cfg, logs := routedConfig(t, strings.Replace(n.URL(), "nats://", "nats://consumer:consumer@", 1))
		r := start(t, cfg, e)
		waitFor(t, "the consumer bound", 10*time.Second, r.Ready)
		publishAll(t, n, readings(5, "m1")[3:])
		allAcked(t, n, 10*time.Second)
		if got := kwh(e, "m1"); got != "2" {
			t.Errorf("meter/m1 kwh = %s, want 2: readings 4 and 5, the user may consume", got)
		}
		if !logs.has("WARN", advisorySubject, "max_deliver", "neither decided nor told lost") {
			t.Errorf("no warning names %s and what its refusal leaves undone", advisorySubject)
		}
		w, ok := any(r.Consumer).(warner)
		if !ok {
			t.Fatal("the consumer has no Warning for /readyz")
		}
		if got := w.Warning(); !strings.Contains(got, advisorySubject) || !strings.Contains(got, "max_deliver") {
			t.Errorf("Warning() = %q, want it to name %s and max_deliver", got, advisorySubject)
		}
		if !r.Ready() {
			t.Errorf("not ready (%s): the consumer consumes, only the advisory is refused", r.NotReady())
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	})
}
