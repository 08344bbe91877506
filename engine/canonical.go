package engine

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendRecordJSON appends r's JSON, the bytes encoding/json.Marshal writes
// for it (FuzzCanonicalRecord holds them equal), several times faster and
// without reflection: exports and event streams encode every record. Like
// encoding/json it refuses a time that RFC 3339 cannot hold.
func AppendRecordJSON(b []byte, r *AuditRecord) ([]byte, error) {
	var scratch [64]byte
	if _, err := r.Time.AppendText(scratch[:0]); err != nil {
		return b, err
	}
	if _, err := r.Connected.AppendText(scratch[:0]); err != nil && !r.Connected.IsZero() {
		return b, err
	}
	return appendRecord(b, r, false), nil
}

// appendRecord appends the JSON of r. It writes what encoding/json would
// for the struct (field order, omitempty and omitzero, RFC 3339 times,
// HTML-safe escapes, hashes as hex), without reflection: it runs once per
// decision. FuzzCanonicalRecord holds it to encoding/json. With chain set it
// writes the canonical form ChainHash covers instead: the same with the hash
// field the empty string.
func appendRecord(b []byte, r *AuditRecord, chain bool) []byte {
	b = append(b, `{"position":`...)
	b = strconv.AppendUint(b, r.Position, 10)
	b = append(b, `,"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","route":`...)
	b = appendString(b, r.Route)
	b = append(b, `,"topic":`...)
	b = appendString(b, r.Topic)
	b = append(b, `,"source":`...)
	if r.Source == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, s := range r.Source {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	b = appendOpt(b, `,"epoch":`, r.Epoch)
	if r.Sequence != nil {
		b = append(b, `,"sequence":`...)
		b = strconv.AppendInt(b, *r.Sequence, 10)
	}
	b = appendOpt(b, `,"id":`, r.ID)
	if !r.Key.IsZero() {
		b = appendHash(append(b, `,"key":`...), r.Key)
	}
	if !r.Digest.IsZero() {
		b = appendHash(append(b, `,"digest":`...), r.Digest)
	}
	b = append(b, `,"outcome":`...)
	b = appendString(b, r.Outcome)
	b = appendOpt(b, `,"reason":`, r.Reason)
	b = append(b, `,"dup":`...)
	b = strconv.AppendBool(b, r.Dup)
	b = appendOpt(b, `,"broker":`, r.Broker)
	b = appendOpt(b, `,"feed":`, r.Feed)
	if !r.Connected.IsZero() {
		b = append(b, `,"connected":"`...)
		b = r.Connected.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if r.Ref != 0 {
		b = append(b, `,"ref":`...)
		b = strconv.AppendUint(b, r.Ref, 10)
	}
	b = appendOpt(b, `,"operator":`, r.Operator)
	b = appendOpt(b, `,"member":`, r.Member)
	if r.Gap != nil {
		b = append(b, `,"gap":{"from":`...)
		b = strconv.AppendInt(b, r.Gap.From, 10)
		b = append(b, `,"to":`...)
		b = strconv.AppendInt(b, r.Gap.To, 10)
		b = append(b, '}')
	}
	if len(r.Effects) > 0 {
		b = appendChanges(append(b, `,"effects":`...), r.Effects)
	}
	b = appendHash(append(b, `,"prev":`...), r.Prev)
	if chain {
		return append(b, `,"hash":""}`...)
	}
	b = appendHash(append(b, `,"hash":`...), r.Hash)
	return append(b, '}')
}

// appendChanges appends cs as encoding/json writes them for the engine's
// records: their values are scalars the engine writes compact, with strings
// escaped as appendString escapes them.
func appendChanges(b []byte, cs []Change) []byte {
	b = append(b, '[')
	for i := range cs {
		c := &cs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(append(b, `{"entity":`...), c.Entity)
		b = appendString(append(b, `,"field":`...), c.Field)
		b = appendString(append(b, `,"op":`...), c.Op)
		b = appendRaw(append(b, `,"value":`...), c.Value)
		b = appendRaw(append(b, `,"after":`...), c.After)
		if c.Lost {
			b = append(b, `,"lost":true`...)
		}
		if c.Historical {
			b = append(b, `,"historical":true`...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendRaw appends a change's value as the chain hashes it: a string
// written again the way appendString writes one, so that an export a tool
// escaped otherwise (jq writes "<" for "\u003c", others "\u00e9" for "é")
// hashes as the engine wrote it; a number, true, false or null as it is.
func appendRaw(b []byte, v []byte) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	if v[0] != '"' || plainString(v) {
		return append(b, v...)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return append(b, v...) // not a string the engine wrote: hashed as it is
	}
	return appendString(b, s)
}

// plainString reports whether v, a JSON string, holds only the ASCII bytes
// appendString writes as they are: it is written again unchanged.
func plainString(v []byte) bool {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return false
	}
	for _, c := range v[1 : len(v)-1] {
		if !jsonSafe[c] {
			return false
		}
	}
	return true
}

// appendHash appends h as a JSON string of hex digits.
func appendHash(b []byte, h Hash) []byte {
	b = append(b, '"')
	b = hex.AppendEncode(b, h[:])
	return append(b, '"')
}

func appendOpt(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, name...), s)
}

const hexDigits = "0123456789abcdef"

// jsonSafe marks the ASCII bytes encoding/json writes as they are.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s as a JSON string the way encoding/json does:
// invalid UTF-8 becomes U+FFFD, and <, >, &, U+2028 and U+2029 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				for i < len(s) && jsonSafe[s[i]] { // the common case: a run of plain ASCII
					i++
				}
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
