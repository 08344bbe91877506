package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

var (
	configType      = reflect.TypeFor[Config]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// walker goes through the YAML tree alongside the Config type to learn the
// line of every setting and to report unknown keys with their path.
type walker struct {
	lines   map[string]int    // key -> line
	labels  map[string]string // key -> label shown in problems
	byLine  map[int][]string  // line -> keys whose key or value is on it
	values  map[string]*yaml.Node
	given   map[string]bool // keys set to a non-null value
	unknown []keyedProblem  // unknown keys and empty list items

	unknownLines map[int]bool // lines of the unknown keys reported
}

type keyedProblem struct {
	Problem
	key string
}

func newWalker() *walker {
	return &walker{lines: map[string]int{}, labels: map[string]string{}, byLine: map[int][]string{}, values: map[string]*yaml.Node{}, given: map[string]bool{}, unknownLines: map[int]bool{}}
}

func (w *walker) record(f field, line int, value *yaml.Node) {
	if _, seen := w.lines[f.key]; !seen {
		w.lines[f.key] = line
		w.labels[f.key] = f.label
		w.values[f.key] = value
	}
	for _, l := range []int{line, value.Line} {
		if !slices.Contains(w.byLine[l], f.key) {
			w.byLine[l] = append(w.byLine[l], f.key)
		}
	}
	if value.Tag != "!!null" {
		w.given[f.key] = true
	}
}

func (w *walker) node(n *yaml.Node, t reflect.Type, f field) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	switch {
	case isWholeNumber(t) && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && fraction(n.Value):
		// yaml cuts a float to an integer field without a word (2.5 becomes
		// 2): a setting the file did not say would run.
		w.unknown = append(w.unknown, keyedProblem{Problem{Path: f.label, Message: "want a whole number, got " + n.Value, Line: n.Line}, f.key})
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		w.mapping(n, t, f)
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			ff := f.index(i)
			if name := nameOf(item); name != "" {
				ff.label += " (" + name + ")"
			}
			w.record(ff, item.Line, item)
			if item.Tag == "!!null" { // yaml would drop it silently
				w.unknown = append(w.unknown, keyedProblem{Problem{Path: ff.label, Message: "the list item is empty", Line: item.Line}, ff.key})
				continue
			}
			w.node(item, t.Elem(), ff)
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			w.record(f.dot(k.Value), k.Line, v)
			w.node(v, t.Elem(), f.dot(k.Value))
		}
	}
}

func (w *walker) mapping(n *yaml.Node, t reflect.Type, f field) {
	known := yamlFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "<<" { // merge key: its mappings' keys belong here
			w.merge(v, t, f)
			continue
		}
		ft, ok := known[k.Value]
		if !ok {
			w.unknownKey(f, k, known)
			continue
		}
		w.record(f.dot(k.Value), k.Line, v)
		w.node(v, ft, f.dot(k.Value))
	}
}

func (w *walker) merge(v *yaml.Node, t reflect.Type, f field) {
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if v.Kind != yaml.SequenceNode {
		w.node(v, t, f)
		return
	}
	for _, m := range v.Content {
		w.node(m, t, f)
	}
}

func (w *walker) unknownKey(f field, k *yaml.Node, known map[string]reflect.Type) {
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	slices.Sort(names)
	msg := fmt.Sprintf("unknown key %q", k.Value)
	key := f.dot(k.Value).key
	if s := closest(k.Value, names); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
		key = f.dot(s).key // a typo: do not also report the key as missing
	} else {
		msg += "; known keys: " + strings.Join(names, ", ")
	}
	w.unknown = append(w.unknown, keyedProblem{Problem{Path: f.label, Message: msg, Line: k.Line}, key})
	w.unknownLines[k.Line] = true
}

// yamlFields maps a struct's YAML keys to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for sf := range t.Fields() {
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if sf.IsExported() && name != "-" && name != "" {
			fields[name] = sf.Type
		}
	}
	return fields
}

// nameOf returns the scalar "name" of a mapping node, or "".
func nameOf(n *yaml.Node) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode {
			return n.Content[i+1].Value
		}
	}
	return ""
}

// keyAt picks the setting a problem on line is about: the one whose value
// starts at column (when known, else 0) or is the scalar value (when known,
// else ""), else the only deepest key on the line, else the common parent of
// the keys there.
func (w *walker) keyAt(line, column int, value string) string {
	keys := w.byLine[line]
	var match []string
	for _, k := range keys {
		v := w.values[k]
		switch {
		case column > 0 && v.Line == line && v.Column == column:
			match = append(match, k)
		case column == 0 && value != "" && v.Kind == yaml.ScalarNode && shownAs(v.Value, value):
			match = append(match, k)
		}
	}
	if len(match) == 1 {
		return match[0]
	}
	var leaves []string
	for _, k := range keys {
		if !slices.ContainsFunc(keys, func(o string) bool { return o != k && within(o, k) }) {
			leaves = append(leaves, k)
		}
	}
	if len(leaves) == 0 {
		return ""
	}
	key := leaves[0]
	for _, l := range leaves[1:] {
		for !within(l, key) && key != "" {
			key = parentKey(key)
		}
	}
	return key
}

// shownAs reports whether yaml's message shows value as s (cut to 7
// characters and "..." when longer than 10).
func shownAs(value, s string) bool {
	if short, ok := strings.CutSuffix(s, "..."); ok && len(value) > 10 {
		return strings.HasPrefix(value, short)
	}
	return value == s
}

// closest returns the name within edit distance 2 of s, or "".
func closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(s), n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// isWholeNumber reports whether t is an integer type.
func isWholeNumber(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// fraction reports whether a YAML float has a fractional part. A whole
// one (1e6, 4096.0) yaml stores exactly; one that is not finite, or too
// large, yaml refuses itself.
func fraction(s string) bool {
	v, err := strconv.ParseFloat(s, 64)
	return err == nil && !math.IsInf(v, 0) && !math.IsNaN(v) && v != math.Trunc(v)
}
