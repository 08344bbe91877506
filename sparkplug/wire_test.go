package sparkplug

import (
	"math"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// wirePayloads are payloads an edge node sends, which the wire path must
// decode itself, and hand-made ones at its edges.
func wirePayloads(t testing.TB) map[string][]byte {
	ts := time.UnixMilli(1_767_225_600_000)
	metrics := []Metric{
		{Name: "Energy", Datatype: Double, Value: 0.25},
		{Name: "Temperature", Datatype: Int32, Value: int64(-7)},
		{Name: "Pulses", Datatype: UInt64, Value: uint64(1 << 40)},
		{Name: "Current", Datatype: Float, Value: float32(12.5)},
		{Name: "Running", Datatype: Boolean, Value: true},
		{Name: "Node Control/State", Datatype: String, Value: "running"},
		{Name: "Spare", Datatype: Int64, Value: nil},
	}
	edge := NewEdge("plant", "m1", 200)
	out := map[string][]byte{
		"NBIRTH":                  edge.Birth(ts, metrics).Payload,
		"NDATA by alias":          edge.Data(ts.Add(time.Millisecond), metrics).Payload,
		"DBIRTH":                  edge.DeviceBirth("pump", ts.Add(2*time.Millisecond), metrics).Payload,
		"DDATA by alias":          edge.DeviceData("pump", ts.Add(3*time.Millisecond), metrics).Payload,
		"DDEATH":                  edge.DeviceDeath("pump", ts.Add(4*time.Millisecond)).Payload,
		"NDEATH":                  edge.Death(ts.Add(5 * time.Millisecond)).Payload,
		"empty":                   {},
		"a later seq wins":        protowire.AppendVarint(protowire.AppendTag(protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 7), 3, protowire.VarintType), 9),
		"a seq as bytes":          protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte{1}),
		"an unknown field":        protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1),
		"a truncated metric":      protowire.AppendTag(nil, 2, protowire.BytesType),
		"a negative Int32 bdSeq":  mustMarshal(t, &pb.Payload{Metrics: []*pb.Payload_Metric{{Name: proto.String("bdSeq"), Datatype: proto.Uint32(uint32(pb.DataType_Int32)), Value: &pb.Payload_Metric_IntValue{IntValue: math.MaxUint32}}}}),
		"a string bdSeq":          mustMarshal(t, &pb.Payload{Metrics: []*pb.Payload_Metric{{Name: proto.String("bdSeq"), Value: &pb.Payload_Metric_StringValue{StringValue: "1"}}}}),
		"bytes":                   mustMarshal(t, &pb.Payload{Metrics: []*pb.Payload_Metric{{Alias: proto.Uint64(3), Value: &pb.Payload_Metric_BytesValue{BytesValue: []byte{0, 1}}}}}),
		"a NaN":                   mustMarshal(t, &pb.Payload{Metrics: []*pb.Payload_Metric{{Alias: proto.Uint64(3), Value: &pb.Payload_Metric_DoubleValue{DoubleValue: math.NaN()}}}}),
		"a datatype mismatch":     mustMarshal(t, &pb.Payload{Metrics: []*pb.Payload_Metric{{Alias: proto.Uint64(3), Datatype: proto.Uint32(uint32(pb.DataType_String)), Value: &pb.Payload_Metric_LongValue{LongValue: 1}}}}),
		"a dataset":               mustMarshal(t, &pb.Payload{Metrics: []*pb.Payload_Metric{{Alias: proto.Uint64(3), Value: &pb.Payload_Metric_DatasetValue{DatasetValue: &pb.Payload_DataSet{NumOfColumns: proto.Uint64(1)}}}}}),
		"a flagged null":          mustMarshal(t, &pb.Payload{Metrics: []*pb.Payload_Metric{{Alias: proto.Uint64(3), IsNull: proto.Bool(true), IsHistorical: proto.Bool(true), Value: &pb.Payload_Metric_LongValue{LongValue: 1}}}}),
		"invalid UTF-8 in a name": mustMarshal(t, &pb.Payload{Metrics: []*pb.Payload_Metric{{Name: proto.String("\xff"), Value: &pb.Payload_Metric_LongValue{LongValue: 1}}}}),
		"uuid and body":           mustMarshal(t, &pb.Payload{Seq: proto.Uint64(4), Uuid: proto.String("u"), Body: []byte("b")}),
		"stored and forwarded": mustMarshal(t, &pb.Payload{Seq: proto.Uint64(5), Metrics: []*pb.Payload_Metric{
			{Alias: proto.Uint64(1), Timestamp: proto.Uint64(1), IsHistorical: proto.Bool(true), Value: &pb.Payload_Metric_DoubleValue{DoubleValue: 0.25}},
			{Alias: proto.Uint64(1), Timestamp: proto.Uint64(2), IsHistorical: proto.Bool(false), Value: &pb.Payload_Metric_DoubleValue{DoubleValue: 0.5}},
			{Alias: proto.Uint64(1), Timestamp: proto.Uint64(3), IsTransient: proto.Bool(true), Value: &pb.Payload_Metric_DoubleValue{DoubleValue: 1}}}}),
	}
	// is_historical given twice: the last wins
	h := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 3)
	h = protowire.AppendVarint(protowire.AppendTag(h, 5, protowire.VarintType), 1)
	h = protowire.AppendVarint(protowire.AppendTag(h, 5, protowire.VarintType), 0)
	out["a flag replaced"] = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), h)
	// is_historical as bytes: not a bool the wire path reads
	hb := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 3)
	hb = protowire.AppendBytes(protowire.AppendTag(hb, 5, protowire.BytesType), []byte{1})
	out["a flag as bytes"] = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), hb)
	// a oneof given twice: the second value replaces the first
	m := protowire.AppendVarint(protowire.AppendTag(nil, 11, protowire.VarintType), 5)
	m = protowire.AppendString(protowire.AppendTag(m, 15, protowire.BytesType), "five")
	out["a oneof replaced"] = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), m)
	return out
}

