package web

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type sseEvent struct{ name, data string }

// subscribe opens the event stream; events arrive on the channel until
// the test ends.
func subscribe(t *testing.T, client *http.Client, url string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		cancel()
		t.Fatalf("events: %d %s", res.StatusCode, ct)
	}
	ch := make(chan sseEvent, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			case line == "" && ev.name != "":
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch
}

func next(t *testing.T, ch <-chan sseEvent, name string) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended waiting for %q", name)
			}
			if ev.name == name {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %q event", name)
		}
	}
}

func TestEventStreamCarriesDecisionsAndStateChanges(t *testing.T) {
	f := newFixture(t, Config{})
	f.process(meter("m-0", "1"))
	ch := subscribe(t, f.http.Client(), f.http.URL+"/api/v1/events")
	if hello := next(t, ch, "hello"); hello.data != `{"position":1}` {
		t.Fatalf("hello %q", hello.data)
	}

	decs := f.process(incident(1, "7", 2, "enroute"))
	var rec engine.AuditRecord
	if err := json.Unmarshal([]byte(next(t, ch, "decision").data), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Position != decs[0].Position || rec.Outcome != "applied" || rec.Route != "incidents" {
		t.Fatalf("decision event %+v", rec)
	}
	got := map[string]string{}
	for range 2 {
		var ent entityEvent
		if err := json.Unmarshal([]byte(next(t, ch, "state").data), &ent); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(ent.Fields)
		got[ent.Name] = string(b)
	}
	want := map[string]string{"incident/7": `{"casualties":2}`, "unit/e7": `{"status":"enroute"}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("state events %v, want %v", got, want)
	}
}

func TestASlowClientLosesEventsAndIsToldToResync(t *testing.T) {
	h := NewHub()
	sub := h.subscribe()
	defer h.unsubscribe(sub)
	recs := make([]engine.AuditRecord, subscriberBuffer+10)
	for i := range recs {
		recs[i] = engine.AuditRecord{Position: uint64(i + 1), Outcome: "applied"}
	}
	done := make(chan struct{})
	go func() { h.Committed(recs, nil); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Committed blocked on a client that does not read")
	}
	if !sub.lost.Load() || len(sub.ch) != subscriberBuffer {
		t.Fatalf("lost=%v queued=%d", sub.lost.Load(), len(sub.ch))
	}
	var buf bytes.Buffer
	if err := writeQueued(&buf, sub, <-sub.ch); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(out, "event: decision\n"); n != subscriberBuffer {
		t.Fatalf("%d decisions written, want the %d queued", n, subscriberBuffer)
	}
	if !strings.HasSuffix(out, "event: resync\ndata: {}\n\n") {
		t.Fatalf("stream does not end with a resync: ...%s", out[len(out)-80:])
	}
	if h.Counts().Decisions["applied"] != uint64(len(recs)) {
		t.Fatalf("counts %+v: a dropped event is still counted", h.Counts())
	}
}

func TestTooManyStreamClientsAreRefused(t *testing.T) {
	f := newFixture(t, Config{})
	for range maxSubscribers {
		if f.hub.subscribe() == nil {
			t.Fatal("refused before the limit")
		}
	}
	f.get("/api/v1/events").want(t, http.StatusServiceUnavailable, nil)
}

// serve runs the server on a loopback port until the returned stop is called.
func serve(t *testing.T, s *Server) (addr string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	return ln.Addr().String(), func() error { cancel(); return <-done }
}

func TestServeStopsPromptlyWithAStreamOpen(t *testing.T) {
	f := newFixture(t, Config{})
	addr, stop := serve(t, f.srv)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	ch := subscribe(t, client, "http://"+addr+"/api/v1/events")
	next(t, ch, "hello")
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("stopping took %v with an event stream open", took)
	}
	if _, ok := <-ch; ok {
		for range ch {
		}
	}
}

func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key, pool := testbroker.SelfSigned(t, dir)
	f := newFixture(t, Config{CertFile: cert, KeyFile: key})
	addr, stop := serve(t, f.srv)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	res, err := client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.TLS == nil {
		t.Fatalf("healthz over TLS: %d, tls %v", res.StatusCode, res.TLS != nil)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigIsValidatedBeforeServing(t *testing.T) {
	for _, cfg := range []Config{
		{CertFile: "cert.pem"},
		{AuthReads: true},
		{Listen: "nonsense"},
	} {
		err := New(cfg, Deps{}).Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), ErrConfig.Error()) {
			t.Errorf("%+v: Run = %v, want ErrConfig", cfg, err)
		}
	}
}

func TestServeRefusesAListenerThatIsNotWhatListenSays(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = New(Config{Listen: "0.0.0.0:9780", Token: "t"}, Deps{}).Serve(context.Background(), ln)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("Serve = %v, want a loopback mismatch", err)
	}
}
