package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

func fuzzEngine(t testing.TB) *Engine {
	t.Helper()
	e := &Engine{maxPayload: 4096}
	for _, r := range []Route{
		{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "source_id"}, Sequence: "sequence", Epoch: "boot_id",
			Effects: []EffectSpec{{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "casualty_delta"}},
				{Entity: "unit/{unit.id}", Set: map[string]string{"status": "unit.status"}}}},
		{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
			Effects: []EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}},
	} {
		c, err := compileRoute(r, map[string]RouteKind{KindJSON: jsonKind{}}, false)
		if err != nil {
			t.Fatal(err)
		}
		e.routes = append(e.routes, c)
	}
	return e
}

// FuzzDecode checks that decoding never panics, and that a decoded payload
// re-serialised by encoding/json (other key order, other escapes, numbers
// kept as written) has the same key and digest.
func FuzzDecode(f *testing.F) {
	f.Add("incidents/fd", []byte(`{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1,"incident_id":7,"casualty_delta":3}`))
	f.Add("incidents/fd", []byte(`{"agency":"fd","source_id":"e\u0031","boot_id":"b","sequence":9223372036854775807,"unit":{"id":"E7","status":"assigned"}}`))
	f.Add("plant/m3/energy", []byte(`{"msgId":"meter-3-000042","kwh":0.25}`))
	f.Add("plant/m3/energy", []byte(`{"msgId":42,"kwh":1e-3}`))
	f.Add("incidents/fd", []byte(`{"agency":"fd","source_id":"e1","sequence":-1}`))
	f.Add("x", []byte(`not json`))
	e := fuzzEngine(f)
	f.Fuzz(func(t *testing.T, topic string, payload []byte) {
		d, err := e.decode(&Message{Topic: topic, Payload: payload})
		if err != nil {
			if _, ok := err.(*decodeError); !ok {
				t.Fatalf("decode error of type %T: %v", err, err)
			}
			return
		}
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("decode accepted what encoding/json refuses: %v", err)
		}
		again, err := json.Marshal(v)
		if err != nil {
			return
		}
		d2, err := e.decode(&Message{Topic: topic, Payload: again})
		if err != nil {
			t.Fatalf("re-serialised payload %s is malformed: %v", again, err)
		}
		if d.key != d2.key || d.digest != d2.digest {
			t.Fatalf("re-serialised payload %s changed key or digest", again)
		}
	})
}

// FuzzKeyIsInjective checks that different (route, source, epoch, sequence)
// or (route, source, id) tuples never share a key.
func FuzzKeyIsInjective(f *testing.F) {
	f.Add("r", "a|b", "c", "a", "b|c", "e", int64(1), "x")
	f.Add("r", "a", "", "", "a", "", int64(0), "")
	f.Fuzz(func(t *testing.T, route, s1, s2, s3, s4, epoch string, seq int64, id string) {
		if seq < 0 {
			seq = -seq
		}
		a, b := []string{s1, s2}, []string{s3, s4}
		same := s1 == s3 && s2 == s4
		if (SequencedKey(route, a, epoch, seq) == SequencedKey(route, b, epoch, seq)) != same {
			t.Fatalf("sequenced keys of %q and %q: equal=%v", a, b, !same)
		}
		if (IDKey(route, a, id) == IDKey(route, b, id)) != same {
			t.Fatalf("id keys of %q and %q: equal=%v", a, b, !same)
		}
		if SequencedKey(route, a, epoch, seq) == IDKey(route, a, id) {
			t.Fatal("a sequenced and an id key collide")
		}
		if len(a) > 0 && SequencedKey(route, []string{s1 + s2}, epoch, seq) == SequencedKey(route, a, epoch, seq) && s2 != "" {
			t.Fatal("joined source parts collide with split ones")
		}
	})
}

