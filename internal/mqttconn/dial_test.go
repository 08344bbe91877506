package mqttconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestSchemes(t *testing.T) {
	// want: Dialable (and DialsItself, no proxy being set), IsTLS
	want := map[string][2]bool{
		"tcp://127.0.0.1:1883":  {true, false},
		"MQTT://broker:1883":    {true, false},
		"ssl://broker:8883":     {true, true},
		"tls://broker:8883":     {true, true},
		"mqtts://broker:8883":   {true, true},
		"ws://broker:8080/mqtt": {false, false},
		"wss://broker:443/mqtt": {false, false},
	}
	for raw, w := range want {
		t.Run(raw+" is dialled as its scheme says", func(t *testing.T) {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if Dialable(u) != w[0] || DialsItself(u) != w[0] || IsTLS(u) != w[1] {
				t.Fatalf("Dialable %v, DialsItself %v, IsTLS %v; want %v, %v, %v",
					Dialable(u), DialsItself(u), IsTLS(u), w[0], w[0], w[1])
			}
		})
	}
	t.Run("a proxy in the environment leaves dialling to the client library", func(t *testing.T) {
		t.Setenv("all_proxy", "socks5://127.0.0.1:1080")
		u, _ := url.Parse("tcp://127.0.0.1:1883")
		if DialsItself(u) || !Dialable(u) {
			t.Fatal("dials itself with all_proxy set")
		}
	})
}

// A tls:// URL is dialled over TLS, verified against the configured
// roots for the URL's host.
func TestDialVerifiesATLSServerByTheURLsHost(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	u, _ := url.Parse("tls://" + srv.Listener.Addr().String())
	conn, err := Dial(context.Background(), u, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if st := conn.(*tls.Conn).ConnectionState(); !st.HandshakeComplete {
		t.Fatal("a tls:// connection without a completed handshake")
	}
	if _, err := Dial(context.Background(), u, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the server's root: %v, want a certificate error", err)
	}
}
