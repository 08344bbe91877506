package mqttprobe

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var opts = Options{ClientID: "rg-probe-test", Timeout: 2 * time.Second}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestProbeRealBrokers(t *testing.T) {
	ctx := context.Background()
	t.Run("Mosquitto speaks MQTT 5 and 3.1.1", func(t *testing.T) {
		b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		for _, v := range []Version{V5, V311} {
			if err := Probe(ctx, mustURL(t, b.URL()), v, opts); err != nil {
				t.Errorf("MQTT %s: %v", v, err)
			}
		}
	})
	t.Run("NATS's MQTT listener refuses MQTT 5 with a 3.1.1 CONNACK and accepts 3.1.1", func(t *testing.T) {
		n := testbroker.StartNATS(t, testbroker.NATSOptions{MQTT: true})
		u := mustURL(t, n.MQTTURL())
		err := Probe(ctx, u, V5, opts)
		// NATS 2.9 answers MQTT 5's CONNECT with a 3.1.1 CONNACK, return
		// code 1, and closes: paho.golang reads that as the end of the
		// connection, and retried forever.
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "CONNACK code 0x01 (unacceptable protocol version)") {
			t.Errorf("MQTT 5: %v, want a refusal with return code 1", err)
		}
		if err := Probe(ctx, u, V311, opts); err != nil {
			t.Errorf("MQTT 3.1.1: %v", err)
		}
		v, err := Negotiate(ctx, []string{n.MQTTURL()}, Auto, opts, Retry{}, nil)
		if err != nil || v != V311 {
			t.Errorf("Negotiate auto: %v, %v; want 3.1.1", v, err)
		}
		_, err = Negotiate(ctx, []string{n.MQTTURL()}, Only5, opts, Retry{}, nil)
		want := "no broker accepts the MQTT protocol (tried MQTT 5): " + n.MQTTURL() +
			": MQTT 5: CONNACK code 0x01 (unacceptable protocol version); set mqtt.protocol to 3.1.1 (or auto)"
		if !errors.Is(err, ErrNotNegotiable) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Negotiate 5: %v\nwant %s…", err, want)
		}
	})
}

// closer accepts connections and closes each one once it has read from
// it: a listener that refuses whatever it is sent.
func closer(t *testing.T, reply []byte) string {
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
			buf := make([]byte, 256)
			_, _ = c.Read(buf)
			_, _ = c.Write(reply)
			c.Close()
		}
	})
	return "tcp://" + l.Addr().String()
}

func TestNegotiate(t *testing.T) {
	ctx := context.Background()
	t.Run("brokers that close every connection are not negotiable, with one error naming both versions", func(t *testing.T) {
		a, b := closer(t, nil), closer(t, nil)
		_, err := Negotiate(ctx, []string{a, b}, Auto, opts, Retry{}, nil)
		if !errors.Is(err, ErrNotNegotiable) {
			t.Fatalf("Negotiate: %v", err)
		}
		for _, s := range []string{"(tried MQTT 5 and MQTT 3.1.1)", a + ": MQTT 5: the broker closed", "; MQTT 3.1.1: the broker closed",
			b + ": MQTT 5", "check that mqtt.brokers name MQTT listeners"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q lacks %q", err, s)
			}
		}
	})
	t.Run("a feed's brokers that refuse are named by the feed's settings", func(t *testing.T) {
		o := opts
		o.Setting = "mqtt.feeds[1]"
		_, err := Negotiate(ctx, []string{closer(t, nil)}, Only5, o, Retry{}, nil)
		if !errors.Is(err, ErrNotNegotiable) || !strings.Contains(err.Error(), "set mqtt.feeds[1].protocol to 3.1.1 (or auto)") ||
			!strings.Contains(err.Error(), "check that mqtt.feeds[1].brokers name MQTT listeners") || strings.Contains(err.Error(), "mqtt.brokers") {
			t.Fatalf("Negotiate: %v", err)
		}
	})
	t.Run("a listener that answers something other than MQTT refuses", func(t *testing.T) {
		a := closer(t, []byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		_, err := Negotiate(ctx, []string{a}, Only311, opts, Retry{}, nil)
		if !errors.Is(err, ErrNotNegotiable) || !strings.Contains(err.Error(), "is this an MQTT listener?") ||
			!strings.Contains(err.Error(), "set mqtt.protocol to 5 (or auto)") {
			t.Fatalf("Negotiate: %v", err)
		}
	})
	t.Run("a CONNACK with return code 1 refuses the version", func(t *testing.T) {
		a := closer(t, []byte{0x20, 2, 0, 1})
		err := Probe(ctx, mustURL(t, a), V311, opts)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "unacceptable protocol version") {
			t.Fatalf("Probe: %v", err)
		}
	})
	t.Run("a CONNACK refusing something else means the version is spoken", func(t *testing.T) {
		a := closer(t, []byte{0x20, 3, 0, 0x86, 0}) // MQTT 5: bad user name or password
		if err := Probe(ctx, mustURL(t, a), V5, opts); err != nil {
			t.Fatalf("Probe: %v", err)
		}
	})
	t.Run("a broker that is down is waited for, not refused", func(t *testing.T) {
		port := testbroker.FreePort(t)
		down := "tcp://127.0.0.1:" + itoa(port)
		ctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
		defer cancel()
		_, err := Negotiate(ctx, []string{down, closer(t, nil)}, Auto, opts, Retry{Min: 50 * time.Millisecond, Max: 100 * time.Millisecond}, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Negotiate: %v, want the context's deadline: one broker may come up", err)
		}
	})
	t.Run("the first broker that accepts decides for the list", func(t *testing.T) {
		b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		v, err := Negotiate(ctx, []string{closer(t, nil), b.URL()}, Auto, opts, Retry{}, nil)
		if err != nil || v != V5 {
			t.Fatalf("Negotiate: %v, %v; want 5", v, err)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// A probe of an ssl:// URL at a plain MQTT listener says the broker may
// not speak TLS there, as the consumer's own dial does.
func TestAProbeOverTLSOfAPlainBrokerSaysItMayNotSpeakTLS(t *testing.T) {
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	err := Probe(context.Background(), mustURL(t, "ssl://"+b.Addr()), V5, opts)
	if want := "the broker closed the connection during the TLS handshake: it does not speak TLS on this port"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("probe: %v, want %q", err, want)
	}
}
