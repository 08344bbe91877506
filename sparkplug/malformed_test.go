package sparkplug_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

func encode(t *testing.T, p *pb.Payload) []byte {
	t.Helper()
	b, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMalformedSparkplugIsHeldWithItsReason(t *testing.T) {
	onEveryStore(t, testMalformedSparkplugIsHeldWithItsReason)
}

func testMalformedSparkplugIsHeldWithItsReason(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	ts := proto.Uint64(uint64(c.next().UnixMilli()))
	dataset := &pb.Payload_Metric{Name: proto.String("Energy"), Datatype: proto.Uint32(uint32(pb.DataType_DataSet)),
		Value: &pb.Payload_Metric_DatasetValue{DatasetValue: &pb.Payload_DataSet{NumOfColumns: proto.Uint64(1)}}}
	cases := []struct {
		name    string
		topic   string
		payload []byte
		want    string
	}{
		{"a JSON payload", "spBv1.0/plant/NDATA/m1", []byte(`{"seq":1}`), "payload is not a Sparkplug B payload"},
		{"a topic outside the namespace's shape", "spBv1.0/plant/NDATA", edge.Data(c.next(), pulse()).Payload, "is not a Sparkplug B message topic"},
		{"an unknown message type", "spBv1.0/plant/NREPORT/m1", edge.Data(c.next(), pulse()).Payload, `message type "NREPORT" is not one a route decides`},
		{"a node command", "spBv1.0/plant/NCMD/m1", rebirthRequest(t, c), `topic "spBv1.0/plant/NCMD/m1" is a host application's NCMD, a command to edge node "m1" of group "plant", ` +
			`not an edge's message: a sparkplug route decides NBIRTH, NDATA, NDEATH, DBIRTH, DDATA and DDEATH, and subscribes to those alone; this one came another way`},
		{"a device command", "spBv1.0/plant/DCMD/m1/pump", rebirthRequest(t, c), `is a host application's DCMD, a command to device "pump" of edge node "m1" of group "plant", not an edge's message`},
		{"a host application's state", "spBv1.0/STATE/scada-1", []byte(`{"online":true,"timestamp":1764921600000}`),
			`topic "spBv1.0/STATE/scada-1" is host application "scada-1"'s STATE message (Sparkplug 3.0), not an edge's message`},
		{"a device message without a device", "spBv1.0/plant/DDATA/m1", edge.Data(c.next(), pulse()).Payload, "names a device level if and only if"},
		{"a seq over 255", "spBv1.0/plant/NDATA/m1", encode(t, &pb.Payload{Seq: proto.Uint64(256)}), "seq 256 is out of range (0–255)"},
		{"no seq", "spBv1.0/plant/NDATA/m1", encode(t, &pb.Payload{}), "NDATA has no seq"},
		{"no timestamp", "spBv1.0/plant/NDATA/m1", encode(t, &pb.Payload{Seq: proto.Uint64(1)}), "NDATA has no timestamp"},
		{"a string into add", "spBv1.0/plant/NDATA/m1", encode(t, &pb.Payload{Timestamp: ts, Seq: proto.Uint64(1), Metrics: []*pb.Payload_Metric{
			{Name: proto.String("Pulses"), Datatype: proto.Uint32(uint32(pb.DataType_String)), Value: &pb.Payload_Metric_StringValue{StringValue: "3"}}}}),
			"effect field metrics.Pulses: want a number, got string"},
		{"a dataset as a field value", "spBv1.0/plant/NDATA/m1", encode(t, &pb.Payload{Timestamp: ts, Seq: proto.Uint64(1), Metrics: []*pb.Payload_Metric{dataset}}),
			"metrics.Energy: a DataSet value is not a field value"},
		{"a datatype its value does not fit", "spBv1.0/plant/NDATA/m1", encode(t, &pb.Payload{Timestamp: ts, Seq: proto.Uint64(1), Metrics: []*pb.Payload_Metric{
			{Name: proto.String("Energy"), Datatype: proto.Uint32(uint32(pb.DataType_Boolean)), Value: &pb.Payload_Metric_DoubleValue{DoubleValue: 1}}}}),
			"datatype Boolean but a floating-point value"},
		// Last: the data stamped at or after a held NBIRTH is held as its
		// birth's, whose aliases are not known.
		{"a birth without a timestamp", "spBv1.0/plant/NBIRTH/m1", encode(t, &pb.Payload{Seq: proto.Uint64(0)}), "NBIRTH has no timestamp"},
		{"a birth without bdSeq", "spBv1.0/plant/NBIRTH/m1", encode(t, &pb.Payload{Timestamp: ts, Seq: proto.Uint64(0)}), "NBIRTH has no bdSeq metric"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := h.expect(engine.Malformed, sparkplug.Message{Topic: tc.topic, Payload: tc.payload})
			if !strings.Contains(d[0].Reason, tc.want) {
				t.Fatalf("reason %q, want %q", d[0].Reason, tc.want)
			}
		})
	}
	if got := h.field("meter/m1", "pulses"); got != "0" {
		t.Fatalf("pulses %s: a malformed message changed the state", got)
	}
}

// rebirthRequest is a host application's Node Control/Rebirth command.
func rebirthRequest(t *testing.T, c *clock) []byte {
	return encode(t, &pb.Payload{Timestamp: proto.Uint64(uint64(c.next().UnixMilli())), Metrics: []*pb.Payload_Metric{
		{Name: proto.String("Node Control/Rebirth"), Datatype: proto.Uint32(uint32(pb.DataType_Boolean)), Value: &pb.Payload_Metric_BooleanValue{BooleanValue: true}}}})
}
