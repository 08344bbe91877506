package postgres

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// A byteaArray is sent as the bytes pgx sends for the same [][]byte.
func TestByteaArrayEncodesAsPgx(t *testing.T) {
	m := pgtype.NewMap()
	for _, a := range [][][]byte{
		{},
		{[]byte("s1")},
		{[]byte("a"), {}, []byte("a longer name, and then some"), nil, bytes.Repeat([]byte{0xff}, 300)},
	} {
		want, err := m.Encode(pgtype.ByteaArrayOID, pgtype.BinaryFormatCode, a, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeByteaArray{}.Encode(byteaArray(a), []byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("%q: encoded\n%x\nwant\n%x", a, got[len("prefix"):], want)
		}
	}
}
