package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/replayguard/replayguard/engine"
)

// A record's hash covers what the decoder reads of its line, not the
// line's bytes, and encoding/json reads more lines than the exporter
// writes: it takes a key spelled in another case ("OUTCOME") for the
// field, keeps the last of a key given twice and drops a key it does not
// know. Each would let a line show a reader (jq, a person, a log system)
// another value than the one the chain verified, so a line of an export or
// of a segment holds each key at most once, spelled as records are written.

// fieldKeys are the keys records are written with, by the type they
// describe.
var (
	recordKeys = fieldKeys(reflect.TypeFor[engine.AuditRecord]())
	changeKeys = fieldKeys(reflect.TypeFor[engine.Change]())
	rangeKeys  = fieldKeys(reflect.TypeFor[engine.Range]())
)

func fieldKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = t.Field(i).Name
		}
		if name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

var errKeysEnd = errors.New("unexpected end of JSON input")

// checkKeys returns why line, which decoded as a record, holds a key not
// as records are written (in the record, its gap or one of its effects):
// a key of no field, one spelled otherwise than its field, or one given
// twice. nil when it holds none.
func checkKeys(line []byte) error {
	s := keyScan{b: line}
	return s.object(recordKeys, "")
}

// keyScan walks a line of JSON the decoder accepted.
type keyScan struct {
	b []byte
	i int
}

func (s *keyScan) peek() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// object checks the keys of the object at s.i (null: none) against keys,
// and those of the gap and of each effect of a record (in "" the record's
// own, else the name of the field that holds it).
func (s *keyScan) object(keys []string, in string) error {
	if s.peek() != '{' {
		return s.skip()
	}
	s.i++
	var seen uint64 // by index in keys: fewer than 64 each
	for {
		switch s.peek() {
		case '}':
			s.i++
			return nil
		case ',':
			s.i++
			s.peek()
		case 0:
			return errKeysEnd
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		at := -1
		for j, k := range keys {
			if k == key {
				at = j
				break
			}
		}
		if err := keyProblem(keys, key, at, seen, in); err != nil {
			return err
		}
		seen |= 1 << at
		if s.peek() != ':' {
			return errKeysEnd
		}
		s.i++
		switch {
		case in == "" && key == "gap":
			err = s.object(rangeKeys, "gap")
		case in == "" && key == "effects":
			err = s.array(changeKeys, "effects")
		default:
			err = s.skip()
		}
		if err != nil {
			return err
		}
	}
}

// keyProblem says what is wrong with key, found at index at of keys (-1:
// none), with seen the keys of its object read before it.
func keyProblem(keys []string, key string, at int, seen uint64, in string) error {
	where := "the record"
	if in != "" {
		where = "its " + in
	}
	switch {
	case at >= 0 && seen&(1<<at) != 0:
		return fmt.Errorf("key %q is given twice in %s: the decoder reads the last, a reader may see the first, and the hash covers one alone", key, where)
	case at >= 0:
		return nil
	}
	for _, k := range keys {
		if strings.EqualFold(k, key) {
			return fmt.Errorf("key %q in %s is %q spelled otherwise: the decoder reads it as that field, a reader may not, and records are never written so", key, where, k)
		}
	}
	return fmt.Errorf("key %q in %s is no field of an audit record: the hash does not cover it", key, where)
}

// array checks each object of the array at s.i (null: none) against keys.
func (s *keyScan) array(keys []string, in string) error {
	if s.peek() != '[' {
		return s.skip()
	}
	s.i++
	for {
		switch s.peek() {
		case ']':
			s.i++
			return nil
		case ',':
			s.i++
		case 0:
			return errKeysEnd
		}
		if err := s.object(keys, in); err != nil {
			return err
		}
	}
}

// str reads the string at s.i, unescaped.
func (s *keyScan) str() (string, error) {
	if s.peek() != '"' {
		return "", errKeysEnd
	}
	start, escaped := s.i, false
	for s.i++; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			escaped = true
			s.i++
		case '"':
			s.i++
			raw := s.b[start:s.i]
			if !escaped {
				return string(raw[1 : len(raw)-1]), nil
			}
			var v string
			err := json.Unmarshal(raw, &v)
			return v, err
		}
	}
	return "", errKeysEnd
}

// skip passes the value at s.i.
func (s *keyScan) skip() error {
	switch s.peek() {
	case '"':
		_, err := s.str()
		return err
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, err := s.str(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					s.i++
					return nil
				}
			}
			s.i++
		}
		return errKeysEnd
	case 0:
		return errKeysEnd
	}
	for s.i < len(s.b) && !strings.ContainsRune(",}] \t\r\n", rune(s.b[s.i])) {
		s.i++
	}
	return nil
}
