package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// interpolate expands ${VAR} and ${VAR:-default} in the values of text
// (its scalars: values and keys) and turns $$ there into a literal $. A
// default is used when VAR is unset or empty. What is not a value, comments
// above all, is copied as written and its references are never looked up.
//
// A value is always taken literally: a plain (unquoted) value that would
// not read back as itself (it starts with a YAML indicator such as * & ! |
// or holds ": " or " #") is written double-quoted instead; inside double
// quotes the value is escaped, inside single quotes ' is doubled. A value
// that cannot be written where it stands (a line break in a single-quoted
// or block scalar, or in an unquoted one, where a trailing one is more
// likely a mistake than meant) is a problem. It returns every problem found, with its
// line; text that is not YAML is one syntax problem.
func interpolate(text string, getenv func(string) (string, bool)) (string, []Problem) {
	m := markRefs(text)
	if len(m.refs) == 0 {
		return text, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(m.text), &root); err != nil {
		p := syntaxProblem(err)
		p.Message = m.unmark(p.Message)
		return "", []Problem{p}
	}
	x := &expander{marking: m, getenv: getenv, want: map[*yaml.Node]string{}}
	x.walk(&root, false, false)
	if len(x.probs) > 0 {
		slices.SortStableFunc(x.probs, func(a, b refProblem) int { return a.ref - b.ref })
		out := make([]Problem, len(x.probs))
		for i, p := range x.probs {
			out[i] = Problem{Message: p.msg, Line: m.refs[p.ref].line}
		}
		return "", out
	}
	if len(x.want) == 0 {
		return text, nil // every reference stands outside a value
	}
	out := x.render()
	if p, ok := x.verify(&root, out); !ok {
		return "", []Problem{p}
	}
	return out, nil
}

// ref is one reference in the text.
type ref struct {
	raw  string // as written: ${...}, $$, or a ${ that no } closes on its line
	line int
	at   int  // where its mark starts in the marked text
	used bool // it stands in a value
}

// marking is the text with each reference replaced by a mark: a token
// that is a plain scalar anywhere, found nowhere else in the text.
type marking struct {
	text   string
	prefix string
	width  int
	refs   []ref
}

func markRefs(text string) *marking {
	m := &marking{prefix: "rgref"}
	for strings.Contains(text, m.prefix) {
		m.prefix += "q"
	}
	var at []int
	line := 1
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			line++
		}
		if text[i] != '$' || i+1 == len(text) || (text[i+1] != '$' && text[i+1] != '{') {
			continue
		}
		raw := "$$"
		if text[i+1] == '{' {
			eol := strings.IndexByte(text[i:], '\n')
			if eol < 0 {
				eol = len(text) - i
			}
			raw = "${"
			if end := strings.IndexByte(text[i:i+eol], '}'); end >= 0 {
				raw = text[i : i+end+1]
			}
		}
		m.refs = append(m.refs, ref{raw: raw, line: line})
		at = append(at, i)
		i += len(raw) - 1
	}
	m.width = len(strconv.Itoa(max(len(m.refs)-1, 0)))
	var b strings.Builder
	prev := 0
	for i, a := range at {
		b.WriteString(text[prev:a])
		m.refs[i].at = b.Len()
		b.WriteString(m.mark(i))
		prev = a + len(m.refs[i].raw)
	}
	b.WriteString(text[prev:])
	m.text = b.String()
	return m
}

func (m *marking) mark(i int) string { return fmt.Sprintf("%s%0*d", m.prefix, m.width, i) }

// marksIn returns the references whose marks s holds, in order, with the
// offset of each in s.
func (m *marking) marksIn(s string) (ids, offs []int) {
	for off := 0; ; {
		i := strings.Index(s[off:], m.prefix)
		if i < 0 {
			return ids, offs
		}
		off += i
		end := off + len(m.prefix) + m.width
		id, err := strconv.Atoi(s[off+len(m.prefix) : min(end, len(s))])
		if err != nil || end > len(s) || id >= len(m.refs) {
			off += len(m.prefix) // cut short, as in a message
			continue
		}
		ids, offs = append(ids, id), append(offs, off)
		off = end
	}
}

