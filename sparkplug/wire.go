package sparkplug

import (
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

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
func decodeWire(b []byte) (Payload, bool) {
	n, ok := countMetrics(b)
	if !ok {
		return Payload{}, false
	}
	out := Payload{Metrics: make([]PayloadMetric, 0, n)}
	var (
		textBuf [512]byte
		spanBuf [16]wireSpans
	)
	t := wireText{buf: textBuf[:0], spans: spanBuf[:0]}
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return Payload{}, false
		}
		b = b[l:]
		switch {
		case (num == 1 || num == 3) && typ == protowire.VarintType:
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return Payload{}, false
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
				return Payload{}, false
			}
			if t, ok = wireMetric(m, &out, t); !ok {
				return Payload{}, false
			}
			b = b[l:]
		case (num == 4 || num == 5) && typ == protowire.BytesType: // uuid, body: not read
			_, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return Payload{}, false
			}
			b = b[l:]
		default:
			return Payload{}, false
		}
	}
	t.place(out.Metrics)
	return out, true
}

// wireText gathers the texts of a payload's metrics (names, strings and
// numbers' decimals) in one buffer, made one string at the end: one
// allocation a payload instead of one a metric.
type wireText struct {
	buf   []byte
	spans []wireSpans // one per metric, in order
}

// wireSpans are where a metric's name and value text are in wireText.buf.
type wireSpans struct{ name, text [2]int }

// place sets the metrics' names and value texts from the buffer.
func (t *wireText) place(ms []PayloadMetric) {
	s := string(t.buf)
	for i, sp := range t.spans {
		if sp.name[1] > sp.name[0] {
			ms[i].Name = s[sp.name[0]:sp.name[1]]
		}
		if sp.text[1] > sp.text[0] {
			ms[i].Value.Text = s[sp.text[0]:sp.text[1]]
		}
	}
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
// DecodeSparkplug's loop does; its name and value text go to t. (t is
// passed and returned by value, so that its buffers can stay on
// decodeWire's stack.)
// wireFields is one metric's fields as read from the wire.
type wireFields struct {
	m      PayloadMetric
	name   []byte
	val    wireValue
	isNull bool
}

// readWireFields reads one metric's fields; false for anything but the
// common ones, well formed.
func readWireFields(b []byte) (f wireFields, ok bool) {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return f, false
		}
		b = b[l:]
		switch {
		case num == 1 || num == 15 || num == 16:
			if typ != protowire.BytesType {
				return f, false
			}
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return f, false
			}
			if num == 1 {
				f.name = v
			} else {
				f.val = wireValue{field: num, bytes: v}
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
				return f, false
			}
			if l < 0 {
				return f, false
			}
			f.val, b = wireValue{field: num, bits: v}, b[l:]
		case (num >= 2 && num <= 7 || num == 10 || num == 11 || num == 14) && typ == protowire.VarintType:
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return f, false
			}
			switch num {
			case 2:
				f.m.Alias, f.m.HasAlias = v, true
			case 3:
				f.m.Timestamp, f.m.HasTimestamp = v, true
			case 4:
				f.m.Datatype = uint32(v)
			case 5:
				f.m.Historical = protowire.DecodeBool(v)
			case 7:
				f.isNull = protowire.DecodeBool(v)
			case 10, 11, 14:
				f.val = wireValue{field: num, bits: v}
			} // 6: is_transient, not read
			b = b[l:]
		default:
			return f, false
		}
	}
	return f, true
}

func wireMetric(b []byte, out *Payload, t wireText) (wireText, bool) {
	f, ok := readWireFields(b)
	if !ok {
		return t, false
	}
	m, name, val, isNull := f.m, f.name, f.val, f.isNull
	if !utf8.Valid(name) {
		return t, false
	}
	var (
		sp  wireSpans
		err error
	)
	sp.name[0] = len(t.buf)
	t.buf = append(t.buf, name...)
	sp.name[1] = len(t.buf)
	if m.Value, t.buf, err = wireMetricValue(t.buf, val, isNull, pb.DataType(m.Datatype)); err != nil {
		return t, false
	}
	sp.text = [2]int{sp.name[1], len(t.buf)}
	t.spans = append(t.spans, sp)
	if string(name) == "bdSeq" {
		v := m.Value
		if v.Kind != ValueNumber || v.Width == 0 {
			return t, false
		}
		out.BdSeq, out.HasBdSeq = v.Bits, true
		if v.Width == 32 && m.Datatype == uint32(pb.DataType_Int32) {
			out.BdSeq = uint64(int64(int32(v.Bits)))
		}
	}
	out.Metrics = append(out.Metrics, m)
	return t, true
}

// wireMetricValue is metricValue on a value read from the wire, but the
// text of a number or a string is appended to text, not set.
func wireMetricValue(text []byte, v wireValue, isNull bool, dt pb.DataType) (MetricValue, []byte, error) {
	if isNull || v.field == 0 {
		return MetricValue{Kind: ValueNull}, text, nil
	}
	var err error
	switch v.field {
	case 10, 11:
		val := MetricValue{Kind: ValueNumber, Bits: v.bits, Width: 64}
		if v.field == 10 {
			val.Bits, val.Width = uint64(uint32(v.bits)), 32
		}
		text, err = appendInt(text, val.Bits, val.Width, dt)
		return val, text, err
	case 12, 13:
		f, bits := math.Float64frombits(v.bits), 64
		if v.field == 12 {
			f, bits = float64(math.Float32frombits(uint32(v.bits))), 32
		}
		if err := wants(dt, "a floating-point", pb.DataType_Float, pb.DataType_Double); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			val, err := floatValue(f, bits, dt)
			return val, text, err
		}
		return MetricValue{Kind: ValueNumber}, strconv.AppendFloat(text, f, 'g', -1, bits), nil
	case 14:
		val, err := boolValue(protowire.DecodeBool(v.bits), dt)
		return val, text, err
	case 15:
		if err := wants(dt, "a string", pb.DataType_String, pb.DataType_Text, pb.DataType_UUID); err != nil || !utf8.Valid(v.bytes) {
			val, err := stringValue(string(v.bytes), dt)
			return val, text, err
		}
		return MetricValue{Kind: ValueString}, append(text, v.bytes...), nil
	}
	return unsupported(typeName(dt, "Bytes"), string(v.bytes)), text, nil
}
