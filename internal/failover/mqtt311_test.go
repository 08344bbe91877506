package failover

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// brokerHold is how long each committed batch waits before its
// acknowledgements in the tests below (the binary's failpoint): long
// enough for the broker to save the deliveries in flight and be killed
// before it hears the PUBACKs.
const brokerHold = 3 * time.Second

// restartable is a broker the MQTT 3.1.1 tests kill and start again on its
// own store.
type restartable struct {
	url     string
	kill    func()
	restart func()
	saved   time.Duration // how long after a delivery the store holds it
	// acksKept: the broker's store holds every acknowledgement that came
	// a while before the kill, so only what was held is replayed.
	// JetStream writes consumer acknowledgements asynchronously: after a
	// SIGKILL it replays some acknowledged messages too.
	acksKept bool
}

// TestMQTT311BrokerRestart runs `replayguard run` over MQTT 3.1.1 against a
// broker that is killed (SIGKILL) while the consumer holds committed
// deliveries unacknowledged, and started again on its own store, which has
// them in flight: the broker sends them again and they must be found
// duplicate; nothing is lost, nothing applied twice, the audit chain
// verifies.
func TestMQTT311BrokerRestart(t *testing.T) {
	t.Run("Mosquitto in 3.1.1 mode, with persistence", func(t *testing.T) {
		skipShort(t)
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		b := restartable{url: m.URL(), kill: m.Kill, restart: m.Restart, saved: 1500 * time.Millisecond, acksKept: true}
		d := brokerRestart(t, b, "3.1.1")
		if log := d.logText(); !strings.Contains(log, `protocol=3.1.1`) || strings.Contains(log, "protocol=5") {
			t.Errorf("run did not speak 3.1.1 only; its log:\n%s", log)
		}
	})
	t.Run("NATS's MQTT listener, protocol auto, JetStream store kept", func(t *testing.T) {
		skipShort(t)
		// ack_wait above the hold: NATS sends again every message whose
		// PUBACK is that late, acknowledged batches included.
		n := testbroker.StartNATS(t, testbroker.NATSOptions{MQTT: true, MQTTAckWait: 2 * brokerHold})
		b := restartable{url: n.MQTTURL(), kill: n.Kill, restart: n.Restart, saved: 200 * time.Millisecond}
		d := brokerRestart(t, b, "auto")
		log := d.logText()
		for _, want := range []string{
			`msg="mqtt broker refused a protocol version" broker=` + n.MQTTURL() + ` protocol=5`,
			`msg="mqtt protocol negotiated: used for every broker of the list" protocol=3.1.1 broker=` + n.MQTTURL() + ` asked=auto`,
		} {
			if !strings.Contains(log, want) {
				t.Errorf("run's log lacks %q", want)
			}
		}
	})
}

