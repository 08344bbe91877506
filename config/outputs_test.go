package config

import (
	"strings"
	"testing"
	"time"
)

func TestOutputDefaultsFollowTheConsumer(t *testing.T) {
	meters := route("name: r", "topic: plant/+/energy", "source: [\"topic[1]\"]", "id: msgId")
	file := "mqtt: {brokers: [\"ssl://b1:8883\", \"ssl://b2:8883\"], client_id: rg-1, username: u, password_env: PW, tls: {ca_file: /ca.pem}, keep_alive: 15s}\n" +
		meters + effects("forward: {topic: \"clean/{topic}\"}", "forward: {webhook: \"https://dispatch.example/hook\"}", "forward: {nats: \"clean.x\"}")
	c, err := Parse([]byte(file), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Outputs.MQTT
	if m == nil || strings.Join(m.Brokers, ",") != "ssl://b1:8883,ssl://b2:8883" || m.ClientID != "rg-1-out" || m.Username != "u" ||
		m.PasswordEnv != "PW" || m.TLS.CAFile != "/ca.pem" || m.KeepAlive != Duration(15*time.Second) {
		t.Fatalf("outputs.mqtt: %+v", m)
	}
	if w := c.Outputs.Webhook; w == nil || w.Timeout != DefaultWebhookTimeout || w.MaxBackoff != DefaultWebhookBackoff {
		t.Fatalf("outputs.webhook: %+v", w)
	}
	if n := c.Outputs.NATS; n == nil || n.URL != DefaultNATSURL {
		t.Fatalf("outputs.nats: %+v", n)
	}
	if c.Outbox.MaxEntries != DefaultOutboxMaxEntries {
		t.Fatalf("outbox.max_entries %d", c.Outbox.MaxEntries)
	}
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "rg-1-out") {
		t.Fatalf("config print shows the output's client id derived from mqtt.client_id:\n%s", out)
	}
	for _, want := range []string{"outputs:", "timeout: 10s", "max_backoff: 30s", "url: nats://127.0.0.1:4222", "max_entries: 100000"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("config print lacks %q:\n%s", want, out)
		}
	}
	back, err := Parse(out, "print.yaml", nil)
	if err != nil || !equalConfig(back, c) {
		t.Fatalf("config print does not read back: %v\n%s", err, out)
	}
}

// outputs.mqtt named for its client id or keep-alive alone still connects
// to mqtt's brokers as the consumer does: with its username, password and
// TLS, which a setting of its own replaces one by one; with brokers of its
// own it takes none of them.
func TestAnOutputWithoutBrokersOfItsOwnKeepsTheConsumersCredentials(t *testing.T) {
	meters := route("name: r", "topic: plant/+/energy", "source: [\"topic[1]\"]", "id: msgId") + effects("forward: {topic: \"clean/{topic}\"}")
	consumer := "mqtt: {brokers: [\"ssl://b1:8883\"], client_id: rg-1, username: u, password_env: PW, tls: {ca_file: /ca.pem}}\n"
	for _, c := range []struct {
		name, output            string
		user, env, file, caFile string
	}{
		{"a client id alone", "{client_id: rg-1-copies}", "u", "PW", "", "/ca.pem"},
		{"a keep-alive alone", "{keep_alive: 10s}", "u", "PW", "", "/ca.pem"},
		{"a password file of its own", "{password_file: /run/out-pw}", "u", "", "/run/out-pw", "/ca.pem"},
		{"brokers of its own", "{brokers: [\"tcp://cop:1883\"]}", "", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(consumer+meters+"outputs: {mqtt: "+c.output+"}\n"), "f.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			m := cfg.Outputs.MQTT
			if m.Username != c.user || m.PasswordEnv != c.env || m.PasswordFile != c.file || m.TLS.CAFile != c.caFile {
				t.Fatalf("outputs.mqtt %s: username %q, password_env %q, password_file %q, tls.ca_file %q; want %q, %q, %q, %q",
					c.output, m.Username, m.PasswordEnv, m.PasswordFile, m.TLS.CAFile, c.user, c.env, c.file, c.caFile)
			}
			out, err := cfg.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if back, err := Parse(out, "print.yaml", nil); err != nil || !equalConfig(back, cfg) {
				t.Fatalf("config print does not read back: %v\n%s", err, out)
			}
		})
	}
}

