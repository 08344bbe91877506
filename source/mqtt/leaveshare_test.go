package mqtt_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/internal/consume"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
)

// A member of a share group that stops with leave granted first decides
// every message its session held at that moment (dealt to it, not yet
// delivered), and the broker deals the group's later messages to the
// member still running: none waits in the stopped member's session
// (consumetest.LeaveShare). The leaving member's receive maximum of 5
// bounds what is in flight to it.
func TestAMemberLeavingItsShareGroupDecidesWhatItsSessionHeld(t *testing.T) {
	leaveShare(t).Run(t)
}

// A member leaving its share group whose commit takes longer than the
// leave's quiet still decides every message its session held
// (consumetest.LeaveShare.FirstCommit).
func TestAMemberLeavingWithASlowCommitDecidesWhatItsSessionHeld(t *testing.T) {
	s := leaveShare(t)
	s.FirstCommit = consume.LeaveQuiet + consume.LeaveQuiet/2
	s.Run(t)
}

// leaveShare is the scenario on a Mosquitto of the test's own.
func leaveShare(t *testing.T) consumetest.LeaveShare {
	t.Helper()
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true, MaxInflight: 10})
	pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
	return consumetest.LeaveShare{
		Start: func(t *testing.T, rec *recorder, leave func(context.Context) (bool, error)) consumetest.Member {
			cfg := testConfig(t, m.URL())
			cfg.ShareGroup = "workers"
			if leave != nil {
				cfg.ClientID = testbroker.UniqueClientID("rg-leaving")
				cfg.ShutdownTimeout = 10 * time.Second
				cfg.ReceiveMaximum, cfg.BatchSize = 5, 5
				cfg.LeaveShare = leave
			}
			r := start(t, cfg, rec)
			return consumetest.Member{Ready: r.Ready, Stop: r.stop}
		},
		Publish: func(t *testing.T, source string, n int) { publish(t, pub, source, n) },
	}
}
