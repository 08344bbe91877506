package config

import (
	"strings"
	"testing"
	"time"
)

func TestJetStreamDefaults(t *testing.T) {
	c, err := Parse([]byte("input: jetstream\njetstream: {stream: PLANT, consumer: replayguard}\n"+route(ok)), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	j := c.JetStream
	if j.URL != DefaultJetStreamURL || j.MaxAckPending != DefaultMaxAckPending || j.AckWait != DefaultAckWait ||
		j.BatchSize != DefaultJetStreamBatch || j.BatchLinger != DefaultBatchLinger || len(j.Subjects) != 0 {
		t.Fatalf("jetstream defaults: %+v", j)
	}
	if err := c.ValidateRun(); err != nil {
		t.Fatalf("ValidateRun without an MQTT client id: %v", err)
	}
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"input: jetstream", "jetstream:", "url: nats://127.0.0.1:4222", "max_ack_pending: 2048", "batch_size: 1024", "ack_wait: 30s"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("config print lacks %q:\n%s", want, out)
		}
	}
	back, err := Parse(out, "print.yaml", nil)
	if err != nil || !equalConfig(back, c) {
		t.Fatalf("config print does not read back: %v\n%s", err, out)
	}
	t.Run("max_ack_pending follows a large batch", func(t *testing.T) {
		c, err := Parse([]byte("input: jetstream\njetstream: {stream: S, consumer: c, batch_size: 1500}\n"), "f.yaml", nil)
		if err != nil || c.JetStream.MaxAckPending != 3000 {
			t.Fatalf("%v %+v", err, c.JetStream)
		}
	})
	t.Run("input mqtt leaves the section out", func(t *testing.T) {
		c := Default()
		out, _ := c.Marshal()
		if c.JetStream != nil || strings.Contains(string(out), "jetstream:") || !strings.Contains(string(out), "input: mqtt") {
			t.Fatalf("config print:\n%s", out)
		}
	})
}

