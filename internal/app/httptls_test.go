package app

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// http.tls.ca_file "asks for client certificates" (config.HTTPConfig, and
// lint accepts it beside cert_file): a client without one must not get in.
func TestHTTPCAFileRequiresClientCertificates(t *testing.T) {
	dir := t.TempDir()
	cert, key, pool := testbroker.SelfSigned(t, dir)
	// any CA will do for the clients: the test's client presents no certificate
	ca := filepath.Join(dir, "clients-ca.pem")
	data, _ := os.ReadFile(cert)
	os.WriteFile(ca, data, 0o600)

	ln, _, done := serveHTTPS(t, config.TLSConfig{CertFile: cert, KeyFile: key, CAFile: ca})

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	res, err := client.Get("https://" + ln.Addr().String() + "/healthz")
	if err == nil {
		res.Body.Close()
		t.Fatalf("a client without a certificate got %d; http.tls.ca_file asks for client certificates", res.StatusCode)
	}
	t.Logf("without a certificate: %v", err)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	signed := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}
	defer signed.CloseIdleConnections()
	if res, err = signed.Get("https://" + ln.Addr().String() + "/healthz"); err != nil {
		t.Fatalf("a client with a certificate of the CA: %v", err)
	}
	res.Body.Close()
	select {
	case err := <-done:
		t.Fatalf("the server stopped: %v", err)
	default:
	}
}

// A command that goes through the API of the process holding the store
// trusts the server's own certificate (http.tls.cert_file of the same
// configuration): a site's self-signed or private-CA certificate, which
// the system's roots do not hold, failed every such command, and so did
// one issued for the host's name while the command dials the listener on
// this host.
func TestACommandReachesAnAPIServedWithASelfSignedCertificate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cert func(dir string) (string, string)
	}{
		{"issued for 127.0.0.1", func(dir string) (string, string) {
			c, k, _ := testbroker.SelfSigned(t, dir)
			return c, k
		}},
		{"issued for the host's name only", func(dir string) (string, string) {
			c, k, _ := testbroker.SelfSignedNamed(t, dir, "ops-1.example")
			return c, k
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert, key := tc.cert(t.TempDir())
			_, cfg, _ := serveHTTPS(t, config.TLSConfig{CertFile: cert, KeyFile: key})

			r, err := (&Tool{Config: cfg}).remoteHolding(errors.New("held"), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer r.client.CloseIdleConnections()
			var health map[string]string
			if err := r.do("GET", "/healthz", nil, &health); err != nil || health["status"] != "ok" {
				t.Fatalf("GET /healthz through the command's client: %v, %v", health, err)
			}
		})
	}
}

// A listener on every address is reached on this host's loopback.
func TestAPIAddrOfAListenerOnEveryAddressIsLoopback(t *testing.T) {
	for listen, want := range map[string]string{
		":9780": "127.0.0.1:9780", "0.0.0.0:9780": "127.0.0.1:9780", "[::]:9780": "[::1]:9780",
		"127.0.0.1:9780": "127.0.0.1:9780", "ops-1.example:9780": "ops-1.example:9780", "[::1]:9780": "[::1]:9780",
	} {
		if got := apiAddr(listen); got != want {
			t.Errorf("apiAddr(%q) = %q, want %q", listen, got, want)
		}
	}
}

// serveHTTPS serves the daemon's API with tc on a loopback port until the
// test ends, and returns its listener, its configuration, and what Serve
// returns once it ends (nothing before).
func serveHTTPS(t *testing.T, tc config.TLSConfig) (net.Listener, *config.Config, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{HTTP: config.HTTPConfig{Listen: ln.Addr().String(), TLS: tc}}
	d := &daemon{app: &App{Config: cfg}, log: slog.New(slog.DiscardHandler), reg: prometheus.NewRegistry()}
	srv, err := d.newServer(Build{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() { done <- srv.Serve(ctx, ln); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })
	return ln, cfg, done
}
