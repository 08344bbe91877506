package config

import (
	"fmt"
	"strings"
	"testing"
)

const twoFeeds = `mqtt:
  client_id: replayguard-1
  feeds:
    - {name: a, brokers: [tcp://site-a-1:1883, tcp://site-a-2:1883]}
    - {name: b, brokers: [tcp://site-b-1:1883], client_id: replayguard-1-dr, protocol: "3.1.1", username: dr}
`

// Each feed is its own session: <client_id>-<name> unless set, mqtt's
// protocol and credentials unless set; mqtt.brokers stays empty, and
// config print reads back.
func TestFeedsDefaults(t *testing.T) {
	c, err := Parse([]byte(twoFeeds+"  username: ops\n  password_env: MQTT_PASS\n"+route(ok)), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.MQTT.Feeds[0], c.MQTT.Feeds[1]
	if len(c.MQTT.Brokers) != 0 {
		t.Errorf("mqtt.brokers defaulted to %v beside feeds", c.MQTT.Brokers)
	}
	if a.ClientID != "replayguard-1-a" || a.Protocol != ProtocolAuto || a.Username != "ops" || a.PasswordEnv != "MQTT_PASS" {
		t.Errorf("feed a: %+v", a)
	}
	if b.ClientID != "replayguard-1-dr" || b.Protocol != ProtocolMQTT311 || b.Username != "dr" || b.PasswordEnv != "MQTT_PASS" {
		t.Errorf("feed b: %+v", b)
	}
	if err := c.ValidateRun(); err != nil {
		t.Errorf("ValidateRun: %v", err)
	}
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out, "print.yaml", nil)
	if err != nil || !equalConfig(back, c) {
		t.Fatalf("config print does not read back: %v\n%s", err, out)
	}
}

func TestFeedsRules(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"feeds beside brokers", "mqtt:\n  brokers: [tcp://x:1883]\n  feeds: [{name: a, brokers: [tcp://y:1883]}]\n",
			[]string{"mqtt.brokers: brokers and feeds are both set: with feeds, each feed lists its own brokers"}},
		{"a feed without a name or brokers", "mqtt:\n  feeds: [{brokers: [tcp://y:1883]}, {name: b}]\n",
			[]string{"mqtt.feeds[0].name: name is required: it names the feed in audit records and metrics, like a or site-b",
				"mqtt.feeds[1].brokers: brokers is empty: list the feed's brokers, like tcp://site-b-1:1883"}},
		{"two feeds with one name", "mqtt:\n  feeds: [{name: a, brokers: [tcp://y:1883]}, {name: a, brokers: [tcp://z:1883]}]\n",
			[]string{`mqtt.feeds[1].name: name "a" is also feeds[0]'s: each feed needs its own`}},
		{"a name that cannot label a metric", "mqtt:\n  feeds: [{name: site a, brokers: [tcp://y:1883]}]\n",
			[]string{`mqtt.feeds[0].name: name "site a" may hold only letters, digits, '-' and '_' (at most 64)`}},
		{"two feeds on one session", "mqtt:\n  feeds: [{name: a, brokers: [tcp://y:1883], client_id: rg}, {name: b, brokers: [tcp://z:1883], client_id: rg}]\n",
			[]string{`mqtt.feeds[1].client_id: client_id "rg" is also feeds[0]'s: each feed is its own session and needs its own id`}},
		{"a bad broker and protocol", "mqtt:\n  feeds: [{name: a, brokers: [nope], protocol: '4'}]\n",
			[]string{`mqtt.feeds[0].brokers[0]: broker "nope" is not a URL like tcp://127.0.0.1:1883`,
				`mqtt.feeds[0].protocol: protocol "4" is not one of 5, 3.1.1 or auto`}},
		{"an empty list of feeds", "mqtt:\n  feeds: []\n",
			[]string{"mqtt.feeds: feeds is empty: list the broker paths to consume at once, or remove it and list mqtt.brokers"}},
		{"feeds with nothing after it", "mqtt:\n  feeds:\n",
			[]string{"mqtt.feeds: feeds is empty: list the broker paths to consume at once, or remove it and list mqtt.brokers"}},
		{"a feed's id is another's probe id", "mqtt:\n  client_id: rg\n  feeds: [{name: a, brokers: [tcp://y:1883]}, {name: a-probe, brokers: [tcp://z:1883]}]\n",
			[]string{`mqtt.feeds[0].client_id: client_id "rg-a" with "-probe" is feeds[1]'s client id: the feed's version probe connects under it with a clean start, which would end that feed's session`}},
		{"feeds with input jetstream", "input: jetstream\njetstream: {stream: S, consumer: c}\nmqtt:\n  feeds: [{name: a, brokers: [tcp://y:1883]}]\n",
			[]string{"mqtt.feeds: feeds are MQTT broker paths: input is jetstream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkProblems(t, tt.file+route(ok), tt.want...) })
	}
}

