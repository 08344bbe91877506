package app

import (
	"context"
	"crypto/tls"
	"io"
	stdlog "log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestSinksAndTheWebhookVerifyTheirReceiversWithTheConfiguredCA: an OTLP
// collector, a syslog receiver (RFC 5425) and a webhook receiver behind a
// private CA are reached with tls.ca_file, and refused without it (the
// system roots do not know it).
func TestSinksAndTheWebhookVerifyTheirReceiversWithTheConfiguredCA(t *testing.T) {
	ctx := context.Background()
	certFile, keyFile, _ := testbroker.SelfSigned(t, t.TempDir())
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{pair}}
	var mu sync.Mutex
	got := map[string]int{}
	note := func(what string) {
		mu.Lock()
		got[what]++
		mu.Unlock()
	}
	https := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		note(r.URL.Path)
		if r.URL.Path == "/v1/logs" {
			w.Header().Set("Content-Type", "application/x-protobuf")
		}
		w.WriteHeader(http.StatusOK)
	}))
	https.TLS = serverTLS
	https.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // the handshakes refused without the CA
	https.StartTLS()
	defer https.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				for range strings.Count(string(b), `"position":1`) {
					note("syslog")
				}
			}()
		}
	}()
	rec := engine.AuditRecord{Position: 1, Time: time.Now().UTC(), Outcome: "applied", Route: "meters"}
	log := slog.New(slog.DiscardHandler)
	for _, withCA := range []bool{true, false} {
		// Without the CA the system roots verify: a client certificate is
		// given, so that the syslog sink speaks TLS all the same.
		tlsCfg := config.TLSConfig{CertFile: certFile, KeyFile: keyFile}
		if withCA {
			tlsCfg = config.TLSConfig{CAFile: certFile}
		}
		for _, sc := range []config.SinkConfig{
			{Name: "o", Kind: config.SinkOTLP, Endpoint: https.URL + "/v1/logs", Timeout: config.Duration(5 * time.Second), TLS: tlsCfg},
			{Name: "s", Kind: config.SinkSyslog, Address: ln.Addr().String(), AppName: "replayguard", Facility: "user", TLS: tlsCfg},
		} {
			exp, err := newExporter(ctx, sc, log)
			if err != nil {
				t.Fatal(err)
			}
			err = exp.Export(ctx, []engine.AuditRecord{rec})
			if err == nil { // a second batch on the same connection, once the first is checked alive
				err = exp.Export(ctx, []engine.AuditRecord{rec})
			}
			exp.Close(ctx)
			if withCA && err != nil || !withCA && (err == nil || !strings.Contains(err.Error(), "certificate")) {
				t.Fatalf("%s sink, CA given %v: %v", sc.Kind, withCA, err)
			}
		}
		cfg := &config.Config{Outputs: config.OutputsConfig{Webhook: &config.OutputWebhookConfig{Timeout: config.Duration(5 * time.Second), TLS: tlsCfg}}}
		out, err := newOutput(cfg, engine.OutputWebhook, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = out.Deliver(ctx, []engine.OutboxEntry{{Target: https.URL + "/hook", Payload: []byte(`{}`)}})
		out.Close()
		if withCA && err != nil || !withCA && (err == nil || !strings.Contains(err.Error(), "certificate")) {
			t.Fatalf("webhook, CA given %v: %v", withCA, err)
		}
	}
	waitUntil := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		ok := got["syslog"] == 2
		mu.Unlock()
		if ok || time.Now().After(waitUntil) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if got["/v1/logs"] != 2 || got["/hook"] != 1 || got["syslog"] != 2 {
		t.Fatalf("received %v; want the two batches by each sink's receiver, the entry by the webhook's", got)
	}
}