// unmark puts the references back into s in place of their marks.
func (m *marking) unmark(s string) string {
	ids, offs := m.marksIn(s)
	for k := len(ids) - 1; k >= 0; k-- {
		s = s[:offs[k]] + m.refs[ids[k]].raw + s[offs[k]+len(m.prefix)+m.width:]
	}
	return s
}

// expander resolves the references that stand in values and decides how
// each is written.
type expander struct {
	*marking
	getenv func(string) (string, bool)
	edits  []edit
	want   map[*yaml.Node]string // each value with references: what it must read back as
	probs  []refProblem
}

// edit replaces n bytes at at of the marked text with s.
type edit struct {
	at, n int
	s     string
}

type refProblem struct {
	ref int
	msg string
}

func (x *expander) walk(n *yaml.Node, key, flow bool) {
	flow = flow || n.Style&yaml.FlowStyle != 0
	switch n.Kind {
	case yaml.ScalarNode:
		if strings.Contains(n.Value, x.prefix) {
			x.scalar(n, key, flow)
		}
	case yaml.MappingNode:
		for i, c := range n.Content {
			x.walk(c, i%2 == 0, flow)
		}
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			x.walk(c, false, flow)
		}
	}
}

// scalar resolves the references of one value and writes each one the way
// its scalar's style needs.
func (x *expander) scalar(n *yaml.Node, key, flow bool) {
	ids, offs := x.marksIn(n.Value)
	vals := make([]string, len(ids))
	ok := true
	for k, id := range ids {
		x.refs[id].used = true
		var msg string
		if vals[k], msg = x.resolve(id); msg != "" {
			x.probs = append(x.probs, refProblem{id, msg})
			ok = false
		}
	}
	if !ok {
		return
	}
	var b strings.Builder
	prev := 0
	for k, off := range offs {
		b.WriteString(n.Value[prev:off])
		b.WriteString(vals[k])
		prev = off + len(x.prefix) + x.width
	}
	b.WriteString(n.Value[prev:])
	expanded := b.String()
	x.want[n] = expanded
	each := func(write func(string) string) {
		for k, id := range ids {
			x.edits = append(x.edits, edit{x.refs[id].at, len(x.prefix) + x.width, write(vals[k])})
		}
	}
	switch style := n.Style &^ (yaml.TaggedStyle | yaml.FlowStyle); {
	case style&yaml.DoubleQuotedStyle != 0:
		each(escapeDouble)
	case style&(yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		where := "a block scalar"
		if style&yaml.SingleQuotedStyle != 0 {
			where = "a single-quoted value"
		}
		for k, id := range ids {
			if strings.IndexFunc(vals[k], unwritable) >= 0 {
				x.probs = append(x.probs, refProblem{id, fmt.Sprintf("%s: the value of %s holds a line break or a control character, which %s cannot hold: write the reference in double quotes (\"%s\")",
					x.refs[id].raw, x.name(id), where, x.refs[id].raw)})
				return
			}
		}
		each(func(v string) string {
			if style&yaml.SingleQuotedStyle != 0 {
				return strings.ReplaceAll(v, "'", "''")
			}
			return v
		})
	case slices.ContainsFunc(vals, hasLineBreak):
		id := ids[slices.IndexFunc(vals, hasLineBreak)]
		x.probs = append(x.probs, refProblem{id, fmt.Sprintf("%s: the value of %s holds a line break (a secret file written with echo ends in one), which an unquoted value does not take: remove it, or write the reference in double quotes (\"%s\") to keep it",
			x.refs[id].raw, x.name(id), x.refs[id].raw)})
	case expanded == "" || plainSafe(expanded, key, flow):
		each(func(v string) string { return v })
	default:
		start := x.refs[ids[0]].at - offs[0]
		if start < 0 || start+len(n.Value) > len(x.text) || x.text[start:start+len(n.Value)] != n.Value {
			x.probs = append(x.probs, refProblem{ids[0], x.cannotWrite(ids[0])}) // a plain value over several lines
			return
		}
		x.edits = append(x.edits, edit{start, len(n.Value), `"` + escapeDouble(expanded) + `"`})
	}
}

// resolve returns the value of a reference, or what is wrong with it.
func (x *expander) resolve(id int) (string, string) {
	raw := x.refs[id].raw
	switch raw {
	case "$$":
		return "$", ""
	case "${":
		return "", "unterminated ${: close it with } (write $$ for a literal $)"
	}
	v, msg := lookupVar(raw[2:len(raw)-1], x.getenv)
	if msg != "" {
		return "", raw + ": " + msg
	}
	return v, ""
}

func (x *expander) name(id int) string {
	name, _, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(x.refs[id].raw, "${"), "}"), ":-")
	return name
}

