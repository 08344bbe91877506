package config

import (
	"reflect"
	"strings"
	"testing"
)

// equalConfig compares two configurations' settings, not where a file set
// them.
func equalConfig(a, b *Config) bool {
	x, y := *a, *b
	x.origin, y.origin = origin{}, origin{}
	return reflect.DeepEqual(&x, &y)
}

func TestMarshal(t *testing.T) {
	full := `
store: {kind: postgres, url: "postgres://rg@db:5432/rg?sslmode=disable"}
window: {ttl: 90m, max_entries: 5000, sequence_span: 128, keep_epochs: 3}
limits: {max_payload: 512kB}
routes:
  - name: incidents
    topic: incidents/#
    source: [agency, source_id]
    sequence: sequence
    epoch: boot_id
    qos: 2
    effects:
      - entity: "incident/{incident_id}"
        add: {casualties: casualty_delta}
        max: {peak: casualty_delta}
      - entity: "unit/{unit_id}"
        set: {status: unit_status}
        min: {low: x.y}
  - name: sys
    topic: $SYS/broker/#
    source: ["topic[2]"]
    id: "a$b"
    effects:
      - entity: "cost$$$${centre}/{topic[1]}"
        add: {n: n}
mqtt:
  brokers: [tcp://a:1883, wss://b:443/mqtt]
  client_id: rg-1
  session_expiry: 1h30m
  clean_start: true
  share_group: grp
  former_share_groups: [old]
  username: u
  password_env: RG_PASSWORD
  tls: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem, insecure_skip_verify: true}
  keep_alive: 45s
  batch_size: 100
  batch_linger: 5ms
  receive_maximum: 200
http: {listen: "", token_file: /run/token, auth_reads: true, tls: {cert_file: c, key_file: k, ca_file: ca}}
audit: {archive: /var/lib/replayguard-archive}
`
	tests := []struct {
		name string
		file string
	}{
		{"the defaults read back unchanged", ""},
		{"every setting reads back unchanged", full},
		{"the design's example reads back unchanged", mustRead(t, "testdata/design.yaml")},
		{"retention with its default interval reads back unchanged", "audit: {retention: {max_records: 50000}, archive: ./archive}"},
		{"sinks read back unchanged", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://c:4318/v1/logs'}, {name: s, kind: syslog, address: 'h:514', facility: local0}, {name: s2, kind: syslog, address: 'h:514', max_message: 64KiB}, {name: f, kind: file, path: /x, max_bytes: 1MiB}]}"},
		{"every retention setting reads back unchanged", "audit: {retention: {max_age: 720h, max_records: 10000000, interval: 30s}, archive: /var/lib/replayguard-archive}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.file), "in.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(out, "out.yaml", nil)
			if err != nil {
				t.Fatalf("reading back:\n%s\n%v", out, err)
			}
			if !equalConfig(c, back) {
				t.Fatalf("round trip changed the config:\n%s\n got  %+v\n want %+v", out, back, c)
			}
		})
	}
	t.Run("dollars survive the round trip", func(t *testing.T) {
		c, err := Parse([]byte(full), "in.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		r := c.Routes[1]
		if r.ID != "a$b" || r.Topic != "$SYS/broker/#" || r.Effects[0].Entity != "cost$${centre}/{topic[1]}" {
			t.Fatalf("id %q, topic %q, entity %q", r.ID, r.Topic, r.Effects[0].Entity)
		}
	})
	t.Run("the output shows every default", func(t *testing.T) {
		out, err := Default().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"kind: embedded", "path: ./replayguard-data", "ttl: 2h", "max_entries: 1000000",
			"sequence_span: 4096", "keep_epochs: 2", "max_payload: 256KiB", "- tcp://127.0.0.1:1883", "session_expiry: 1h",
			"keep_alive: 30s", "batch_size: 1024", "batch_linger: 1ms", "receive_maximum: 2048", "listen: 127.0.0.1:9780",
			"cached_rows: 100000"} {
			if !strings.Contains(string(out), want+"\n") {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("a sql or forward effect is printed without an entity", func(t *testing.T) {
		c, err := Parse([]byte(`store: {kind: postgres, url: "postgres://rg@db/rg"}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId,
     effects: [{sql: "INSERT INTO r (m) VALUES ($1)", args: ["topic[1]"]}, {forward: {topic: "clean/{topic}"}}]}
`), "in.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "entity:") {
			t.Fatalf("the printed effects name an entity:\n%s", out)
		}
	})
	t.Run("Marshal sets defaults on a copy", func(t *testing.T) {
		c := &Config{Routes: []Route{{Name: "r"}}, Audit: AuditConfig{Sinks: []SinkConfig{{Name: "o", Kind: SinkOTLP, Headers: map[string]string{"X-Api-Key": "k"}}}}}
		if _, err := c.Marshal(); err != nil {
			t.Fatal(err)
		}
		if s := c.Audit.Sinks[0]; c.Store.Kind != "" || c.Routes[0].QoS != nil || s.Timeout != 0 || s.Headers["X-Api-Key"] != "k" {
			t.Fatalf("Marshal changed its receiver: %+v", c)
		}
	})
	t.Run("a member left unset stays out: its default is the command's", func(t *testing.T) {
		c, err := Parse([]byte("store: {kind: redis, url: 'redis://r:6379'}\nmqtt: {client_id: rg-1}\n"), "in.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "member:") {
			t.Errorf("the output names a member:\n%s", out)
		}
	})
	t.Run("a sink's header values are redacted, their names shown", func(t *testing.T) {
		env := map[string]string{"OTLP_KEY": "k3y-s3cret"}
		c, err := Parse([]byte(`audit: {sinks: [{name: o, kind: otlp, endpoint: "http://c:4318/v1/logs", headers: {X-Api-Key: "${OTLP_KEY}", Authorization: "Bearer ${OTLP_KEY}"}}]}`),
			"in.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "s3cret") || !strings.Contains(string(out), "X-Api-Key: xxxxx\n") || !strings.Contains(string(out), "Authorization: xxxxx\n") {
			t.Errorf("a header value shows, or a name is missing:\n%s", out)
		}
		if c.Audit.Sinks[0].Headers["X-Api-Key"] != "k3y-s3cret" {
			t.Errorf("Marshal changed its receiver's headers: %v", c.Audit.Sinks[0].Headers)
		}
	})
	t.Run("a token given as a URL's user is redacted", func(t *testing.T) {
		c := Default()
		c.Routes = []Route{{Name: "r", Topic: "a/#", Source: []string{"s"}, ID: "id",
			Effects: []Effect{{Forward: &Forward{Webhook: "https://s3cret@hooks.example/units/{unit}"}}, {Forward: &Forward{NATS: "units"}}}}}
		c.Outputs.NATS = &OutputNATSConfig{URL: "nats://s3cret@n1:4222,nats://rg:s3cret@n2:4222"}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "s3cret") || !strings.Contains(string(out), "https://xxxxx@hooks.example/units/{unit}") ||
			!strings.Contains(string(out), "nats://xxxxx@n1:4222,nats://rg:xxxxx@n2:4222") {
			t.Errorf("a token shows:\n%s", out)
		}
	})
	t.Run("passwords in URLs are redacted", func(t *testing.T) {
		for _, url := range []string{"postgres://rg:s3cret@db/rg", "host=db password=s3cret dbname=rg", "host=db password='s3 cret'", "redis://:s3cret@r:6379"} {
			c := Default()
			c.Store.URL = url
			c.MQTT.Brokers = []string{"tcp://u:s3cret@h:1"}
			out, err := c.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), "s3") {
				t.Errorf("%q: the password shows:\n%s", url, out)
			}
		}
	})
	t.Run("a webhook URL's password is redacted, and the config keeps it", func(t *testing.T) {
		c := Default()
		c.Routes = []Route{{Name: "r", Topic: "a/#", Source: []string{"s"}, ID: "id",
			Effects: []Effect{{Forward: &Forward{Webhook: "https://dispatch:s3cret@dispatch.example/hook"}},
				{Forward: &Forward{Webhook: "https://dispatch:s3cret@dispatch.example/units/{unit}?at={topic[1]}"}}}}}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "s3cret") || !strings.Contains(string(out), "https://dispatch:xxxxx@dispatch.example/hook") ||
			!strings.Contains(string(out), "https://dispatch:xxxxx@dispatch.example/units/{unit}?at={topic[1]}") {
			t.Errorf("the password shows:\n%s", out)
		}
		if c.Routes[0].Effects[0].Forward.Webhook != "https://dispatch:s3cret@dispatch.example/hook" {
			t.Errorf("Marshal changed its receiver's webhook: %s", c.Routes[0].Effects[0].Forward.Webhook)
		}
	})
}