func TestOutputsAreLeftOutWithoutAForward(t *testing.T) {
	c, err := Parse([]byte(route(ok)), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Outputs != (OutputsConfig{}) {
		t.Fatalf("outputs without a forward: %+v", c.Outputs)
	}
	out, _ := c.Marshal()
	if strings.Contains(string(out), "outputs:") || !strings.Contains(string(out), "max_entries: 100000") {
		t.Fatalf("config print:\n%s", out)
	}
}

func TestOutputRules(t *testing.T) {
	fwd := route("name: r", "topic: plant/+/energy", "source: [\"topic[1]\"]", "id: msgId") + effects("forward: {topic: \"clean/{topic}\"}")
	for _, tc := range []struct {
		name string
		file string
		want []string
	}{
		{"a separate output broker with its own client id", fwd + "outputs: {mqtt: {brokers: [\"tcp://down:1883\"], client_id: rg-out}}\n", nil},
		{"the consumer's WebSocket broker cannot carry the output",
			"mqtt: {brokers: [\"ws://b:8080/mqtt\"], client_id: rg-1}\n" + fwd,
			[]string{`outputs.mqtt.brokers[0]: broker "ws://b:8080/mqtt": the forward output publishes over tcp://, mqtt://, ssl:// or mqtts://, not WebSocket: set outputs.mqtt.brokers`}},
		{"the consumer's client id is refused",
			"mqtt: {client_id: rg-1}\n" + fwd + "outputs: {mqtt: {client_id: rg-1}}\n",
			[]string{`outputs.mqtt.client_id: client_id "rg-1" is the consumer's own: two connections with one id take the session from each other`}},
		{"a broker without a port", fwd + "outputs: {mqtt: {brokers: [\"tcp://down\"], client_id: o}}\n",
			[]string{`outputs.mqtt.brokers[0]: broker "tcp://down" has no port: add one, like :1883 (:8883 for TLS)`}},
		{"both password sources", fwd + "outputs: {mqtt: {client_id: o, password_env: A, password_file: /b}}\n",
			[]string{"outputs.mqtt: password_env and password_file are both set: keep one"}},
		{"a nats url of another scheme", "outputs: {nats: {url: \"http://n:4222\"}}\n",
			[]string{`outputs.nats.url: url "http://n:4222" is not a nats://host:port or tls://host:port URL`}},
		{"a nats url without a scheme, with a token", "outputs: {nats: {url: \"nats://n1:4222,s3cret@n2:4222\"}}\n",
			[]string{`outputs.nats.url: url "xxxxx@n2:4222" is not a nats://host:port or tls://host:port URL`}},
		{"a nats url whose port is out of range", "outputs: {nats: {url: \"nats://n1:4222,nats://n2:99999\"}}\n",
			[]string{`outputs.nats.url: url "nats://n2:99999": port "99999" is not from 1 to 65535`}},
		{"a negative webhook timeout", "outputs: {webhook: {timeout: -1s}}\n",
			[]string{`outputs.webhook.timeout: duration "-1s" is negative`}},
		{"a negative outbox bound", "outbox: {max_entries: -5}\n",
			[]string{"outbox.max_entries: max_entries must be at least 1, got -5"}},
		{"an unknown output setting", "outputs: {webhook: {retries: 3}}\n",
			[]string{`outputs.webhook: unknown key "retries"; known keys: max_backoff, timeout, tls`}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkProblems(t, tc.file, tc.want...) })
	}
}