func (x *expander) cannotWrite(id int) string {
	r := x.refs[id].raw
	if r == "$$" {
		return "$$: a literal $ cannot be written here: quote the value"
	}
	return fmt.Sprintf("%s: the value of %s cannot be written here as it is: write the reference in double quotes (\"%s\")", r, x.name(id), r)
}

// render applies the edits to the marked text and puts back, as written,
// the references that stand outside values.
func (x *expander) render() string {
	edits := slices.Clone(x.edits)
	for i, r := range x.refs {
		if !r.used {
			edits = append(edits, edit{r.at, len(x.prefix) + x.width, x.refs[i].raw})
		}
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.at - b.at })
	var b strings.Builder
	prev := 0
	for _, e := range edits {
		b.WriteString(x.text[prev:e.at])
		b.WriteString(e.s)
		prev = e.at + e.n
	}
	b.WriteString(x.text[prev:])
	return b.String()
}

// verify checks that out reads as the marked text did, with each value
// that held references reading as its expansion. Otherwise it names the
// first reference of the value (or the line) that went wrong.
func (x *expander) verify(root *yaml.Node, out string) (Problem, bool) {
	var got yaml.Node
	if err := yaml.Unmarshal([]byte(out), &got); err != nil {
		line := syntaxProblem(err).Line
		for id, r := range x.refs {
			if r.used && r.line == line {
				return Problem{Message: x.cannotWrite(id), Line: r.line}, false
			}
		}
		return x.blame(root), false
	}
	if bad := x.differs(root, &got); bad != nil {
		return x.blame(bad), false
	}
	return Problem{}, true
}

// differs returns the first node of a whose counterpart in b reads
// otherwise, or nil.
func (x *expander) differs(a, b *yaml.Node) *yaml.Node {
	ac := a.Content
	if x.droppedLast(a, b) { // [${A}, ${B}] with B empty: the list of A, as before
		ac = ac[:len(ac)-1]
	}
	if a.Kind != b.Kind || len(ac) != len(b.Content) || a.Anchor != b.Anchor {
		return a
	}
	if a.Kind == yaml.ScalarNode || a.Kind == yaml.AliasNode {
		want, expanded := x.want[a]
		if !expanded {
			want = a.Value
		}
		if b.Value != want || (expanded && want != "" && b.ShortTag() == "!!null") {
			return a
		}
	}
	for i := range ac {
		if bad := x.differs(ac[i], b.Content[i]); bad != nil {
			return bad
		}
	}
	return nil
}

// droppedLast reports whether b is flow sequence a without its last item,
// a reference whose value is empty: YAML reads "[x, ]" as [x].
func (x *expander) droppedLast(a, b *yaml.Node) bool {
	if a.Kind != yaml.SequenceNode || a.Style&yaml.FlowStyle == 0 || b.Kind != yaml.SequenceNode ||
		len(a.Content) != len(b.Content)+1 || len(b.Content) == 0 {
		return false
	}
	want, expanded := x.want[a.Content[len(a.Content)-1]]
	return expanded && want == ""
}