func mustRead(t *testing.T, path string) string {
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestAPrintedConfigLetsEachMemberDeriveItsOwnClientIDs(t *testing.T) {
	file := `routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId, effects: [{forward: {topic: "clean/{topic}"}}]}
store: {kind: postgres, url: "postgres://db/ops"}
mqtt:
  client_id: ${RG_ID}
  share_group: ops
  feeds:
    - {name: a, brokers: [tcp://site-a:1883]}
    - {name: b, brokers: [tcp://site-b:1883], client_id: rg-dr}
`
	env := func(id string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			switch k {
			case "RG_ID", EnvMQTTClientID:
				return id, true
			}
			return "", false
		}
	}
	first, err := Parse([]byte(file), "in.yaml", env("rg-1"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := first.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	second, err := Parse(out, "printed.yaml", env("rg-2"))
	if err != nil {
		t.Fatalf("reading the printed file:\n%s\n%v", out, err)
	}
	m := second.MQTT
	if m.ClientID != "rg-2" || m.Feeds[0].ClientID != "rg-2-a" || m.Feeds[1].ClientID != "rg-dr" || second.Outputs.MQTT.ClientID != "rg-2-out" {
		t.Fatalf("the second member's ids: mqtt %q, feeds %q and %q, output %q; printed:\n%s",
			m.ClientID, m.Feeds[0].ClientID, m.Feeds[1].ClientID, second.Outputs.MQTT.ClientID, out)
	}
	same, err := Parse(out, "printed.yaml", env("rg-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !equalConfig(first, same) {
		t.Fatalf("the printed file reads back to another config for the same member:\n%s", out)
	}
}
