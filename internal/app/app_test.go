package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
)

func TestSecret(t *testing.T) {
	t.Setenv("RG_TEST_SECRET", "s3cret")
	file := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(file, []byte("from-file\n"), 0o600)
	cases := []struct {
		name, env, file, want, err string
	}{
		{"an environment variable is read", "RG_TEST_SECRET", "", "s3cret", ""},
		{"a file is read without its newline", "", file, "from-file", ""},
		{"an unset variable is an error", "RG_TEST_UNSET_SECRET", "", "", "is not set"},
		{"a missing file is an error", "", file + ".missing", "", "no such file"},
		{"nothing configured is no secret", "", "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Secret(c.env, c.file)
			if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("Secret = %q, %v; want %q, %q", got, err, c.want, c.err)
			}
		})
	}
}

func TestClientTLSRefusesAFileWithoutACertificate(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, []byte("not a certificate"), 0o600)
	if _, err := clientTLS(config.TLSConfig{CAFile: ca}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("got %v", err)
	}
	if c, err := clientTLS(config.TLSConfig{}); c != nil || err != nil {
		t.Fatalf("no TLS settings gave %v, %v", c, err)
	}
}

func TestOpenRefusesASharedStoreWithoutAMember(t *testing.T) {
	cfg, err := config.Parse([]byte("store: {kind: redis, url: redis://127.0.0.1:1}\n"), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "needs a member id: set store.member") {
		t.Fatalf("got %v, want a member id asked for", err)
	}
}

func TestOpenMapsTheConfigurationOntoTheEngine(t *testing.T) {
	b, err := os.ReadFile("../../examples/replayguard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(b, "replayguard.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = config.StoreConfig{Kind: config.StoreMemory}
	a, err := Open(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ds, err := a.Engine.Process(context.Background(), []engine.Message{
		{Topic: "plant/meter-3/energy", Payload: []byte(`{"msgId":"a","kwh":0.25,"kw":3}`)},
		{Topic: "incidents/fd/e1", Payload: []byte(`{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1,"incident_id":7,"casualty_delta":2}`)},
	})
	if err != nil || ds[0].Outcome != engine.Applied || ds[1].Outcome != engine.Applied {
		t.Fatalf("decisions %+v, %v", ds, err)
	}
	st := engine.StateJSON(a.Engine.State())
	if string(st["meter/meter-3"]["peak_kw"]) != "3" || string(st["incident/7"]["casualties"]) != "2" {
		t.Fatalf("state %v", st)
	}
}

func TestEngineOptionsCarryCachedRows(t *testing.T) {
	cfg, err := config.Parse([]byte("store: {kind: embedded, path: d, cached_rows: 2500}\nroutes: [{name: m, topic: 'm/#', source: ['topic[1]'], id: id}]\n"), "(test)", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := EngineOptions(cfg).CachedRows; got != 2500 {
		t.Errorf("CachedRows = %d, want 2500", got)
	}
	// config print shows the configuration's default: the engine's own.
	if config.DefaultCachedRows != engine.DefaultCachedRows {
		t.Errorf("config.DefaultCachedRows %d, engine.DefaultCachedRows %d", config.DefaultCachedRows, engine.DefaultCachedRows)
	}
}
