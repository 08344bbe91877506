package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// dynsecCommand sends one command to the dynamic security plugin of b as
// its admin, over $CONTROL/dynamic-security/v1, and requires the plugin's
// answer to report no error.
func dynsecCommand(t *testing.T, b *testbroker.Mosquitto, command map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	answers := make(chan []byte, 1)
	c := paho.NewClient(paho.ClientConfig{ClientID: testbroker.UniqueClientID("dynsec-admin"), Conn: conn,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			select {
			case answers <- pr.Packet.Payload:
			default:
			}
			return true, nil
		}}})
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: testbroker.UniqueClientID("dynsec-admin"), KeepAlive: 30, CleanStart: true,
		UsernameFlag: true, Username: "admin", PasswordFlag: true, Password: []byte("admin-secret")}); err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(&paho.Disconnect{})
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$CONTROL/dynamic-security/v1/response", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"commands": []map[string]any{command}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, &paho.Publish{Topic: "$CONTROL/dynamic-security/v1", QoS: 1, Payload: body}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-answers:
		var r struct {
			Responses []struct{ Command, Error string }
		}
		if err := json.Unmarshal(a, &r); err != nil || len(r.Responses) != 1 || r.Responses[0].Error != "" {
			t.Fatalf("dynamic security plugin answered %s to %s (%v)", a, body, err)
		}
	case <-ctx.Done():
		t.Fatalf("no answer from the dynamic security plugin to %s", body)
	}
}

// TestASubscriptionRefusedOnAReconnectIsLoudAndNamesTheRoute: run started
// on a broker that granted its subscriptions; the broker's access control
// then denies them (the dynamic security plugin, changed while both run)
// and the broker restarts without the session. run goes on, not ready:
// /readyz says the broker refuses the subscriptions, naming each filter,
// its route and the reason code; the log says so at ERROR, naming the
// routes and filters; replayguard_subscribe_refusals_total counts it. Once
// the access control grants them again, run is ready without a restart.
func TestASubscriptionRefusedOnAReconnectIsLoudAndNamesTheRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto")
	}
	bin := buildBinary(t)
	t.Setenv("RG_TEST_PASSWORD", "rg-secret")
	for _, tc := range []struct{ protocol, want string }{
		{"5", `mqtt: subscription refused: "incidents/#" (route incidents): reason code 0x87 (not authorized)`},
		{"3.1.1", `mqtt3: subscription refused: "incidents/#" (route incidents): return code 0x80 (failure: denied by the broker's access control, or a filter it does not take)`},
	} {
		t.Run("MQTT "+tc.protocol, func(t *testing.T) {
			b := dynsecMosquitto(t, true)
			listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
			cfg := testConfig(t, "")
			text, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(text), "tcp://127.0.0.1:1883", b.URL(), 1)
			edited = strings.Replace(edited, "  session_expiry: 1h\n",
				"  session_expiry: 1h\n  username: rg\n  password_env: RG_TEST_PASSWORD\n  protocol: \""+tc.protocol+"\"\n", 1)
			edited = strings.Replace(edited, "127.0.0.1:9780", listen, 1)
			if err := os.WriteFile(cfg, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			daemon, exited, logPath := startRunLogged(t, bin, cfg, listen)

			dynsecCommand(t, b, map[string]any{"command": "setDefaultACLAccess", "acls": []map[string]any{{"acltype": "subscribe", "allow": false}}})
			b.Restart() // without persistence: the session, and its subscriptions, are gone
			var why string
			waitUntil(t, "/readyz says the broker refuses the subscriptions", func() bool {
				code, body := get(t, "http://"+listen+"/readyz")
				var r struct{ Error string }
				json.Unmarshal([]byte(body), &r)
				why = r.Error
				return code == http.StatusServiceUnavailable && strings.Contains(why, "refuses")
			})
			if want := "not ready: connected, and the broker refuses to renew the subscriptions (trying again): " + tc.want; !strings.HasPrefix(why, want) ||
				!strings.Contains(why, `"plant/+/energy" (route meters)`) {
				t.Fatalf("/readyz error %q, want it to start %q and name the meters route's filter", why, want)
			}
			logs, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`level=ERROR msg="mqtt broker refused a subscription on a reconnect`,
				`routes="[incidents meters]" filters="[incidents/# plant/+/energy]"`} {
				if !strings.Contains(string(logs), want) {
					t.Fatalf("the log does not say %q:\n%s", want, logs)
				}
			}
			if n := metricSum(t, listen, "replayguard_subscribe_refusals_total"); n < 1 {
				t.Fatalf("replayguard_subscribe_refusals_total = %v, want at least 1", n)
			}

			dynsecCommand(t, b, map[string]any{"command": "setDefaultACLAccess", "acls": []map[string]any{{"acltype": "subscribe", "allow": true}}})
			waitUntil(t, "ready once the broker grants the subscriptions again", func() bool {
				code, _ := get(t, "http://"+listen+"/readyz")
				return code == http.StatusOK
			})
			stopRun(t, daemon, exited)
		})
	}
}
