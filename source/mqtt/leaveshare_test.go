package mqtt_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
)

// A member of a share group that stops with leave granted first decides
// every message its session held at that moment (dealt to it, not yet
// delivered), and the broker deals the group's later messages to the
// member still running: none waits in the stopped member's session
// (consumetest.LeaveShare). The leaving member's receive maximum of 5
// bounds what is in flight to it.
func TestAMemberLeavingItsShareGroupDecidesWhatItsSessionHeld(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true, MaxInflight: 10})
	pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
	consumetest.LeaveShare{
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
	}.Run(t)
}
