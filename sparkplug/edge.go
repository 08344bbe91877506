package sparkplug

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// Datatypes an Edge's metrics may have.
const (
	Int32   = pb.DataType_Int32
	Int64   = pb.DataType_Int64
	UInt64  = pb.DataType_UInt64
	Double  = pb.DataType_Double
	Float   = pb.DataType_Float
	Boolean = pb.DataType_Boolean
	String  = pb.DataType_String
)

// Metric is one metric an Edge writes. Value is an int64, uint64,
// float64, float32, bool, string, or nil for a null value. In a birth,
// Alias 0 lets the Edge number the metric itself.
type Metric struct {
	Name     string
	Alias    uint64
	Datatype pb.DataType
	Value    any
}

// Message is one Sparkplug message: its topic and payload.
type Message struct {
	Topic   string
	Payload []byte
}

// Edge is a Sparkplug B edge node: it numbers its messages (seq 0 at each
// NBIRTH, then 1 to 255 and around again, shared by its node and device
// messages), keeps its session's bdSeq and the aliases its births gave,
// and writes data messages by alias. It is not safe for concurrent use.
type Edge struct {
	Group, Node string
	bdSeq       uint64 // the current session's, 0–255
	seq         uint64 // the next message's
	node        map[string]uint64
	devices     map[string]map[string]uint64
	// ByName writes data metrics by name instead of by alias.
	ByName bool
}

// NewEdge returns an edge node whose first session has bdSeq (mod 256).
func NewEdge(group, node string, bdSeq uint64) *Edge {
	return &Edge{Group: group, Node: node, bdSeq: bdSeq % 256, devices: map[string]map[string]uint64{}}
}

// BdSeq is the current session's bdSeq.
func (e *Edge) BdSeq() uint64 { return e.bdSeq }

// Seq is the seq the next message will carry.
func (e *Edge) Seq() uint64 { return e.seq }

// NewSession moves to the next session (a reconnect): bdSeq + 1, wrapping
// 255 to 0. The next birth carries it.
func (e *Edge) NewSession() { e.bdSeq = (e.bdSeq + 1) % 256 }

// SetSeq sets the seq of the next message (a test that starts near the
// wrap).
func (e *Edge) SetSeq(seq uint64) { e.seq = seq % 256 }

// Death is the session's NDEATH, the payload to register as the MQTT Will:
// its bdSeq metric, no seq.
func (e *Edge) Death(ts time.Time) Message {
	return e.encode("NDEATH", "", &pb.Payload{Timestamp: stamp(ts), Metrics: []*pb.Payload_Metric{e.bdSeqMetric()}})
}

// Birth is an NBIRTH of the current session: seq 0, the bdSeq metric and
// every metric by name with its alias and datatype. A second Birth in a
// session is a rebirth. Aliases are assigned anew (a metric's Alias, or
// its place in the list).
func (e *Edge) Birth(ts time.Time, metrics []Metric) Message {
	e.seq = 0
	e.node = map[string]uint64{}
	e.devices = map[string]map[string]uint64{}
	ms := []*pb.Payload_Metric{e.bdSeqMetric()}
	ms = append(ms, births(metrics, e.node)...)
	return e.encode("NBIRTH", "", &pb.Payload{Timestamp: stamp(ts), Seq: proto.Uint64(e.next()), Metrics: ms})
}

// Data is an NDATA of metrics by alias (by name with ByName or for a
// metric the birth did not name).
func (e *Edge) Data(ts time.Time, metrics []Metric) Message {
	return e.encode("NDATA", "", &pb.Payload{Timestamp: stamp(ts), Seq: proto.Uint64(e.next()), Metrics: e.data(metrics, e.node)})
}

// DeviceBirth is a DBIRTH of device, with its aliases.
func (e *Edge) DeviceBirth(device string, ts time.Time, metrics []Metric) Message {
	table := map[string]uint64{}
	e.devices[device] = table
	return e.encode("DBIRTH", device, &pb.Payload{Timestamp: stamp(ts), Seq: proto.Uint64(e.next()), Metrics: births(metrics, table)})
}