// blame names the first reference used in n, or in the text.
func (x *expander) blame(n *yaml.Node) Problem {
	var first func(n *yaml.Node) (int, bool)
	first = func(n *yaml.Node) (int, bool) {
		if _, ok := x.want[n]; ok {
			ids, _ := x.marksIn(n.Value)
			return ids[0], true
		}
		for _, c := range n.Content {
			if id, ok := first(c); ok {
				return id, true
			}
		}
		return 0, false
	}
	id, ok := first(n)
	for i := 0; !ok && i < len(x.refs); i++ {
		id, ok = i, x.refs[i].used
	}
	return Problem{Message: x.cannotWrite(id), Line: x.refs[id].line}
}

// plainSafe reports whether v, written unquoted where a plain scalar
// stands (a key or not, in a flow collection or not), reads back as the
// string v.
func plainSafe(v string, key, flow bool) bool {
	if strings.ContainsAny(v, "\r\n") || strings.HasSuffix(v, ":") {
		return false
	}
	type probe struct {
		doc      string
		items, i int
	}
	var probes []probe
	switch {
	case flow && key:
		probes = []probe{{"{" + v + ": x}", 2, 0}}
	case flow:
		probes = []probe{{"[" + v + "]", 1, 0}, {"[" + v + ", x]", 2, 0}, {"{k: " + v + "}", 2, 1}}
	case key:
		probes = []probe{{v + ": x", 2, 0}}
	default:
		probes = []probe{{"k: " + v, 2, 1}}
	}
	for _, p := range probes {
		var doc yaml.Node
		if yaml.Unmarshal([]byte(p.doc), &doc) != nil || len(doc.Content) != 1 || len(doc.Content[0].Content) != p.items {
			return false
		}
		s := doc.Content[0].Content[p.i]
		if s.Kind != yaml.ScalarNode || s.Style != 0 || s.Anchor != "" || s.Value != v || s.LineComment != "" ||
			s.ShortTag() == "!!null" || s.ShortTag() == "!!merge" {
			return false
		}
	}
	return true
}

// escapeDouble escapes v for the inside of a double-quoted scalar.
func escapeDouble(v string) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}

func hasLineBreak(v string) bool { return strings.ContainsAny(v, "\r\n") }

// unwritable reports the characters a single-quoted or block scalar cannot
// hold as they are: line breaks and other controls.
func unwritable(r rune) bool { return r != '\t' && r != ' ' && !unicode.IsPrint(r) }

// lookupVar resolves the inside of ${...}, or says what is wrong with it.
func lookupVar(inner string, getenv func(string) (string, bool)) (string, string) {
	name, def, hasDef := strings.Cut(inner, ":-")
	if !varName.MatchString(name) {
		return "", fmt.Sprintf("%q is not a variable name: write ${NAME} or ${NAME:-default} (and $$ for a literal $)", name)
	}
	v, ok := getenv(name)
	switch {
	case hasDef && v == "":
		v = def
	case !ok:
		return "", fmt.Sprintf("environment variable %s is not set and has no default: set it, or write ${%s:-value}", name, name)
	}
	if !utf8.ValidString(v) {
		return "", fmt.Sprintf("the value of %s is not valid UTF-8, which YAML cannot hold", name)
	}
	return v, ""
}

// escapeDollars makes text read back as itself through interpolate: every $
// that would start ${ or $$ is doubled.
func escapeDollars(text string) string {
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		b.WriteByte(text[i])
		if text[i] == '$' && i+1 < len(text) && (text[i+1] == '{' || text[i+1] == '$') {
			b.WriteByte('$')
		}
	}
	return b.String()
}