func brokerRestart(t *testing.T, b restartable, protocol string) *daemon {
	t.Setenv("REPLAYGUARD_FAILPOINT_BEFORE_ACK", brokerHold.String())
	sources := sourceNames(3)
	s := newSetupWith(t, []string{b.url}, setupOptions{API: true, Protocol: protocol})
	d := startDaemon(t, s)
	d.WaitReady()
	pub := testbroker.NewPublisher(t, []string{b.url}, testbroker.PublisherOptions{
		Window: 10, MQTT311: true, Topic: func(source string) string { return topicPrefix + source }})

	publishEach(t, pub, sources, 20)
	d.WaitHigh(lastSequences(pub))
	waitStable(t, "the audit position", brokerHold+time.Second, 30*time.Second, d.Position) // phase 1 acknowledged
	before := d.Position()
	publishEach(t, pub, sources, 20) // phase 2: committed, then held before the acks
	waitFor(t, "phase 2 committed", 10*time.Second, func() bool { return d.Position() >= before+60 })
	time.Sleep(b.saved) // the broker's store has them in flight
	b.kill()
	b.restart()
	publishTail(t, pub, sources, 10)
	d.WaitHigh(lastSequences(pub))
	waitStable(t, "the audit position", brokerHold+time.Second, time.Minute, d.Position)
	checkFinalRun(t, d, 0)
	d.Stop()

	r := verifyStore(t, openStore(t, s), pub, sources)
	checkCLI(t, d, r)
	r.checkReplays(t, false)
	if r.Unacked != 0 || r.Lost != 0 || r.GapSeqs != 0 {
		t.Errorf("%d publishes unacknowledged, %d lost, %d gap sequences (%s): the broker kept every message",
			r.Unacked, r.Lost, r.GapSeqs, r.gapsString())
	}
	// The batches of phase 2 committed last were held at the kill (the
	// first ones may have been acknowledged while the rest was published).
	if countPhase(r.DuplicatesOf, 21, 40) == 0 {
		t.Error("no message of phase 2, held unacknowledged at the kill, was replayed")
	}
	for k, n := range r.DuplicatesOf {
		if b.acksKept && (k.seq <= 20 || k.seq > 40 || n != 1) {
			t.Errorf("%v found duplicate %d times: only phase 2, held unacknowledged at the kill, is replayed, once", k, n)
		}
	}
	t.Logf("%d replays found duplicate, %d of them of phase 2 (%d messages)", r.Duplicates, countPhase(r.DuplicatesOf, 21, 40), 20*len(sources))
	return d
}

// logText is everything the daemon logged, over all its starts.
func (d *daemon) logText() string {
	b, err := os.ReadFile(d.log)
	if err != nil {
		d.t.Fatal(err)
	}
	return string(b)
}

// countPhase adds the counts of the sequences from..to.
func countPhase(m map[seqKey]int, from, to int64) int {
	n := 0
	for k, c := range m {
		if k.seq >= from && k.seq <= to {
			n += c
		}
	}
	return n
}

// TestProtocolNotNegotiable runs `replayguard run` against brokers that
// refuse every MQTT version it tries: it must exit non-zero at once with
// one error naming the versions and what to set, not retry forever.
func TestProtocolNotNegotiable(t *testing.T) {
	skipShort(t)
	t.Run("NATS's MQTT listener with protocol 5", func(t *testing.T) {
		n := testbroker.StartNATS(t, testbroker.NATSOptions{MQTT: true})
		out := runFails(t, []string{n.MQTTURL()}, "5")
		want := "mqtt: no broker accepts the MQTT protocol (tried MQTT 5): " + n.MQTTURL() +
			": MQTT 5: CONNACK code 0x01 (unacceptable protocol version); set mqtt.protocol to 3.1.1 (or auto)"
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	})
	t.Run("a listener that closes every connection, with protocol auto", func(t *testing.T) {
		a := closingListener(t)
		out := runFails(t, []string{a}, "auto")
		for _, want := range []string{"(tried MQTT 5 and MQTT 3.1.1)",
			a + ": MQTT 5: the broker closed the connection after the CONNECT without a CONNACK; MQTT 3.1.1: the broker closed",
			"check that mqtt.brokers name MQTT listeners"} {
			if !strings.Contains(out, want) {
				t.Errorf("stderr lacks %q:\n%s", want, out)
			}
		}
	})
}

// runFails runs `replayguard run` on brokers and returns its output, once
// it has exited non-zero (within 20 s).
func runFails(t *testing.T, brokers []string, protocol string) string {
	t.Helper()
	s := newSetupWith(t, brokers, setupOptions{Protocol: protocol})
	var out bytes.Buffer
	cmd := exec.Command(replayguardBinary(t), "run", "-c", s.Path)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("run: %v, want a non-zero exit\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("run still running after 20 s against brokers that refuse every version\n%s", out.String())
	}
	return out.String()
}

// closingListener accepts connections on a loopback port and closes each
// once it has read something: a server that refuses whatever MQTT it is
// sent.
func closingListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 512))
			c.Close()
		}
	})
	return "tcp://" + l.Addr().String()
}
