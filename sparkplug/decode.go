package sparkplug

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// Decoder decodes Sparkplug B payloads into plain terms, as RouteKind's
// routes read them. The zero value is ready; it is safe for concurrent
// use.
type Decoder struct{}

// canonical marshals unsupported values for the digest: the same value
// always gives the same bytes.
var canonical = proto.MarshalOptions{Deterministic: true}

// DecodeSparkplug decodes one payload: the common ones straight from the
// wire (decodeWire), the rest, and every one it refuses, with the
// generated types.
func (Decoder) DecodeSparkplug(b []byte) (Payload, error) { return decodePayload(b) }

func decodePayload(b []byte) (Payload, error) {
	if p, ok := decodeWire(b); ok {
		return p, nil
	}
	return decodeMessage(b)
}

// decodeMessage decodes a payload with the generated types.
func decodeMessage(b []byte) (Payload, error) {
	var p pb.Payload
	if err := proto.Unmarshal(b, &p); err != nil {
		return Payload{}, fmt.Errorf("%w: %v", ErrPayload, err)
	}
	out := Payload{Timestamp: p.GetTimestamp(), HasTimestamp: p.Timestamp != nil,
		Seq: p.GetSeq(), HasSeq: p.Seq != nil, Metrics: make([]PayloadMetric, 0, len(p.Metrics))}
	for i, m := range p.Metrics {
		if !utf8.ValidString(m.GetName()) {
			return Payload{}, fmt.Errorf("%w: metric %d: its name is not valid UTF-8", ErrValue, i)
		}
		v, err := metricValue(m)
		if err != nil {
			return Payload{}, fmt.Errorf("metric %q: %w", metricLabel(m, i), err)
		}
		out.Metrics = append(out.Metrics, PayloadMetric{Name: m.GetName(), Alias: m.GetAlias(), HasAlias: m.Alias != nil,
			Timestamp: m.GetTimestamp(), HasTimestamp: m.Timestamp != nil, Datatype: m.GetDatatype(),
			Historical: m.GetIsHistorical(), Value: v})
		if m.GetName() == "bdSeq" {
			if v.Kind != ValueNumber || v.Width == 0 {
				return Payload{}, fmt.Errorf("%w: the bdSeq metric is not an integer", ErrValue)
			}
			out.BdSeq, out.HasBdSeq = v.Bits, true
			if v.Width == 32 && m.GetDatatype() == uint32(pb.DataType_Int32) {
				out.BdSeq = uint64(int64(int32(v.Bits))) // a negative one is refused as out of range
			}
		}
	}
	return out, nil
}

func metricLabel(m *pb.Payload_Metric, i int) string {
	if m.GetName() != "" {
		return m.GetName()
	}
	if m.Alias != nil {
		return "alias " + strconv.FormatUint(m.GetAlias(), 10)
	}
	return "#" + strconv.Itoa(i)
}

// metricValue reads a metric's value with its datatype, when it has one.
func metricValue(m *pb.Payload_Metric) (MetricValue, error) {
	dt := pb.DataType(m.GetDatatype())
	if m.GetIsNull() || m.Value == nil {
		return MetricValue{Kind: ValueNull}, nil
	}
	switch v := m.Value.(type) {
	case *pb.Payload_Metric_IntValue:
		return intValue(uint64(v.IntValue), 32, dt)
	case *pb.Payload_Metric_LongValue:
		return intValue(v.LongValue, 64, dt)
	case *pb.Payload_Metric_FloatValue:
		return floatValue(float64(v.FloatValue), 32, dt)
	case *pb.Payload_Metric_DoubleValue:
		return floatValue(v.DoubleValue, 64, dt)
	case *pb.Payload_Metric_BooleanValue:
		return boolValue(v.BooleanValue, dt)
	case *pb.Payload_Metric_StringValue:
		return stringValue(v.StringValue, dt)
	case *pb.Payload_Metric_BytesValue:
		return unsupported(typeName(dt, "Bytes"), string(v.BytesValue)), nil
	case *pb.Payload_Metric_DatasetValue:
		b, err := canonical.Marshal(v.DatasetValue)
		return unsupported("DataSet", string(b)), err
	case *pb.Payload_Metric_TemplateValue:
		b, err := canonical.Marshal(v.TemplateValue)
		return unsupported("Template", string(b)), err
	case *pb.Payload_Metric_ExtensionValue:
		b, err := canonical.Marshal(v.ExtensionValue)
		return unsupported("extension", string(b)), err
	}
	return MetricValue{}, fmt.Errorf("%w: unknown value field", ErrValue)
}