func mustMarshal(t testing.TB, p *pb.Payload) []byte {
	b, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWireDecodeReadsWhatEdgesSend(t *testing.T) {
	fast := []string{"NBIRTH", "NDATA by alias", "DBIRTH", "DDATA by alias", "DDEATH", "NDEATH", "empty", "a later seq wins",
		"a negative Int32 bdSeq", "bytes", "a NaN", "a flagged null", "uuid and body", "a oneof replaced",
		"stored and forwarded", "a flag replaced"}
	payloads := wirePayloads(t)
	for _, name := range fast {
		t.Run(name+" is read from the wire, as the generated types read it", func(t *testing.T) {
			got, ok := decodeWire(payloads[name])
			if !ok {
				t.Fatal("the wire path gave up")
			}
			want, err := decodeMessage(payloads[name])
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("wire:\n%+v\ngenerated (%v):\n%+v", got, err, want)
			}
		})
	}
	t.Run("is_historical is read on both paths, the last given winning", func(t *testing.T) {
		for name, want := range map[string][]bool{"stored and forwarded": {true, false, false}, "a flag replaced": {false},
			"a flagged null": {true}} {
			for path, decode := range map[string]func([]byte) (Payload, bool){"wire": decodeWire,
				"generated": func(b []byte) (Payload, bool) { p, err := decodeMessage(b); return p, err == nil }} {
				p, ok := decode(payloads[name])
				var got []bool
				for _, m := range p.Metrics {
					got = append(got, m.Historical)
				}
				if !ok || !reflect.DeepEqual(got, want) {
					t.Fatalf("%s, %s path: historical %v (decoded %v), want %v", name, path, got, ok, want)
				}
			}
		}
	})
	for _, name := range []string{"a seq as bytes", "an unknown field", "a truncated metric", "a string bdSeq",
		"a datatype mismatch", "a dataset", "invalid UTF-8 in a name", "a flag as bytes"} {
		t.Run(name+" is left to the generated types", func(t *testing.T) {
			if _, ok := decodeWire(payloads[name]); ok {
				t.Fatal("the wire path decoded it")
			}
		})
	}
}

// FuzzWireDecode checks that wherever the wire path decodes a payload, the
// generated types decode it too, to the same result. The seed corpus: the
// payloads above.
func FuzzWireDecode(f *testing.F) {
	for _, b := range wirePayloads(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := decodeWire(b)
		if !ok {
			return
		}
		want, err := decodeMessage(b)
		if err != nil {
			t.Fatalf("the wire path decoded what the generated types refuse (%v): %+v", err, got)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("wire:\n%+v\ngenerated:\n%+v", got, want)
		}
	})
}
