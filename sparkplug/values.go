package sparkplug

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/replayguard/replayguard/engine"
)

// Sparkplug datatypes the engine reads again from a birth.
const (
	spInt8  = 1
	spInt16 = 2
	spInt32 = 3
	spInt64 = 4
)

// engineValue turns a decoded value into the engine's; reread applies
// the birth's signed integer type to an integer whose payload left its
// datatype out.
func engineValue(v MetricValue, reread bool, typ uint32) (engine.Value, bool) {
	switch v.Kind {
	case ValueNumber:
		text := v.Text
		if reread && v.Width > 0 && typ >= spInt8 && typ <= spInt64 {
			text = strconv.FormatInt(signed(v.Bits, typ), 10)
		}
		n, err := engine.NumberValue(text)
		return n, err == nil
	case ValueString:
		return engine.StringValue(v.Text), true
	case ValueBool:
		return engine.BoolValue(v.Text == "true"), true
	case ValueNull:
		return engine.NullValue(), true
	}
	return engine.OpaqueValue(v.Text), true
}

func signed(bits uint64, typ uint32) int64 {
	switch typ {
	case spInt8:
		return int64(int8(bits))
	case spInt16:
		return int64(int16(bits))
	case spInt32:
		return int64(int32(bits))
	}
	return int64(bits)
}

// digest covers the resolved content: type, device, timestamp, seq, and
// each metric's resolved name, datatype, timestamp and value, in order,
// with its is_historical flag (a set reads a historical value otherwise):
// a flagged metric's value code has its top bit set, so an unflagged one's
// digest is what it was before the flag was read.
func (sp *spMessage) contentDigest() engine.Hash {
	h := sha256.New()
	var buf [1024]byte // written to h whenever the next metric might not fit
	b := append(buf[:0], byte(sp.typ))
	b = appendField(b, sp.device)
	b = binary.BigEndian.AppendUint64(b, sp.p.Timestamp)
	b = binary.BigEndian.AppendUint64(b, uint64(sp.seqRaw))
	for i, mt := range sp.p.Metrics {
		r := &sp.metrics[i]
		if len(b)+3*binary.MaxVarintLen64+13+len(r.name)+len(r.val.Text())+len(mt.Value.Content) > cap(b) {
			h.Write(b)
			b = b[:0]
		}
		b = appendField(b, r.name)
		b = binary.BigEndian.AppendUint32(b, r.typ)
		b = binary.BigEndian.AppendUint64(b, mt.Timestamp)
		code := r.val.Code()
		if r.hist {
			code |= historicalCode
		}
		b = append(b, code)
		b = appendField(b, r.val.Text())
		b = appendField(b, mt.Value.Content)
	}
	h.Write(b)
	var out engine.Hash
	h.Sum(out[:0])
	return out
}

// historicalCode marks a historical metric's value code in the digest.
const historicalCode = 0x80

// pathValue is the value of one path of the route: the payload's
// timestamp or seq, or what it reads of a metric (metricField): of its last
// occurrence in the payload, and when the payload carries it more than once
// (an edge forwarding what it stored during an outage) or flagged
// historical, of each of them in order, with which are historical
// (engine.Placement.SetReadings). A metric's value, timestamp and flag
// are read alike, so a sql effect run once for each of a metric's values
// takes each with its own timestamp and flag.
func (sp *spMessage) pathValue(segs []string) (engine.Value, []engine.Reading) {
	if len(segs) == 1 {
		switch segs[0] {
		case "timestamp":
			if sp.p.HasTimestamp {
				n, _ := engine.NumberValue(strconv.FormatUint(sp.p.Timestamp, 10))
				return n, nil
			}
		case "seq":
			if sp.seqRaw >= 0 {
				n, _ := engine.NumberValue(strconv.FormatInt(sp.seqRaw, 10))
				return n, nil
			}
		}
		return engine.Value{}, nil
	}
	n, last := 0, -1
	for i := range sp.metrics {
		if sp.metrics[i].name == segs[1] {
			n, last = n+1, i
		}
	}
	switch {
	case n == 0:
		return engine.Value{}, nil
	case n == 1 && !sp.metrics[last].hist:
		return sp.metricField(segs[0], last), nil
	}
	rs := make([]engine.Reading, 0, n) // a store-and-forward payload's: rare
	for i := range sp.metrics {
		if r := &sp.metrics[i]; r.name == segs[1] {
			rs = append(rs, engine.Reading{Value: sp.metricField(segs[0], i), Historical: r.hist})
		}
	}
	return sp.metricField(segs[0], last), rs
}

// metricField is what a path whose first segment is root (metricPaths)
// reads of metric i: its value, its own timestamp (absent when it has
// none), or its is_historical flag.
func (sp *spMessage) metricField(root string, i int) engine.Value {
	switch root {
	case "metrics":
		return sp.metrics[i].val
	case "timestamp":
		if mt := &sp.p.Metrics[i]; mt.HasTimestamp {
			n, _ := engine.NumberValue(strconv.FormatUint(mt.Timestamp, 10))
			return n
		}
		return engine.Value{}
	}
	return engine.BoolValue(sp.metrics[i].hist)
}

// appendField appends s, length-prefixed, as the engine's digests do.
func appendField(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// offlineWhy says which NDEATH took the edge offline while b was its
// current birth: b's session's own, or a later session's (the Will of a
// connection that died before its NBIRTH), recorded in st.Deaths.
func offlineWhy(st *engine.SparkplugState, b *engine.SparkplugBirth) string {
	if b.Ended {
		return fmt.Sprintf("its session %s's NDEATH came", b.Epoch)
	}
	for _, d := range st.Deaths { // newest first
		if d.BdSeq > b.BdSeq {
			return fmt.Sprintf("an NDEATH of its later session %d came, whose NBIRTH is not decided", d.BdSeq)
		}
	}
	return fmt.Sprintf("an NDEATH ended its session %s", b.Epoch)
}

// whoseHighest names the session whose highest sequence offlineWhy's
// message would come after.
func whoseHighest(b *engine.SparkplugBirth) string {
	if b.Ended {
		return "that session's"
	}
	return "session " + b.Epoch + "'s"
}