// run needs a session id for every feed: one from mqtt.client_id, or the
// feed's own.
func TestFeedsNeedClientIDs(t *testing.T) {
	c, err := Parse([]byte("mqtt:\n  feeds: [{name: a, brokers: [tcp://y:1883], client_id: rg-a}, {name: b, brokers: [tcp://z:1883]}]\n"+route(ok)), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.ValidateRun()
	if err == nil || !strings.Contains(err.Error(), "mqtt.feeds[1].client_id: client_id is empty") || strings.Contains(err.Error(), "feeds[0]") {
		t.Fatalf("ValidateRun = %v; want feed b's missing id named, and only it", err)
	}
}

// The forward output connects as the first feed does unless told
// otherwise, and may not take a feed's session.
func TestFeedsAndTheForwardOutput(t *testing.T) {
	const fwd = `routes:
  - name: r
    topic: a/+/c
    source: [dev]
    sequence: seq
    effects: [{forward: {topic: "clean/{topic}"}}]
`
	c, err := Parse([]byte(`mqtt:
  feeds:
    - {name: a, brokers: [tcp://site-a:1883], client_id: rg-a, username: ops, password_file: /etc/rg/pass, tls: {ca_file: /etc/rg/ca.pem}}
    - {name: b, brokers: [tcp://site-b:1883], client_id: rg-b}
`+fwd), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Outputs.MQTT
	if strings.Join(o.Brokers, ",") != "tcp://site-a:1883" || o.ClientID != "rg-a-out" || o.Username != "ops" || o.PasswordFile != "/etc/rg/pass" || o.TLS.CAFile != "/etc/rg/ca.pem" {
		t.Fatalf("output %+v", o)
	}
	checkProblems(t, "mqtt:\n  client_id: rg\n  feeds: [{name: out, brokers: [tcp://y:1883]}, {name: b, brokers: [tcp://z:1883]}]\n"+fwd,
		`outputs.mqtt.client_id: client_id "rg-out" is mqtt.feeds[0]'s (out): two connections with one id take the session from each other; name the feed otherwise, or set outputs.mqtt.client_id`)
}

// A feed's tls block is its own but for the client certificate and key,
// which it takes from mqtt.tls when it sets neither; its CA file (unset:
// the system's roots) and whether it verifies its broker are its own, and
// a feed that does not verify is warned of.
func TestAFeedsTLSTakesItsClientCertificateFromMQTT(t *testing.T) {
	c, err := Parse([]byte(`mqtt:
  client_id: rg
  tls: {ca_file: /etc/rg/ca.pem, cert_file: /etc/rg/c.pem, key_file: /etc/rg/k.pem}
  feeds:
    - {name: a, brokers: ['ssl://site-a:8883']}
    - {name: b, brokers: ['ssl://site-b:8883'], tls: {insecure_skip_verify: true}}
    - {name: c, brokers: ['ssl://site-c:8883'], tls: {ca_file: /etc/rg/c-ca.pem, cert_file: /etc/rg/c2.pem, key_file: /etc/rg/k2.pem}}
`+route(ok)), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []TLSConfig{
		{CAFile: "/etc/rg/ca.pem", CertFile: "/etc/rg/c.pem", KeyFile: "/etc/rg/k.pem"},
		{CertFile: "/etc/rg/c.pem", KeyFile: "/etc/rg/k.pem", InsecureSkipVerify: true}, // the system's roots: a public certificate
		{CAFile: "/etc/rg/c-ca.pem", CertFile: "/etc/rg/c2.pem", KeyFile: "/etc/rg/k2.pem"},
	}
	for i, f := range c.MQTT.Feeds {
		if *f.TLS != want[i] {
			t.Errorf("feed %s: tls %+v, want %+v", f.Name, *f.TLS, want[i])
		}
	}
	if ws := fmt.Sprint(c.Warnings()); !strings.Contains(ws, "mqtt.feeds[1].tls.insecure_skip_verify") {
		t.Errorf("warnings %s", ws)
	}
}

// In a share group, a feed's client id of its own is warned of: members
// given one file would share that feed's session.
func TestAFeedsOwnClientIDInAShareGroupIsWarnedOf(t *testing.T) {
	c, err := Parse([]byte(`store: {kind: postgres, url: "postgres://db/ops"}
mqtt:
  client_id: rg-1
  share_group: plant
  feeds:
    - {name: a, brokers: [tcp://site-a:1883]}
    - {name: b, brokers: [tcp://site-b:1883], client_id: rg-dr}
`+route(ok)), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := fmt.Sprint(c.Warnings())
	if !strings.Contains(ws, "mqtt.feeds[1].client_id") || strings.Contains(ws, "mqtt.feeds[0].client_id") {
		t.Errorf("warnings %s", ws)
	}
}

// So is the forward output's: one id for every member of a group.
func TestAForwardOutputsOwnClientIDInAShareGroupIsWarnedOf(t *testing.T) {
	for _, tc := range []struct {
		name, outputs string
		warned        bool
	}{
		{"its own", "outputs:\n  mqtt: {client_id: dispatch-out}\n", true},
		{"derived from mqtt.client_id", "outputs:\n  mqtt: {brokers: [tcp://down:1883]}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte("store: {kind: postgres, url: \"postgres://db/ops\"}\nmqtt:\n  client_id: rg-1\n  share_group: plant\n"+tc.outputs+route(ok)), "f.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			if ws := fmt.Sprint(c.Warnings()); strings.Contains(ws, "outputs.mqtt.client_id") != tc.warned {
				t.Errorf("warnings %s, want one at outputs.mqtt.client_id: %v", ws, tc.warned)
			}
		})
	}
}

// A broker two feeds list, however its URL is spelled, is warned of: the
// feeds would be one path. A broker listed twice within one feed is not.
func TestABrokerTwoFeedsListIsWarnedOf(t *testing.T) {
	c, err := Parse([]byte(`mqtt:
  client_id: rg-1
  feeds:
    - {name: a, brokers: [tcp://site-a:1883, tcp://Site-B:1883]}
    - {name: b, brokers: ['mqtt://site-b:1883/']}
    - {name: c, brokers: [tcp://site-c:1883, tcp://site-c:1883]}
    - {name: d, brokers: [tcp://localhost:1884, tcp://127.0.0.1:1885]}
    - {name: e, brokers: ['tcp://127.0.0.1:1884', 'tcp://[::1]:1885', tcp://127.0.0.2:1884]}
`+route(ok)), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var shared []string
	for _, w := range c.Warnings() {
		if strings.Contains(w.Message, "one broker is one path") {
			shared = append(shared, fmt.Sprintf("%s (line %d): %s", w.Path, w.Line, w.Message))
		}
	}
	want := []string{
		"mqtt.feeds[1].brokers[0] (line 5): feed b lists broker mqtt://site-b:1883/, as feed a does",
		"mqtt.feeds[4].brokers[0] (line 8): feed e lists broker tcp://127.0.0.1:1884, as feed d does",
		"mqtt.feeds[4].brokers[1] (line 8): feed e lists broker tcp://[::1]:1885, as feed d does",
	}
	if len(shared) != len(want) {
		t.Fatalf("warnings %q, want %d", shared, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(shared[i], want[i]) {
			t.Errorf("warning %q, want %q…", shared[i], want[i])
		}
	}
}

// A former share group is one topic level, as share_group is.
func TestAFormerShareGroupMustBeOneTopicLevel(t *testing.T) {
	_, err := Parse([]byte("mqtt:\n  client_id: rg-1\n  former_share_groups: [old, \"a/b\"]\n"+route(ok)), "f.yaml", nil)
	if err == nil || !strings.Contains(err.Error(), `mqtt.former_share_groups[1]: former share group "a/b" is empty or contains '/', '+' or '#'`) {
		t.Fatalf("err %v", err)
	}
}

// A former filter is a topic filter, as a route's topic is.
func TestAFormerFilterMustBeATopicFilter(t *testing.T) {
	_, err := Parse([]byte("mqtt:\n  client_id: rg-1\n  former_filters: [\"plant/+/old\", \"plant/#/x\"]\n"+route(ok)), "f.yaml", nil)
	if err == nil || !strings.Contains(err.Error(), `mqtt.former_filters[1]: former filter "plant/#/x": `) {
		t.Fatalf("err %v", err)
	}
	if _, err := Parse([]byte("mqtt:\n  client_id: rg-1\n  former_filters: [\"plant/+/old\"]\n"+route(ok)), "f.yaml", nil); err != nil {
		t.Fatalf("a valid former filter refused: %v", err)
	}
}
