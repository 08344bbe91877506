package postgres

import (
	"encoding/binary"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// byteaArray is a bytea[] argument that a member's connection encodes in
// one pass (registerByteaArray): the names and states of a batch's rows.
// pgx encodes a [][]byte by reflection, boxing each element, into a
// buffer that starts small and doubles: for a batch of 1,000 messages
// that is thousands of allocations and about a megabyte copied again and
// again, a batch.
type byteaArray [][]byte

// registerByteaArray makes c encode byteaArray arguments itself; every
// other bytea[] value, and every bytea[] result, goes through pgx's codec
// as before.
func registerByteaArray(c *pgx.Conn) {
	m := c.TypeMap()
	t, ok := m.TypeForOID(pgtype.ByteaArrayOID)
	if !ok {
		return
	}
	m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: byteaArrayCodec{t.Codec}})
}

// byteaArrayCodec is pgx's bytea[] codec, but for byteaArray arguments.
type byteaArrayCodec struct{ pgtype.Codec }

func (c byteaArrayCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(byteaArray); ok && format == pgtype.BinaryFormatCode {
		return encodeByteaArray{}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// encodeByteaArray writes a byteaArray in PostgreSQL's binary array
// format, as pgx would: one dimension from 1, each element its length and
// its bytes, a nil one NULL; the buffer grown once to the size of the
// whole.
type encodeByteaArray struct{}

func (encodeByteaArray) Encode(value any, buf []byte) ([]byte, error) {
	a := value.(byteaArray)
	n, nulls := 20, uint32(0)
	for _, b := range a {
		n += 4 + len(b)
		if b == nil {
			nulls = 1
		}
	}
	buf = slices.Grow(buf, n)
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, nulls)
	buf = binary.BigEndian.AppendUint32(buf, pgtype.ByteaOID)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(a)))
	buf = binary.BigEndian.AppendUint32(buf, 1) // lower bound
	for _, b := range a {
		if b == nil {
			buf = binary.BigEndian.AppendUint32(buf, 0xffffffff) // -1: NULL
			continue
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
		buf = append(buf, b...)
	}
	return buf, nil
}
