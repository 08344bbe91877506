package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // "line: path: message"
	}{
		{"an unknown top-level key is refused with a suggestion", "stor: {}",
			[]string{`1: unknown key "stor" (did you mean "store"?)`}},
		{"an unknown key lists the known ones when nothing is close", "store:\n  colour: red",
			[]string{`2: store: unknown key "colour"; known keys: allow_async_replication, allow_not_durable, cached_rows, commit_timeout, journal, kind, member, path, prefix, read_timeout, schema, url, wait_replicas`}},
		{"an unknown key in a route names the route and covers the key it misspells",
			"routes:\n  - name: r\n    topc: a\n    source: [d]\n    id: i",
			[]string{`3: routes[0] (r): unknown key "topc" (did you mean "topic"?)`}},
		{"an unknown key in an effect is refused",
			route(ok, "effects:\n      - entity: x\n        sum: {n: n}"),
			[]string{"7: routes[0] (r).effects[0]: effect has no fields: set at least one of add, set, max, min, like add: {kwh: kwh}",
				`8: routes[0] (r).effects[0]: unknown key "sum" (did you mean "set"?)`}},
		{"an unknown key under tls is refused", "mqtt:\n  tls: {ca: x}",
			[]string{`2: mqtt.tls: unknown key "ca"; known keys: ca_file, cert_file, insecure_skip_verify, key_file`}},
		{"a word for a number is refused", "window:\n  max_entries: lots",
			[]string{`2: window.max_entries: want a whole number, got "lots"`}},
		{"a long value is shown whole", "window:\n  max_entries: averyverylongword",
			[]string{`2: window.max_entries: want a whole number, got "averyverylongword"`}},
		{"the setting is found in a flow mapping", "window: {ttl: 1h, max_entries: lots, keep_epochs: 3}",
			[]string{`1: window.max_entries: want a whole number, got "lots"`}},
		{"a duration without a unit is refused", "window: {keep_epochs: 3, ttl: 90}",
			[]string{`1: window.ttl: duration "90" has no unit: write 90s, 90m or 90h`}},
		{"a negative duration is refused", "mqtt:\n  keep_alive: -5s",
			[]string{`2: mqtt.keep_alive: duration "-5s" is negative`}},
		{"a duration in days is refused with a hint", "window:\n  ttl: 2d",
			[]string{`2: window.ttl: invalid duration "2d": there is no day unit, write hours (24h is a day)`}},
		{"a list for a duration is refused", "window:\n  ttl: [1h]",
			[]string{`2: window.ttl: want a duration like 90s or 1h30m, got a list`}},
		{"a bad size is refused", "limits:\n  max_payload: 1.5MiB",
			[]string{`2: limits.max_payload: invalid size "1.5MiB": want a whole number of bytes, optionally with a unit (B, kB, MB, GB, KiB, MiB, GiB), like 256KiB`}},
		{"a scalar source is refused with a hint", "routes:\n  - name: r\n    topic: a\n    source: dev\n    id: i",
			[]string{`4: routes[0] (r).source: want a list, got "dev" (write [dev] for a list of one)`}},
		{"a list for a string is refused", "store:\n  kind: [a]",
			[]string{`2: store.kind: want a string, got a list`}},
		{"a word for a boolean is refused", "mqtt:\n  clean_start: sometimes",
			[]string{`2: mqtt.clean_start: want true or false, got "sometimes"`}},
		{"a list for a section is refused", "store: [a]",
			[]string{`1: store: want a mapping, got a list`}},
		{"a key set twice is refused", "store:\n  kind: memory\n  kind: redis",
			[]string{`3: store.kind: key "kind" is set twice (first at line 2)`}},
		{"a key set twice in a route is the only problem of its routes", "routes:\n  - name: r\n    topic: a/#\n    topic: b/#\n    source: [s]\n    id: id\n  - name: q q\n    topic: c/#\n    source: [s]\n    id: i",
			[]string{`4: routes[0] (r).topic: key "topic" is set twice (first at line 3)`}},
		{"a YAML syntax error is reported with its line", "store:\n  kind: memory\n\tpath: x",
			[]string{"2: found a tab character that violates indentation"}},
		{"a second document is refused", "store: {}\n---\nstore: {}",
			[]string{"the file holds more than one YAML document"}},
		{"a file that is a list is refused", "- a\n- b",
			[]string{"1: want a mapping, got a list"}},
		{"every problem of a file is listed in line order",
			"window: {ttl: 5}\nstore: {kind: x}\nhttp: {listen: bad, auth_reads: maybe}",
			[]string{`1: window.ttl: duration "5" has no unit: write 5s, 5m or 5h`,
				`2: store.kind: kind "x" is not one of memory, embedded, redis, postgres`,
				`3: http.auth_reads: want true or false, got "maybe"`,
				`3: http.listen: listen "bad" is not host:port, like 127.0.0.1:9780 (or off to disable)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.file), "f.yaml", nil)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, p := range ve.Problems {
				s := p.String()
				if p.Line > 0 {
					s = strconv.Itoa(p.Line) + ": " + s
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n  got  %q\n  want %q", got, tt.want)
			}
		})
	}
}

func TestGivenZeros(t *testing.T) {
	tests := []struct {
		name string
		file string
		want string
	}{
		{"a zero ttl is refused", "window:\n  ttl: 0s", "2: window.ttl: ttl is 0: remove it to use the default (2h), or set a positive value"},
		{"a zero batch size is refused", "mqtt:\n  batch_size: 0", "2: mqtt.batch_size: batch_size is 0: remove it to use the default (1024), or set a positive value"},
		{"a zero payload limit is refused", "limits:\n  max_payload: 0", "2: limits.max_payload: max_payload is 0: remove it to use the default (256KiB), or set a positive value"},
		{"a zero session expiry is refused", "mqtt:\n  session_expiry: 0s", "2: mqtt.session_expiry: session_expiry 0s ends the session at every disconnect, so messages not yet acknowledged would be lost: remove it to use the default (1h), or set a longer one"},
		{"a null value takes the default", "window:\n  ttl:\n  max_entries: ~", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.file), "f.yaml", nil)
			if tt.want == "" {
				if err != nil || c.Window.TTL != DefaultTTL || c.Window.MaxEntries != DefaultMaxEntries {
					t.Fatalf("Parse: %v, %+v", err, c)
				}
				return
			}
			if err == nil || err.Error() != "f.yaml:"+tt.want {
				t.Fatalf("Parse: %v\nwant f.yaml:%s", err, tt.want)
			}
		})
	}
}

func TestEnvOverrides(t *testing.T) {
	env := map[string]string{
		EnvStoreKind:      "postgres",
		EnvStorePath:      "/data",
		EnvStoreURL:       "postgres://db/rg",
		EnvMQTTBrokers:    " tcp://a:1883, ssl://b:8883 ,",
		EnvMQTTClientID:   "rg-7",
		EnvMQTTShareGroup: "grp",
		EnvMQTTUsername:   "me",
		EnvMQTTProtocol:   "3.1.1",
		EnvHTTPListen:     "off",
	}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	file := "store: {kind: memory}\nmqtt: {client_id: rg-1, brokers: ['tcp://x:1']}\nhttp: {listen: ':1'}\n"

	t.Run("every variable overrides its setting", func(t *testing.T) {
		c, err := Parse([]byte(file), "f.yaml", getenv)
		if err != nil {
			t.Fatal(err)
		}
		s, m := c.Store, c.MQTT
		if s.Kind != "postgres" || s.Path != "/data" || s.URL != "postgres://db/rg" ||
			!slices.Equal(m.Brokers, []string{"tcp://a:1883", "ssl://b:8883"}) ||
			m.ClientID != "rg-7" || m.ShareGroup != "grp" || m.Username != "me" || m.Protocol != ProtocolMQTT311 ||
			c.HTTP.Listen != ListenOff || c.HTTP.Enabled() {
			t.Fatalf("overrides not applied: %+v %+v %+v", s, m, c.HTTP)
		}
	})
	t.Run("an empty variable counts as unset", func(t *testing.T) {
		empty := func(string) (string, bool) { return "", true }
		c, err := Parse([]byte(file), "f.yaml", empty)
		if err != nil || c.Store.Kind != "memory" || c.MQTT.ClientID != "rg-1" {
			t.Fatalf("Parse: %v %+v", err, c)
		}
	})
	t.Run("brokers from the variable that name none are refused, not replaced by the default", func(t *testing.T) {
		for _, v := range []string{" ", ",", " , "} {
			_, err := Parse([]byte(file), "f.yaml", func(k string) (string, bool) { return v, k == EnvMQTTBrokers })
			want := "f.yaml: mqtt.brokers: brokers is empty: list at least one, comma-separated, like tcp://127.0.0.1:1883 (set by REPLAYGUARD_MQTT_BROKERS)"
			if err == nil || err.Error() != want {
				t.Fatalf("Parse with %q: %v\nwant %s", v, err, want)
			}
		}
	})
	t.Run("a problem with an overridden setting names the variable, not a line", func(t *testing.T) {
		bad := func(k string) (string, bool) {
			if k == EnvStoreKind {
				return "mongo", true
			}
			if k == EnvMQTTBrokers {
				return "tcp://ok:1,nope", true
			}
			return "", false
		}
		_, err := Parse([]byte(file), "f.yaml", bad)
		want := "f.yaml: store.kind: kind \"mongo\" is not one of memory, embedded, redis, postgres (set by REPLAYGUARD_STORE_KIND)\n" +
			"f.yaml: mqtt.brokers[1]: broker \"nope\" is not a URL like tcp://127.0.0.1:1883 (set by REPLAYGUARD_MQTT_BROKERS)"
		if err == nil || err.Error() != want {
			t.Fatalf("Parse: %v\nwant %s", err, want)
		}
	})
}

func TestDefaults(t *testing.T) {
	t.Run("an empty file takes every default", func(t *testing.T) {
		c, err := Parse(nil, "f.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		want := Default()
		if !equalConfig(c, want) {
			t.Fatalf("got %+v\nwant %+v", c, want)
		}
	})
	t.Run("a file of comments or an empty document takes every default", func(t *testing.T) {
		for _, file := range []string{"# nothing yet\n", "---\n", "~\n"} {
			c, err := Parse([]byte(file), "f.yaml", nil)
			if err != nil || !equalConfig(c, Default()) {
				t.Fatalf("Parse(%q): %v %+v", file, err, c)
			}
		}
	})
	t.Run("Default states every documented value", func(t *testing.T) {
		c := Default()
		checks := []struct {
			name      string
			got, want any
		}{
			{"store.kind", c.Store.Kind, "embedded"},
			{"store.path", c.Store.Path, "./replayguard-data"},
			{"window.ttl", c.Window.TTL.String(), "2h"},
			{"window.max_entries", c.Window.MaxEntries, 1000000},
			{"window.sequence_span", c.Window.SequenceSpan, 4096},
			{"window.keep_epochs", c.Window.KeepEpochs, 2},
			{"limits.max_payload", int64(c.Limits.MaxPayload), int64(262144)},
			{"mqtt.brokers", strings.Join(c.MQTT.Brokers, ","), "tcp://127.0.0.1:1883"},
			{"mqtt.client_id", c.MQTT.ClientID, ""},
			{"mqtt.protocol", c.MQTT.Protocol, "auto"},
			{"mqtt.session_expiry", c.MQTT.SessionExpiry.String(), "1h"},
			{"mqtt.keep_alive", c.MQTT.KeepAlive.String(), "30s"},
			{"mqtt.batch_size", c.MQTT.BatchSize, 1024},
			{"mqtt.batch_linger", c.MQTT.BatchLinger.String(), "1ms"},
			{"mqtt.receive_maximum", c.MQTT.ReceiveMaximum, 2048},
			{"http.listen", c.HTTP.Listen, "127.0.0.1:9780"},
		}
		for _, ch := range checks {
			if ch.got != ch.want {
				t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
			}
		}
	})
	t.Run("receive_maximum holds a batch committing and the next one collected", func(t *testing.T) {
		c, err := Parse([]byte("mqtt: {batch_size: 1500}"), "f.yaml", nil)
		if err != nil || c.MQTT.ReceiveMaximum != 3000 {
			t.Fatalf("Parse: %v, receive_maximum %d, want 3000 (2 × batch_size)", err, c.MQTT.ReceiveMaximum)
		}
	})
	t.Run("a route's qos defaults to 1", func(t *testing.T) {
		c, err := Parse([]byte(route(ok)), "f.yaml", nil)
		if err != nil || c.Routes[0].QoS == nil || *c.Routes[0].QoS != 1 {
			t.Fatalf("Parse: %v", err)
		}
	})
	t.Run("store.path is not defaulted for other kinds", func(t *testing.T) {
		c, err := Parse([]byte("store: {kind: memory}"), "f.yaml", nil)
		if err != nil || c.Store.Path != "" {
			t.Fatalf("Parse: %v, path %q", err, c.Store.Path)
		}
	})
	t.Run("SetDefaults keeps values that are set", func(t *testing.T) {
		c := &Config{Window: WindowConfig{TTL: Duration(5e9), MaxEntries: 3}}
		c.SetDefaults()
		if c.Window.TTL != Duration(5e9) || c.Window.MaxEntries != 3 {
			t.Fatalf("overwritten: %+v", c.Window)
		}
	})
}

func TestLoad(t *testing.T) {
	t.Run("Load reads, interpolates and names the file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "replayguard.yaml")
		if err := os.WriteFile(path, []byte("store: {kind: ${RG_TEST_KIND_UNSET:-bogus}}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		want := path + `:1: store.kind: kind "bogus" is not one of memory, embedded, redis, postgres`
		if err == nil || err.Error() != want || !errors.Is(err, ErrInvalid) {
			t.Fatalf("Load: %v\nwant %s", err, want)
		}
	})
	t.Run("a missing file is a file error, not a validation error", func(t *testing.T) {
		_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
		if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalid) {
			t.Fatalf("Load: %v", err)
		}
	})
	t.Run("the design's example file is valid", func(t *testing.T) {
		c, err := Load("testdata/design.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Routes) != 2 || c.Routes[1].Effects[0].Entity != "meter/{topic[1]}" || c.MQTT.ClientID != "replayguard-1" {
			t.Fatalf("unexpected config: %+v", c)
		}
		if err := c.ValidateRun(); err != nil {
			t.Fatal(err)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestAnchorsAndMergeKeys(t *testing.T) {
	file := `
routes:
  - &meter
    name: meters-a
    topic: a/+/energy
    source: ["topic[1]"]
    id: msgId
    effects: &effects
      - entity: "meter/{topic[1]}"
        add: {kwh: kwh}
  - <<: *meter
    name: meters-b
    topic: b/+/energy
  - <<: *meter
    name: meters-c
    sourse: [x]
`
	t.Run("merged routes take the anchor's settings", func(t *testing.T) {
		c, err := Parse([]byte(file[:strings.Index(file, "  - <<: *meter\n    name: meters-c")]), "f.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		b := c.Routes[1]
		if b.Name != "meters-b" || b.Topic != "b/+/energy" || b.ID != "msgId" || len(b.Effects) != 1 {
			t.Fatalf("merged route: %+v", b)
		}
	})
	t.Run("an unknown key next to a merge key is refused", func(t *testing.T) {
		_, err := Parse([]byte(file), "f.yaml", nil)
		want := `f.yaml:16: routes[2] (meters-c): unknown key "sourse" (did you mean "source"?)`
		if err == nil || err.Error() != want {
			t.Fatalf("Parse: %v\nwant %s", err, want)
		}
	})
}

func TestEmptyValues(t *testing.T) {
	t.Run("an empty list item is refused rather than dropped", func(t *testing.T) {
		_, err := Parse([]byte("routes:\n  -\n"), "f.yaml", nil)
		if err == nil || err.Error() != "f.yaml:2: routes[0]: the list item is empty" {
			t.Fatalf("Parse: %v", err)
		}
	})
	t.Run("empty lists and maps read as nil", func(t *testing.T) {
		c, err := Parse([]byte(route(ok, "effects:\n      - {entity: x, add: {}, set: {s: s}}")+"  - {name: q, topic: b, source: [d], id: i, effects: []}\n"), "f.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Routes[0].Effects[0].Add != nil || c.Routes[1].Effects != nil {
			t.Fatalf("empty values kept: %+v", c.Routes)
		}
		if c, _ := Parse([]byte("routes: []"), "f.yaml", nil); c.Routes != nil {
			t.Fatalf("routes: %#v", c.Routes)
		}
	})
}

func TestMergeLists(t *testing.T) {
	file := `
base: &base {topic: a, source: [d]}
extra: &extra {id: i, colour: red}
`
	t.Run("unknown keys merged from a list of mappings are refused", func(t *testing.T) {
		_, err := Parse([]byte(file+"routes:\n  - <<: [*base, *extra]\n    name: r\n"), "f.yaml", nil)
		got := problemsOf(t, file+"routes:\n  - <<: [*base, *extra]\n    name: r\n")
		want := []string{`unknown key "base"; known keys: audit, http, input, jetstream, limits, mqtt, outbox, outputs, routes, store, window`,
			`unknown key "extra"; known keys: audit, http, input, jetstream, limits, mqtt, outbox, outputs, routes, store, window`,
			`routes[0] (r): unknown key "colour"; known keys: effects, epoch, id, kind, name, qos, sequence, source, topic`}
		if !slices.Equal(got, want) {
			t.Fatalf("Parse: %v\n got  %q\n want %q", err, got, want)
		}
	})
}

func TestProtocolOverride(t *testing.T) {
	file := "mqtt: {client_id: rg-1, protocol: 5}\n"
	t.Run("the variable overrides the file's protocol", func(t *testing.T) {
		env := func(k string) (string, bool) { return ProtocolAuto, k == EnvMQTTProtocol }
		c, err := Parse([]byte(file), "f.yaml", env)
		if err != nil || c.MQTT.Protocol != ProtocolAuto {
			t.Fatalf("Parse: %v, protocol %q", err, c.MQTT.Protocol)
		}
	})
	t.Run("a bad protocol from the variable names the variable", func(t *testing.T) {
		env := func(k string) (string, bool) { return "mqtt5", k == EnvMQTTProtocol }
		_, err := Parse([]byte(file), "f.yaml", env)
		want := `f.yaml: mqtt.protocol: protocol "mqtt5" is not one of 5, 3.1.1 or auto (set by REPLAYGUARD_MQTT_PROTOCOL)`
		if err == nil || err.Error() != want {
			t.Fatalf("Parse: %v\nwant %s", err, want)
		}
	})
}