// FuzzValidJSON holds the scanner to encoding/json's verdict.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,2.5e-3,-0,"x\u00e9\n",true,false,null]}`, `01`, `{"a":}`, ` "x" `, `1.`, `-`, `"\ud800"`, `[1,]`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
		if got, want := ScanMembers(b, func([]byte, bool, []byte) {}), json.Valid(b); got != want {
			t.Fatalf("ScanMembers(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// FuzzCanonicalRecord holds the hand-written record encoding to
// encoding/json's, so an exported record decodes to the same hash.
func FuzzCanonicalRecord(f *testing.F) {
	f.Add(uint64(1), "incidents", "incidents/fd/e1", "fd", "e\u2028<1>&", "", int64(5), true, "tcp://x", uint64(0), "\xff\x01\"\\", "")
	f.Add(uint64(9), "", "", "", "", "7", int64(-1), false, "", uint64(3), "", "")
	f.Add(uint64(4), "meters", "plant/m1/energy", "", "", "", int64(-1), false, "", uint64(2), "bench rig noise", "j.doe <ops&\u2029>")
	f.Add(uint64(2), "meters", "plant/m2/energy", "", "", "", int64(-1), false, "", uint64(0), "", "replayguard-2\u2028")
	f.Fuzz(func(t *testing.T, pos uint64, route, topic, s1, s2, epoch string, seq int64, dup bool, broker string, ref uint64, reason, operator string) {
		r := AuditRecord{Position: pos, Time: time.Unix(0, int64(pos)).UTC(), Route: route, Topic: topic,
			Source: []string{s1, s2}, Epoch: epoch, Outcome: "applied", Reason: reason, Dup: dup, Broker: broker,
			Ref: ref, Operator: operator, Member: operator, Feed: broker, Hash: sha256.Sum256([]byte(reason))}
		if seq%2 == 0 {
			r.Operator = ""
		}
		if pos%2 == 1 { // a connection's first delivery
			r.Connected = time.Unix(int64(ref), int64(pos%1e9)).UTC()
		}
		if seq >= 0 {
			r.Sequence = &seq
			r.Gap = &Range{From: seq, To: seq + 1}
			r.Key, r.Digest = sha256.Sum256([]byte(s1)), sha256.Sum256([]byte(s2))
		}
		if pos%3 != 0 { // an applied record's effects, their values written as project writes them
			var p pending
			f := &field{kind: KindString, str: s2}
			n := &field{kind: KindNumber}
			n.num.SetString(strconv.FormatUint(pos, 10) + ".50")
			r.Effects = []Change{
				{Entity: s1, Field: reason, Op: "set", Value: p.json(vString, s2), After: p.fieldJSON(f), Lost: dup},
				{Entity: topic, Field: "kwh", Op: "add", Value: p.json(vNumber, "0.25"), After: p.fieldJSON(n)},
				{Entity: s1, Field: "ok", Op: "set", Value: p.json(vBool, "true"), After: p.fieldJSON(&field{kind: KindRaw, str: "null"})},
				{Entity: topic, Field: "temp", Op: "set", Value: p.json(vNumber, "18"), After: p.fieldJSON(n), Historical: !dup},
			}
		}
		want, err := json.Marshal(r)
		if err != nil {
			t.Skip()
		}
		if got := appendRecord(nil, &r, false); string(got) != string(want) {
			t.Fatalf("canonical form\n got %s\nwant %s", got, want)
		}
		if got, err := AppendRecordJSON(nil, &r); err != nil || string(got) != string(want) {
			t.Fatalf("AppendRecordJSON\n got %s, %v\nwant %s", got, err, want)
		}
		// The chain's form is the same with the hash field empty, as it was
		// when hashes were text and the field was blanked.
		wantChain := strings.Replace(string(want), `"hash":"`+r.Hash.String()+`"`, `"hash":""`, 1)
		if got := appendRecord(nil, &r, true); string(got) != wantChain {
			t.Fatalf("chain form\n got %s\nwant %s", got, wantChain)
		}
		var back AuditRecord
		if err := json.Unmarshal(want, &back); err != nil || back.Key != r.Key || back.Digest != r.Digest || back.Prev != r.Prev || back.Hash != r.Hash {
			t.Fatalf("hashes do not survive JSON: %v %+v", err, back)
		}
		// Invalid UTF-8 comes back as U+FFFD: the engine's records hold none.
		valid := true
		for _, s := range []string{route, topic, s1, s2, epoch, broker, reason, operator} {
			valid = valid && utf8.ValidString(s)
		}
		// An export a tool escaped otherwise still verifies: "<" written
		// plainly, non-ASCII escaped.
		other := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(want))
		var reescaped AuditRecord
		if err := json.Unmarshal([]byte(other), &reescaped); err != nil {
			t.Fatalf("re-escaped: %v", err)
		}
		for i := range reescaped.Effects {
			if v := reescaped.Effects[i].Value; len(v) > 0 && v[0] == '"' {
				var s string
				json.Unmarshal(v, &s)
				reescaped.Effects[i].Value = asciiJSON(s)
			}
		}
		if h := chainHash(&back); valid && (h != chainHash(&r) || chainHash(&reescaped) != h) {
			t.Fatalf("a record read back from its JSON hashes differently:\n%s\n%s", appendRecord(nil, &back, true), appendRecord(nil, &r, true))
		}
	})
}

// asciiJSON writes s as a JSON string with every non-ASCII character
// escaped, as some encoders do.
func asciiJSON(s string) json.RawMessage {
	b := []byte{'"'}
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			q, _ := json.Marshal(string(r))
			b = append(b, q[1:len(q)-1]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			b = fmt.Appendf(b, `\u%04x\u%04x`, r1, r2)
		default:
			b = fmt.Appendf(b, `\u%04x`, r)
		}
	}
	return append(b, '"')
}
