package sparkplug

import (
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/replayguard/replayguard/engine"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// decodeWire is DecodeSparkplug's fast path: it reads the protobuf wire
// format of the payloads edge nodes send (timestamp, seq and metrics with a
// name or alias, a timestamp, a datatype, flags and a scalar, string or
// bytes value) straight into the engine's terms, without the generated
// types' dozens of allocations a message. It gives up (ok false) on
// anything else: a field it does not read (metadata, properties, datasets,
// templates, extensions, unknown numbers), a field of an unexpected wire
// type, malformed wire data or any value DecodeSparkplug refuses; the
// generated types then decode the payload, with their errors. Where it
// succeeds its result is the generated path's (FuzzWireDecode checks it):
// the last occurrence of a field wins, a oneof value replaces the previous
// one.
func decodeWire(b []byte) (engine.SparkplugPayload, bool) {
	n, ok := countMetrics(b)
	if !ok {
		return engine.SparkplugPayload{}, false
	}
	out := engine.SparkplugPayload{Metrics: make([]engine.SparkplugMetric, 0, n)}
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return engine.SparkplugPayload{}, false
		}
		b = b[l:]
		switch {
		case (num == 1 || num == 3) && typ == protowire.VarintType:
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return engine.SparkplugPayload{}, false
			}
			if num == 1 {
				out.Timestamp, out.HasTimestamp = v, true
			} else {
				out.Seq, out.HasSeq = v, true
			}
			b = b[l:]
		case num == 2 && typ == protowire.BytesType:
			m, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return engine.SparkplugPayload{}, false
			}
			if !wireMetric(m, &out) {
				return engine.SparkplugPayload{}, false
			}
			b = b[l:]
		case (num == 4 || num == 5) && typ == protowire.BytesType: // uuid, body: not read
			_, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return engine.SparkplugPayload{}, false
			}
			b = b[l:]
		default:
			return engine.SparkplugPayload{}, false
		}
	}
	return out, true
}

// countMetrics counts the payload's metrics fields, and reports whether
// its top level is well-formed.
func countMetrics(b []byte) (int, bool) {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeField(b)
		if l < 0 {
			return 0, false
		}
		if num == 2 && typ == protowire.BytesType {
			n++
		}
		b = b[l:]
	}
	return n, true
}

// wireValue is a metric's value field as the wire has it: the oneof's
// field number (0 for none) and its content.
type wireValue struct {
	field protowire.Number
	bits  uint64
	bytes []byte
}

// wireMetric reads one Metric message and appends it to out, as
// DecodeSparkplug's loop does.
func wireMetric(b []byte, out *engine.SparkplugPayload) bool {
	var (
		m      engine.SparkplugMetric
		val    wireValue
		isNull bool
	)
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return false
		}
		b = b[l:]
		switch {
		case num == 1 || num == 15 || num == 16:
			if typ != protowire.BytesType {
				return false
			}
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return false
			}
			if num == 1 {
				m.Name = string(v)
			} else {
				val = wireValue{field: num, bytes: v}
			}
			b = b[l:]
		case num == 12 || num == 13:
			var v uint64
			if num == 12 && typ == protowire.Fixed32Type {
				v32, n := protowire.ConsumeFixed32(b)
				v, l = uint64(v32), n
			} else if num == 13 && typ == protowire.Fixed64Type {
				v, l = protowire.ConsumeFixed64(b)
			} else {
				return false
			}
			if l < 0 {
				return false
			}
			val, b = wireValue{field: num, bits: v}, b[l:]
		case (num >= 2 && num <= 7 || num == 10 || num == 11 || num == 14) && typ == protowire.VarintType:
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return false
			}
			switch num {
			case 2:
				m.Alias, m.HasAlias = v, true
			case 3:
				m.Timestamp, m.HasTimestamp = v, true
			case 4:
				m.Datatype = uint32(v)
			case 7:
				isNull = protowire.DecodeBool(v)
			case 10, 11, 14:
				val = wireValue{field: num, bits: v}
			} // 5, 6: is_historical, is_transient, not read
			b = b[l:]
		default:
			return false
		}
	}
	if !utf8.ValidString(m.Name) {
		return false
	}
	var err error
	if m.Value, err = wireMetricValue(val, isNull, pb.DataType(m.Datatype)); err != nil {
		return false
	}
	if m.Name == "bdSeq" {
		v := m.Value
		if v.Kind != engine.SparkplugNumber || v.Width == 0 {
			return false
		}
		out.BdSeq, out.HasBdSeq = v.Bits, true
		if v.Width == 32 && m.Datatype == uint32(pb.DataType_Int32) {
			out.BdSeq = uint64(int64(int32(v.Bits)))
		}
	}
	out.Metrics = append(out.Metrics, m)
	return true
}

// wireMetricValue is metricValue on a value read from the wire.
func wireMetricValue(v wireValue, isNull bool, dt pb.DataType) (engine.SparkplugValue, error) {
	if isNull || v.field == 0 {
		return engine.SparkplugValue{Kind: engine.SparkplugNull}, nil
	}
	switch v.field {
	case 10:
		return intValue(uint64(uint32(v.bits)), 32, dt)
	case 11:
		return intValue(v.bits, 64, dt)
	case 12:
		return floatValue(float64(math.Float32frombits(uint32(v.bits))), 32, dt)
	case 13:
		return floatValue(math.Float64frombits(v.bits), 64, dt)
	case 14:
		return boolValue(protowire.DecodeBool(v.bits), dt)
	case 15:
		return stringValue(string(v.bytes), dt)
	}
	return unsupported(typeName(dt, "Bytes"), string(v.bytes)), nil
}