// DeviceData is a DDATA of device.
func (e *Edge) DeviceData(device string, ts time.Time, metrics []Metric) Message {
	return e.encode("DDATA", device, &pb.Payload{Timestamp: stamp(ts), Seq: proto.Uint64(e.next()), Metrics: e.data(metrics, e.devices[device])})
}

// DeviceDeath is a DDEATH of device.
func (e *Edge) DeviceDeath(device string, ts time.Time) Message {
	return e.encode("DDEATH", device, &pb.Payload{Timestamp: stamp(ts), Seq: proto.Uint64(e.next())})
}

func (e *Edge) next() uint64 {
	s := e.seq
	e.seq = (e.seq + 1) % 256
	return s
}

func (e *Edge) bdSeqMetric() *pb.Payload_Metric {
	return &pb.Payload_Metric{Name: proto.String("bdSeq"), Datatype: proto.Uint32(uint32(pb.DataType_Int64)),
		Value: &pb.Payload_Metric_LongValue{LongValue: e.bdSeq}}
}

func (e *Edge) topic(typ, device string) string {
	t := "spBv1.0/" + e.Group + "/" + typ + "/" + e.Node
	if device != "" {
		t += "/" + device
	}
	return t
}

func (e *Edge) encode(typ, device string, p *pb.Payload) Message {
	b, err := proto.Marshal(p)
	if err != nil { // every field is set by this package: unreachable
		panic(fmt.Sprintf("sparkplug: encoding %s: %v", typ, err))
	}
	return Message{Topic: e.topic(typ, device), Payload: b}
}

func births(metrics []Metric, table map[string]uint64) []*pb.Payload_Metric {
	out := make([]*pb.Payload_Metric, 0, len(metrics))
	for i, m := range metrics {
		alias := m.Alias
		if alias == 0 {
			alias = uint64(i + 1)
		}
		table[m.Name] = alias
		pm := metric(m)
		pm.Name, pm.Alias, pm.Datatype = proto.String(m.Name), proto.Uint64(alias), proto.Uint32(uint32(m.Datatype))
		out = append(out, pm)
	}
	return out
}

func (e *Edge) data(metrics []Metric, table map[string]uint64) []*pb.Payload_Metric {
	out := make([]*pb.Payload_Metric, 0, len(metrics))
	for _, m := range metrics {
		pm := metric(m)
		if alias, ok := table[m.Name]; ok && !e.ByName {
			pm.Alias = proto.Uint64(alias)
		} else {
			pm.Name, pm.Datatype = proto.String(m.Name), proto.Uint32(uint32(m.Datatype))
		}
		out = append(out, pm)
	}
	return out
}

// metric encodes a value in the field its Go type calls for.
func metric(m Metric) *pb.Payload_Metric {
	pm := &pb.Payload_Metric{}
	switch v := m.Value.(type) {
	case nil:
		pm.IsNull = proto.Bool(true)
	case int64:
		if m.Datatype == Int32 {
			pm.Value = &pb.Payload_Metric_IntValue{IntValue: uint32(int32(v))}
		} else {
			pm.Value = &pb.Payload_Metric_LongValue{LongValue: uint64(v)}
		}
	case uint64:
		pm.Value = &pb.Payload_Metric_LongValue{LongValue: v}
	case float64:
		pm.Value = &pb.Payload_Metric_DoubleValue{DoubleValue: v}
	case float32:
		pm.Value = &pb.Payload_Metric_FloatValue{FloatValue: v}
	case bool:
		pm.Value = &pb.Payload_Metric_BooleanValue{BooleanValue: v}
	case string:
		pm.Value = &pb.Payload_Metric_StringValue{StringValue: v}
	default:
		panic(fmt.Sprintf("sparkplug: metric %q: value of type %T", m.Name, m.Value))
	}
	return pm
}

func stamp(ts time.Time) *uint64 { return proto.Uint64(uint64(ts.UnixMilli())) }
