package app

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/config"
)

// With mqtt.feeds, run reads mqtt's own password and TLS files only
// through the feeds that take them, and so does lint: a password file
// every feed overrides is not read, and one a feed takes is named once,
// at that feed.
func TestLintReadsMQTTSecretsOnlyThroughTheFeedsThatTakeThem(t *testing.T) {
	t.Setenv("RG_FEED_PASS", "s3cret")
	for _, tc := range []struct {
		name, feedB string
		want        []string // problems, in order
	}{
		{"every feed has its own password", "password_env: RG_FEED_PASS", nil},
		{"feed b takes mqtt's", "username: u", []string{"mqtt.feeds[1] (b).password_file: open /nonexistent/rg-pw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(`mqtt:
  client_id: rg
  username: u
  password_file: /nonexistent/rg-pw
  tls: {ca_file: /nonexistent/rg-ca.pem}
  feeds:
    - {name: a, brokers: [tcp://127.0.0.1:1], password_env: RG_FEED_PASS, tls: {}}
    - {name: b, brokers: [tcp://127.0.0.1:2], `+tc.feedB+`, tls: {}}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
`), "rg.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			ps := CheckLocal(cfg)
			if len(ps) != len(tc.want) {
				t.Fatalf("CheckLocal = %v, want %d problems: %q", ps, len(tc.want), tc.want)
			}
			for i, p := range ps {
				if got := p.Path + ": " + p.Message; !strings.HasPrefix(got, tc.want[i]) {
					t.Errorf("problem %d = %q, want %q", i, got, tc.want[i])
				}
			}
		})
	}
}