func TestJetStreamRules(t *testing.T) {
	js := func(settings string) string { return "input: jetstream\njetstream: {" + settings + "}\n" }
	for _, tc := range []struct {
		name string
		file string
		want []string
	}{
		{"a full section", js(`url: "tls://n1:4222,tls://n2:4222", stream: PLANT, consumer: rg, subjects: [plant.>, "alarms.*.high"], max_ack_pending: 4096, ack_wait: 1m, batch_size: 512, batch_linger: 5ms, tls: {ca_file: ca.pem}, creds_file: rg.creds`), nil},
		{"an unknown input", "input: kafka\n", []string{`input: input "kafka" is not mqtt or jetstream`}},
		{"no stream", js("consumer: rg"), []string{"jetstream.stream: stream is required: name the JetStream stream to consume (or set REPLAYGUARD_JETSTREAM_STREAM)"}},
		{"a stream name with a dot", js("stream: plant.a, consumer: rg"), []string{`jetstream.stream: stream "plant.a" is not a JetStream name: no spaces, '.', '*', '>', '/' or '\'`}},
		{"a consumer name with a wildcard", js("stream: S, consumer: rg*"), []string{`jetstream.consumer: consumer "rg*" is not a JetStream name: no spaces, '.', '*', '>', '/' or '\'`}},
		{"an http url", js("stream: S, consumer: rg, url: http://n:4222"), []string{`jetstream.url: url "http://n:4222" is not a nats://host:port or tls://host:port URL`}},
		{"credentials in the url", js("stream: S, consumer: rg, url: nats://u:pw@n:4222"), []string{`jetstream.url: url "nats://u:xxxxx@n:4222" carries credentials: put them in jetstream.creds_file instead`}},
		{"a token in the url", js("stream: S, consumer: rg, url: nats://s3cret@n:4222"), []string{`jetstream.url: url "nats://xxxxx@n:4222" carries credentials: put them in jetstream.creds_file instead`}},
		{"credentials in a url without a scheme", js(`stream: S, consumer: rg, url: "nats://n1:4222,u:s3cret@n2"`), []string{`jetstream.url: url "xxxxx@n2" is not a nats://host:port or tls://host:port URL`}},
		{"a subject with an inner '>'", js("stream: S, consumer: rg, subjects: [plant.>.x]"), []string{`jetstream.subjects[0]: subject "plant.>.x" has '>' that is not the whole last token`}},
		{"a subject with a partial '*'", js("stream: S, consumer: rg, subjects: [plant.m*]"), []string{`jetstream.subjects[0]: subject "plant.m*" has '*' that is not a whole token`}},
		{"a subject with an empty token", js("stream: S, consumer: rg, subjects: [plant..x]"), []string{`jetstream.subjects[0]: subject "plant..x" has an empty token (a leading, trailing or doubled '.')`}},
		{"a subject listed twice", js("stream: S, consumer: rg, subjects: [a.b, a.b]"), []string{`jetstream.subjects[1]: subject "a.b" is listed twice`}},
		{"max_ack_pending below batch_size", js("stream: S, consumer: rg, batch_size: 100, max_ack_pending: 50"), []string{"jetstream.max_ack_pending: max_ack_pending 50 is below batch_size 100: the server stops delivering before a batch can fill"}},
		{"a batch no memory holds", js("stream: S, consumer: rg, batch_size: 1000000000, max_ack_pending: 1000000000"), []string{"jetstream.batch_size: batch_size must be from 1 to 65535 (one transaction, held in memory), got 1000000000"}},
		{"ack_wait below a second", js("stream: S, consumer: rg, ack_wait: 500ms"), []string{"jetstream.ack_wait: ack_wait 500ms is below 1s: the server would deliver a batch again while it is being committed"}},
		{"a zero batch size", js("stream: S, consumer: rg, batch_size: 0"), []string{"jetstream.batch_size: batch_size is 0: remove it to use the default (1024), or set a positive value"}},
		{"a zero ack_wait", js("stream: S, consumer: rg, ack_wait: 0s"), []string{"jetstream.ack_wait: ack_wait is 0: remove it to use the default (30s), or set a positive value"}},
		{"a cert without its key", js("stream: S, consumer: rg, tls: {cert_file: c.pem}"), []string{"jetstream.tls.key_file: cert_file is set without key_file: set both or neither"}},
		{"an unknown setting", js("stream: S, consumer: rg, durable: x"), []string{`jetstream: unknown key "durable"; known keys: ack_wait, batch_linger, batch_size, consumer, creds_file, max_ack_pending, stream, subjects, tls, url`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problemsOf(t, tc.file)
			for i := range got { // drop the line numbers
				if _, rest, ok := strings.Cut(got[i], ": "); ok && strings.HasPrefix(got[i], "f.yaml:") {
					got[i] = rest
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n  got  %q\n  want %q", got, tc.want)
			}
		})
	}
}

func TestValidateRunJetStream(t *testing.T) {
	for _, tc := range []struct {
		name, consumer, want string
	}{
		{"a fixed name is accepted", "replayguard", ""},
		{"an empty name is refused", "", "jetstream.consumer: consumer is empty: a durable consumer needs a fixed name, like replayguard (or set REPLAYGUARD_JETSTREAM_CONSUMER)"},
		{"a generated name is refused", "rg-6ba7b810-9dad-11d1-80b4-00c04fd430c8", `looks generated: a durable consumer needs the same name at every start, or it starts over from the stream's first message`},
		{"a Deployment pod name is refused", "replayguard-7d9f8c6b5-x2k4p", "looks generated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte("input: jetstream\njetstream: {stream: S}\n"+route(ok)), "f.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			c.JetStream.Consumer = tc.consumer
			err = c.ValidateRun()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ValidateRun: %v; want %q", err, tc.want)
			}
		})
	}
}

func TestJetStreamEnvAndWarnings(t *testing.T) {
	env := map[string]string{EnvInput: "jetstream", EnvJetStreamURL: "nats://n:4222", EnvJetStreamStream: "PLANT", EnvJetStreamConsumer: "rg-1"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := Parse([]byte(route(ok)), "f.yaml", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if j := c.JetStream; c.Input != InputJetStream || j == nil || j.URL != "nats://n:4222" || j.Stream != "PLANT" || j.Consumer != "rg-1" {
		t.Fatalf("env overrides: %q %+v", c.Input, j)
	}
	if err := c.ValidateRun(); err != nil {
		t.Fatal(err)
	}
	c.JetStream.AckWait = Duration(2 * time.Second)
	c.MQTT.CleanStart = true // not used by a jetstream run: no warning
	var got []string
	for _, w := range c.Warnings() {
		got = append(got, w.Path)
	}
	if strings.Join(got, ",") != "jetstream.ack_wait" {
		t.Fatalf("warnings at %v, want only jetstream.ack_wait", got)
	}
	c.Input = InputMQTT
	if ws := c.Warnings(); len(ws) == 0 || ws[0].Path != "jetstream" {
		t.Fatalf("a jetstream section under input mqtt: warnings %v", ws)
	}
}

// REPLAYGUARD_INPUT=jetstream with no stream anywhere: the problem names
// the variable that would set it as well as the key, as the consumer's
// does.
func TestAJetStreamInputWithoutAStreamNamesItsVariable(t *testing.T) {
	env := map[string]string{EnvInput: "jetstream", EnvJetStreamConsumer: "rg"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	_, err := Parse([]byte(route(ok)), "f.yaml", getenv)
	want := "jetstream.stream: stream is required: name the JetStream stream to consume (or set REPLAYGUARD_JETSTREAM_STREAM)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Parse: %v\nwant %q", err, want)
	}
}
