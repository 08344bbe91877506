package file_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"testing"

	"github.com/buger/jsonparser"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source/file"
)

// FuzzParseMatchesReference holds Parse, which validates a capture line and
// reads its members in one pass, to the two-pass reading it replaced: the
// same message, the same reason for every line that cannot be read.
func FuzzParseMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{"topic":"a/b","payload":{"x":1}}`,
		`{"topic":"a/b","payload":"text","dup":true}`,
		`{"topic":"a/b","payload_b64":"eyJ4IjoxfQ=="}`,
		`{"topic":"a/b","payload":{"x":1},"payload_b64":"eA=="}`,
		`{"topic":"a/b","topic":"c","payload":1}`,
		`{"t\u006fpic":"a/b","payload":[1,2]}`,
		`{"topic":"a\/b","payload":null,"dup":"yes"}`,
		`{"topic":7,"payload":{}}`,
		`{"topic":"","payload":{}}`,
		`{"\ud800":1,"topic":"a","payload":{}}`,
		`{"topic":"a","payload":{"x":1}`,
		`{"topic":"a","payload":{"x":1}} x`,
		`{"payload_b64":7,"topic":"a","dup":1}`,
		`{"topic":"a","payload_b64":"%%%"}`,
		`["topic"]`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, want := file.Parse(line, 3, "f"), parseReference(line, 3, "f")
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Parse(%q)\n got %+v\nwant %+v", line, got, want)
		}
	})
}

// parseReference is Parse as it was before it validated and read the line in one pass:
// ValidJSON, then jsonparser.ObjectEach. FuzzParseMatchesReference holds Parse to it.
func parseReference(raw []byte, lineNo int64, name string) engine.Message {
	invalid := func(format string, a ...any) engine.Message {
		return engine.Message{Payload: append([]byte(nil), raw...), Broker: name,
			Invalid: fmt.Sprintf("capture line %d: ", lineNo) + fmt.Sprintf(format, a...)}
	}
	if len(raw) == 0 || raw[0] != '{' {
		return invalid("not a JSON object")
	}
	if !engine.ValidJSON(raw) {
		var v json.RawMessage
		var syn *json.SyntaxError
		if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&v); errors.Is(err, io.ErrUnexpectedEOF) {
			return invalid("not valid JSON: the object is cut short after %d bytes", len(raw))
		} else if err := json.Unmarshal(raw, &v); errors.As(err, &syn) {
			return invalid("not valid JSON at byte %d of %d: %v", syn.Offset, len(raw), err)
		}
		return invalid("not a JSON object")
	}
	var (
		topic, b64   []byte
		payload      []byte
		hasB64, hasP bool
		dup          bool
		bad          string
	)
	members := [...]string{"topic", "payload", "payload_b64", "dup"}
	var seen [len(members)]bool
	perr := jsonparser.ObjectEach(raw, func(key, v []byte, vt jsonparser.ValueType, _ int) error {
		i := slices.Index(members[:], string(key))
		switch {
		case i < 0:
			return nil // other members are ignored
		case seen[i]:
			bad = members[i] + " appears more than once"
		case i == 0 && vt == jsonparser.String:
			topic = v
		case i == 0:
			bad = "topic is not a string"
		case i == 1:
			payload, hasP = v, true
			if vt == jsonparser.String { // v is the literal's escaped content: put its quotes back
				payload = append(append([]byte{'"'}, v...), '"')
			}
		case i == 2 && vt == jsonparser.String:
			b64, hasB64 = v, true
		case i == 2:
			bad = "payload_b64 is not a string"
		case i == 3 && vt == jsonparser.Boolean:
			dup = string(v) == "true"
		case i == 3:
			bad = "dup is not a boolean"
		}
		seen[i] = true
		return nil
	})
	if perr != nil && bad == "" {
		bad = perr.Error()
	}
	t, err := jsonparser.ParseString(topic)
	switch {
	case bad != "":
		return invalid("%s", bad)
	case err != nil || t == "":
		return invalid("no topic")
	case hasP && hasB64:
		return invalid("both payload and payload_b64")
	case !hasP && !hasB64:
		return invalid("no payload or payload_b64")
	}
	m := engine.Message{Topic: t, Dup: dup, Broker: name}
	if hasB64 {
		s, err := jsonparser.ParseString(b64)
		if err == nil {
			m.Payload, err = base64.StdEncoding.DecodeString(s)
		}
		if err != nil {
			return invalid("payload_b64: %v", err)
		}
		return m
	}
	m.Payload = append([]byte(nil), payload...)
	return m
}

// BenchmarkParse compares the one-pass Parse with the two-pass reading on a
// bench capture line.
func BenchmarkParse(b *testing.B) {
	line := []byte(`{"topic":"incidents/county-fire/mdt-007","payload":{"agency":"county-fire","source_id":"mdt-007",` +
		`"boot_id":1,"sequence":4242,"incident_id":"INC-0071","unit_id":"E7","unit_status":"enroute","casualty_delta":1,` +
		`"lat":38.8977,"lon":-77.0365,"note":"structure fire, 2nd alarm"}}`)
	b.Run("one pass", func(b *testing.B) {
		for b.Loop() {
			file.Parse(line, 1, "bench")
		}
	})
	b.Run("two passes", func(b *testing.B) {
		for b.Loop() {
			parseReference(line, 1, "bench")
		}
	})
}
