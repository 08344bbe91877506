package main

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// dynsecPlugin is Mosquitto's dynamic security plugin (Debian's path).
const dynsecPlugin = "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"

// deniedMosquitto starts a Mosquitto whose access control (the dynamic
// security plugin) lets user rg, password rg-secret, connect and denies
// it every subscription: it answers a SUBSCRIBE with 0x87 Not authorized
// on MQTT 5 and 0x80 Failure on 3.1.1. (With an acl_file, Mosquitto 2.0
// grants the subscription and drops each message at delivery instead.)
func deniedMosquitto(t *testing.T) *testbroker.Mosquitto {
	t.Helper()
	return dynsecMosquitto(t, false)
}

// dynsecMosquitto starts a Mosquitto whose access control is the dynamic
// security plugin: user rg, password rg-secret, may connect, and
// subscribe when subscribe is set; user admin, password admin-secret, may
// change the access control while the broker runs (dynsecCommand). The
// plugin keeps each change in its file, so a restart keeps it too.
func dynsecMosquitto(t *testing.T, subscribe bool) *testbroker.Mosquitto {
	t.Helper()
	if _, err := os.Stat(dynsecPlugin); err != nil {
		t.Skipf("no Mosquitto dynamic security plugin: %v", err)
	}
	client := func(user, password string, roles ...string) map[string]any {
		salt := make([]byte, 12)
		rand.Read(salt)
		hash, err := pbkdf2.Key(sha512.New, password, salt, 101, 64)
		if err != nil {
			t.Fatal(err)
		}
		c := map[string]any{"username": user, "password": base64.StdEncoding.EncodeToString(hash),
			"salt": base64.StdEncoding.EncodeToString(salt), "iterations": 101}
		var rs []map[string]any
		for _, r := range roles {
			rs = append(rs, map[string]any{"rolename": r})
		}
		if rs != nil {
			c["roles"] = rs
		}
		return c
	}
	control := "$CONTROL/dynamic-security/#"
	acl, err := json.Marshal(map[string]any{
		"defaultACLAccess": map[string]bool{"publishClientSend": true, "publishClientReceive": true, "subscribe": subscribe, "unsubscribe": true},
		"clients":          []map[string]any{client("rg", "rg-secret"), client("admin", "admin-secret", "admin")},
		"groups":           []any{},
		"roles": []map[string]any{{"rolename": "admin", "acls": []map[string]any{
			{"acltype": "publishClientSend", "topic": control, "allow": true},
			{"acltype": "publishClientReceive", "topic": control, "allow": true},
			{"acltype": "subscribePattern", "topic": control, "allow": true},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dynsec.json")
	if err := os.WriteFile(path, acl, 0o600); err != nil {
		t.Fatal(err)
	}
	return testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true,
		Extra: []string{"plugin " + dynsecPlugin, "plugin_opt_config_file " + path}})
}

// TestARunWhoseSubscriptionsTheBrokerDeniesStopsNamingThem: run on a
// broker whose access control refuses its subscriptions exits 1 at start,
// and the error names each topic filter, the route that asked for it and
// why, under MQTT 5 (0x87) and 3.1.1 (0x80) alike.
func TestARunWhoseSubscriptionsTheBrokerDeniesStopsNamingThem(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto")
	}
	b := deniedMosquitto(t)
	t.Setenv("RG_TEST_PASSWORD", "rg-secret")
	for _, tc := range []struct{ protocol, want string }{
		{"5", `mqtt: subscription refused: "incidents/#" (route incidents): reason code 0x87 (not authorized)`},
		{"3.1.1", `mqtt3: subscription refused: "incidents/#" (route incidents): return code 0x80 (failure: denied by the broker's access control, or a filter it does not take)`},
	} {
		t.Run("MQTT "+tc.protocol, func(t *testing.T) {
			cfg := testConfig(t, "")
			b2, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Replace(string(b2), "tcp://127.0.0.1:1883", b.URL(), 1)
			text = strings.Replace(text, "  session_expiry: 1h\n",
				"  session_expiry: 1h\n  username: rg\n  password_env: RG_TEST_PASSWORD\n  protocol: \""+tc.protocol+"\"\n", 1)
			text = strings.Replace(text, "http: {listen: 127.0.0.1:9780}", "http: {listen: \"off\"}", 1)
			if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errs, code := cli(t, "", "run", "-c", cfg)
			if code != 1 || !strings.Contains(errs, tc.want) || !strings.Contains(errs, `"plant/+/energy" (route meters)`) {
				t.Fatalf("run: exit %d, stderr:\n%s\nwant exit 1 with %q and the meters route's filter", code, errs, tc.want)
			}
		})
	}
}
