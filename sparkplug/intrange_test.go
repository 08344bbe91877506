package sparkplug_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// TestAnIntegerOutsideItsDatatypesRangeIsRefused: Sparkplug B carries the
// integer datatypes in int_value (uint32) or long_value (uint64). A signed
// one comes two's complement in its own width (Eclipse Tahu's Python: -1
// as Int8 is 255) or in the field's (Tahu's Java: 4294967295), and both
// are read; a value that is neither, such as 1000 as an Int8 or as a
// UInt8, is no value of its datatype: an Int8 of 1000 was read as -24,
// a UInt8 of 1000 as 1000. It is refused, and the message held as
// malformed.
func TestAnIntegerOutsideItsDatatypesRangeIsRefused(t *testing.T) {
	intV := func(v uint32) *pb.Payload_Metric {
		return &pb.Payload_Metric{Value: &pb.Payload_Metric_IntValue{IntValue: v}}
	}
	longV := func(v uint64) *pb.Payload_Metric {
		return &pb.Payload_Metric{Value: &pb.Payload_Metric_LongValue{LongValue: v}}
	}
	cases := []struct {
		name string
		dt   pb.DataType
		m    *pb.Payload_Metric
		want string // the value's text, or the error's
	}{
		{"an Int8 of -1 in its own width is read", pb.DataType_Int8, intV(0xff), "-1"},
		{"an Int8 of -1 in the field's width is read", pb.DataType_Int8, intV(0xffffffff), "-1"},
		{"an Int8 of 127 is read", pb.DataType_Int8, intV(127), "127"},
		{"an Int8 of 1000 is refused", pb.DataType_Int8, intV(1000), "datatype Int8 but the integer 1000, out of its range"},
		{"an Int8 of -1000 is refused", pb.DataType_Int8, intV(0xfffffc18), "datatype Int8 but the integer 4294966296, out of its range"},
		{"an Int16 of -32768 in the field's width is read", pb.DataType_Int16, intV(0xffff8000), "-32768"},
		{"an Int16 of 70000 is refused", pb.DataType_Int16, intV(70000), "out of its range"},
		{"an Int32 of -1 in a long value is read", pb.DataType_Int32, longV(0xffffffffffffffff), "-1"},
		{"an Int32 of 2^40 is refused", pb.DataType_Int32, longV(1 << 40), "datatype Int32 but the integer 1099511627776, out of its range"},
		{"a UInt8 of 255 is read", pb.DataType_UInt8, intV(255), "255"},
		{"a UInt8 of 1004 is refused", pb.DataType_UInt8, intV(1004), "datatype UInt8 but the integer 1004, out of its range"},
		{"a UInt16 of 70000 is refused", pb.DataType_UInt16, intV(70000), "out of its range"},
		{"a UInt32 of 2^32 in a long value is refused", pb.DataType_UInt32, longV(1 << 32), "out of its range"},
		{"a UInt32 of 2^32-1 in a long value is read", pb.DataType_UInt32, longV(1<<32 - 1), "4294967295"},
		{"an Int64 of -1 is read", pb.DataType_Int64, longV(0xffffffffffffffff), "-1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.m.Name, c.m.Datatype = proto.String("v"), proto.Uint32(uint32(c.dt))
			b, err := proto.Marshal(&pb.Payload{Timestamp: proto.Uint64(1), Seq: proto.Uint64(1), Metrics: []*pb.Payload_Metric{c.m}})
			if err != nil {
				t.Fatal(err)
			}
			p, err := sparkplug.Decoder{}.DecodeSparkplug(b)
			switch {
			case err != nil && strings.Contains(err.Error(), c.want) && errors.Is(err, sparkplug.ErrValue):
			case err != nil:
				t.Fatalf("refused: %v; want %q", err, c.want)
			case p.Metrics[0].Value.Text != c.want:
				t.Fatalf("read as %q; want %q", p.Metrics[0].Value.Text, c.want)
			}
		})
	}
}
