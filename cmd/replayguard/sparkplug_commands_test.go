package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// A sparkplug route on the namespace's filter (which covers a host
// application's NCMD, DCMD and STATE messages too) subscribes to the
// message types it decides alone: a rebirth request, a device command and
// a host's STATE never reach it, so nothing is held for them, on a new
// session and on one resumed from a build that subscribed to the filter
// itself (that subscription is removed).
func TestASparkplugRouteIsNotSentTheHostApplicationsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	bin := buildBinary(t)
	for _, resumed := range []bool{false, true} {
		t.Run(fmt.Sprintf("resumed session %v", resumed), func(t *testing.T) {
			broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
			listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
			clientID := testbroker.UniqueClientID("rg-sp")
			cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
			os.WriteFile(cfg, []byte(fmt.Sprintf(`store: {kind: embedded, path: %s}
routes:
  - name: plant
    kind: sparkplug
    topic: spBv1.0/#
    effects:
      - entity: "meter/{topic[3]}"
        add: {pulses: metrics.Pulses}
mqtt: {brokers: [%s], client_id: %s, session_expiry: 1h}
http: {listen: %s}
`, filepath.Join(t.TempDir(), "data"), broker.URL(), clientID, listen)), 0o644)
			if resumed {
				subscribeAsBefore(t, broker.Addr(), clientID, "spBv1.0/#")
			}
			daemon, exited := startRun(t, bin, cfg, listen)

			ts := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
			next := func() time.Time { ts = ts.Add(time.Second); return ts }
			edge := sparkplug.NewEdge("plant", "m1", 0)
			metrics := []sparkplug.Metric{{Name: "Pulses", Datatype: sparkplug.Int64, Value: int64(0)}}
			rebirth, err := proto.Marshal(&pb.Payload{Timestamp: proto.Uint64(uint64(next().UnixMilli())), Metrics: []*pb.Payload_Metric{{
				Name: proto.String("Node Control/Rebirth"), Datatype: proto.Uint32(uint32(pb.DataType_Boolean)),
				Value: &pb.Payload_Metric_BooleanValue{BooleanValue: true}}}})
			if err != nil {
				t.Fatal(err)
			}
			pub := testbroker.NewPublisher(t, []string{broker.URL()}, testbroker.PublisherOptions{})
			birth, data := edge.Birth(next(), metrics), edge.Data(next(), []sparkplug.Metric{{Name: "Pulses", Value: int64(1)}})
			for _, m := range []sparkplug.Message{
				{Topic: "spBv1.0/STATE/scada-1", Payload: []byte(`{"online":true,"timestamp":1764921600000}`)},
				birth,
				{Topic: "spBv1.0/plant/NCMD/m1", Payload: rebirth},
				{Topic: "spBv1.0/plant/DCMD/m1/pump", Payload: rebirth},
				data, // last: what came before it is decided with it or before
			} {
				if !pub.Send(context.Background(), m.Topic, m.Payload) {
					t.Fatalf("publish to %s not acknowledged", m.Topic)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(mustRun(t, "", "state", "--json", "-c", cfg), `"pulses": 1`) {
				if time.Now().After(deadline) {
					t.Fatalf("the edge's data not applied within 10 s; state:\n%s", mustRun(t, "", "state", "--json", "-c", cfg))
				}
				time.Sleep(50 * time.Millisecond)
			}
			if h := listHeld(t, cfg); len(h) != 0 {
				t.Errorf("%d messages held, want none; the first: %s %s (%s)", len(h), h[0].Topic, h[0].Outcome, h[0].Reason)
			}
			stopRun(t, daemon, exited)
		})
	}
}

// subscribeAsBefore leaves on the broker at addr a persistent session of
// clientID subscribed to filter, as a build that subscribed a sparkplug
// route to its topic itself left it.
func subscribeAsBefore(t *testing.T, addr, clientID, filter string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: clientID, Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	expiry := uint32(3600)
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: true,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatal(err)
	}
}
