package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// TestPayloadContentIsCanonical: two payloads have the same canonical
// content exactly when encoding/json reads the same value from them
// (numbers compared as exact decimals).
func TestPayloadContentIsCanonical(t *testing.T) {
	payloads := []string{
		`{"a":1,"b":"x"}`,
		` { "b" : "x" , "a" : 1 } `,
		`{"a":1.0,"b":"x"}`,
		`{"a":1e0,"b":"\u0078"}`,
		`{"a":1,"b":"x","c":null}`,
		`{"a":1,"b":"y"}`,
		`{"a":-0,"b":"x"}`,
		`{"a":0,"b":"x"}`,
		`{"a":[1,2,{"z":true,"y":false}],"b":{}}`,
		`{"b":{},"a":[1,2,{"y":false,"z":true}]}`,
		`{"a":[2,1,{"z":true,"y":false}],"b":{}}`,
		`{"a":[1,2,{"z":true,"y":false}],"b":[]}`,
		`{"é":"\u00e9","\t":"\\"}`,
		`{"\u00e9":"é","\u0009":"\u005c"}`,
		`{"a":"1"}`,
		`{"a":1}`,
		`{"a":12345678901234567890.123456789}`,
		`{"a":12345678901234567890.1234567890}`,
		`{"a":12345678901234567890.12345679}`,
		`[{"a":1},{"b":2}]`,
		`[{"b":2},{"a":1}]`,
		`{"":""}`,
		`{}`,
	}
	canon := func(p string) []byte { return appendContent(nil, []byte(p)) }
	reference := func(p string) any {
		var v any
		dec := json.NewDecoder(bytes.NewReader([]byte(p)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return normalize(t, v)
	}
	for i, p := range payloads {
		for _, q := range payloads[i:] {
			same := bytes.Equal(canon(p), canon(q))
			if want := reflect.DeepEqual(reference(p), reference(q)); same != want {
				t.Errorf("%s and %s: canonical content equal %v, want %v", p, q, same, want)
			}
		}
	}
}

// number is a JSON number in a reference value, apart from strings.
type number string

// normalize writes the numbers of v as canonicalNumber does.
func normalize(t *testing.T, v any) any {
	switch v := v.(type) {
	case json.Number:
		text, _, err := canonicalNumber(string(v))
		if err != nil {
			t.Fatal(err)
		}
		return number(text)
	case []any:
		for i := range v {
			v[i] = normalize(t, v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = normalize(t, v[k])
		}
	}
	return v
}

func BenchmarkPayloadContent(b *testing.B) {
	p := []byte(`{"agency":"county-fire","source_id":"mdt-107583","boot_id":1,"sequence":1234,"incident_id":"INC-0457","casualty_delta":1,"status":"en route","unit":"E12","lat":45.123456,"lon":-122.654321,"note":"crew of four"}`)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendContent(buf[:0], p)
	}
}