func boolValue(b bool, dt pb.DataType) (MetricValue, error) {
	if err := wants(dt, "a boolean", pb.DataType_Boolean); err != nil {
		return MetricValue{}, err
	}
	return MetricValue{Kind: ValueBool, Text: strconv.FormatBool(b)}, nil
}

func stringValue(s string, dt pb.DataType) (MetricValue, error) {
	if err := wants(dt, "a string", pb.DataType_String, pb.DataType_Text, pb.DataType_UUID); err != nil {
		return MetricValue{}, err
	}
	if !utf8.ValidString(s) {
		return MetricValue{}, fmt.Errorf("%w: the string is not valid UTF-8", ErrValue)
	}
	return MetricValue{Kind: ValueString, Text: s}, nil
}

func typeName(dt pb.DataType, fallback string) string {
	if dt == pb.DataType_Unknown {
		return fallback
	}
	return dt.String()
}

func unsupported(kind, content string) MetricValue {
	return MetricValue{Kind: ValueUnsupported, Text: kind, Content: content}
}

// wants refuses a value whose field does not fit the metric's datatype
// (no datatype: any fits).
func wants(dt pb.DataType, what string, ok ...pb.DataType) error {
	if dt == pb.DataType_Unknown {
		return nil
	}
	for _, t := range ok {
		if dt == t {
			return nil
		}
	}
	return fmt.Errorf("%w: datatype %s but %s value", ErrValue, dt, what)
}

// intValue reads int_value (width 32) or long_value (64): signed datatypes
// as two's complement of their width, the rest unsigned.
func intValue(bits uint64, width uint8, dt pb.DataType) (MetricValue, error) {
	var buf [24]byte
	text, err := appendInt(buf[:0], bits, width, dt)
	return MetricValue{Kind: ValueNumber, Bits: bits, Width: width, Text: string(text)}, err
}

// appendInt appends an integer's decimal text, read with dt, to dst:
// bits is the value of an int_value (width 32) or long_value (64) field.
// A value out of dt's range is refused (inRange), never wrapped into it.
func appendInt(dst []byte, bits uint64, width uint8, dt pb.DataType) ([]byte, error) {
	if !inRange(bits, width, dt) {
		return dst, fmt.Errorf("%w: datatype %s but the integer %d, out of its range", ErrValue, dt, bits)
	}
	switch dt {
	case pb.DataType_Int8:
		return strconv.AppendInt(dst, int64(int8(bits)), 10), nil
	case pb.DataType_Int16:
		return strconv.AppendInt(dst, int64(int16(bits)), 10), nil
	case pb.DataType_Int32:
		return strconv.AppendInt(dst, int64(int32(bits)), 10), nil
	case pb.DataType_Int64:
		return strconv.AppendInt(dst, int64(bits), 10), nil
	case pb.DataType_Unknown, pb.DataType_UInt8, pb.DataType_UInt16, pb.DataType_UInt32, pb.DataType_UInt64, pb.DataType_DateTime:
		return strconv.AppendUint(dst, bits, 10), nil
	}
	return dst, fmt.Errorf("%w: datatype %s but an integer value", ErrValue, dt)
}

// floatValue writes a float in its shortest round-trip form; NaN and the
// infinities have no decimal: unsupported as field values.
func floatValue(f float64, bits int, dt pb.DataType) (MetricValue, error) {
	if err := wants(dt, "a floating-point", pb.DataType_Float, pb.DataType_Double); err != nil {
		return MetricValue{}, err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return unsupported("non-finite float", strconv.FormatFloat(f, 'g', -1, bits)), nil
	}
	return MetricValue{Kind: ValueNumber, Text: strconv.FormatFloat(f, 'g', -1, bits)}, nil
}

// inRange says whether bits, a field of width bits, is a value of dt. An
// unsigned datatype's value fits its size. A signed one's comes two's
// complement in its own size (Eclipse Tahu's Python sends an Int8 of -1
// as 255) or in the field's width (Tahu's Java: 4294967295), and either
// is read; any other value is neither.
func inRange(bits uint64, width uint8, dt pb.DataType) bool {
	var size uint
	switch dt {
	case pb.DataType_Int8, pb.DataType_UInt8:
		size = 8
	case pb.DataType_Int16, pb.DataType_UInt16:
		size = 16
	case pb.DataType_Int32, pb.DataType_UInt32:
		size = 32
	default:
		return true
	}
	if bits < 1<<size {
		return true
	}
	signed := dt == pb.DataType_Int8 || dt == pb.DataType_Int16 || dt == pb.DataType_Int32
	// Sign-extended to the field's width: its top width-size+1 bits set.
	top := uint64(math.MaxUint64) >> (64 - uint(width)) &^ (1<<(size-1) - 1)
	return signed && bits&top == top && bits>>width == 0
}
