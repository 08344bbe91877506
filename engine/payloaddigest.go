package engine

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/buger/jsonparser"
)

// appendContent appends the content of a JSON payload in canonical form,
// for the digest of a route that forwards it: a forward's input is the
// whole payload, sent on byte for byte, so a field no other effect reads is
// part of what a replay must match to be a duplicate. Object members are
// sorted by name (stable: a name given twice keeps its order), strings
// unescaped, numbers written as exact decimals, white space dropped, so a
// re-serialised payload with the same content appends the same bytes. A
// payload that is not JSON (the scan took it, so never) appends its bytes.
func appendContent(b, payload []byte) []byte {
	c := contentCanon{src: payload}
	start := len(b)
	out, ok := c.value(b)
	if !ok {
		return append(append(b[:start], 'x'), payload...)
	}
	return out
}

// contentCanon reads a JSON value from src and appends its canonical form:
// a tag byte each ('n' null, 't' true, 'f' false, 'd' number, 's' string,
// 'a' array, 'o' object, 'e' the end of an array or object), then a
// number's or string's text, or an object's members (name, then value),
// each text with its length first.
type contentCanon struct {
	src []byte
	i   int
	tmp []byte // an object's members being put in order
}

// member is where one object member's canonical bytes lie in dst, and its
// name.
type member struct {
	name       []byte
	start, end int
}

func (c *contentCanon) space() {
	for c.i < len(c.src) && (c.src[c.i] == ' ' || c.src[c.i] == '\t' || c.src[c.i] == '\n' || c.src[c.i] == '\r') {
		c.i++
	}
}

func (c *contentCanon) value(b []byte) ([]byte, bool) {
	c.space()
	if c.i >= len(c.src) {
		return b, false
	}
	switch ch := c.src[c.i]; {
	case ch == '{':
		return c.object(b)
	case ch == '[':
		c.i++
		b = append(b, 'a')
		for {
			c.space()
			if c.i < len(c.src) && c.src[c.i] == ']' {
				c.i++
				return append(b, 'e'), true
			}
			var ok bool
			if b, ok = c.value(b); !ok {
				return b, false
			}
			c.space()
			if c.i < len(c.src) && c.src[c.i] == ',' {
				c.i++
			}
		}
	case ch == '"':
		s, ok := c.str()
		return appendFieldBytes(append(b, 's'), s), ok
	case ch == 't':
		c.i += len("true")
		return append(b, 't'), true
	case ch == 'f':
		c.i += len("false")
		return append(b, 'f'), true
	case ch == 'n':
		c.i += len("null")
		return append(b, 'n'), true
	default:
		start := c.i
		for c.i < len(c.src) && strings.IndexByte("+-.0123456789eE", c.src[c.i]) >= 0 {
			c.i++
		}
		lit := c.src[start:c.i]
		if plainInteger(lit) {
			return appendFieldBytes(append(b, 'd'), lit), true
		}
		text, _, err := canonicalNumber(string(lit))
		return appendField(append(b, 'd'), text), err == nil
	}
}

// object appends an object's members sorted by name.
func (c *contentCanon) object(b []byte) ([]byte, bool) {
	c.i++ // '{'
	b = append(b, 'o')
	var local [16]member
	ms := local[:0]
	for {
		c.space()
		if c.i >= len(c.src) {
			return b, false
		}
		if c.src[c.i] == '}' {
			c.i++
			break
		}
		name, ok := c.str()
		if !ok {
			return b, false
		}
		c.space()
		c.i++ // ':'
		start := len(b)
		b = appendFieldBytes(b, name)
		if b, ok = c.value(b); !ok {
			return b, false
		}
		ms = append(ms, member{name: name, start: start, end: len(b)})
		c.space()
		if c.i < len(c.src) && c.src[c.i] == ',' {
			c.i++
		}
	}
	byName := func(x, y member) int { return bytes.Compare(x.name, y.name) }
	if !slices.IsSortedFunc(ms, byName) {
		first := ms[0].start
		c.tmp = append(c.tmp[:0], b[first:]...)
		slices.SortStableFunc(ms, byName)
		b = b[:first]
		for _, m := range ms {
			b = append(b, c.tmp[m.start-first:m.end-first]...)
		}
	}
	return append(b, 'e'), true
}

// str reads a string literal and returns its text, unescaped. A text
// without escapes is src's own bytes; an escaped one is a copy, kept
// until the object holding it is sorted.
func (c *contentCanon) str() ([]byte, bool) {
	c.i++ // opening quote
	start, esc := c.i, false
	for c.i < len(c.src) && c.src[c.i] != '"' {
		if c.src[c.i] == '\\' {
			esc = true
			c.i++
		}
		c.i++
	}
	if c.i >= len(c.src) {
		return nil, false
	}
	raw := c.src[start:c.i]
	c.i++ // closing quote
	if !esc {
		return raw, true
	}
	if LoneSurrogate(string(raw)) {
		// The parser reads every lone surrogate as U+FFFD: keep the escapes
		// apart, tagged so that no unescaped text reads the same.
		return append([]byte{0xff}, raw...), true
	}
	s, err := jsonparser.Unescape(raw, nil)
	return s, err == nil
}

// plainInteger reports a literal canonicalNumber returns as it is: digits,
// a minus before them, no more than maxDigits, not -0.
func plainInteger(lit []byte) bool {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > maxDigits || string(lit) == "-0" {
		return false
	}
	for _, d := range digits {
		if d < '0' || d > '9' {
			return false
		}
	}
	return true
}

func appendFieldBytes(dst, s []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}
