package engine

import "github.com/buger/jsonparser"

// validJSON reports whether b is exactly one JSON value (RFC 8259) with
// optional surrounding white space. It is a plain recursive-descent scanner,
// about three times faster than encoding/json.Valid on small messages; the
// fuzz tests hold it to encoding/json's verdict.
func validJSON(b []byte) bool {
	return scanJSON(b, nil, nil)
}

// ValidJSON reports whether b is exactly one JSON value: encoding/json.Valid's
// verdict (held to it by a fuzz test), about three times faster. Nesting
// deeper than 1000 levels is refused.
func ValidJSON(b []byte) bool { return validJSON(b) }

// ScanMembers reports whether b is exactly one JSON value, ValidJSON's
// verdict, and in the same pass calls member for each member of b when b is
// an object: its name as written (without the quotes, still escaped; esc
// says whether it holds an escape) and its value's bytes (a string's with
// its quotes). When b is not valid, member may have seen the members before
// the fault. A reader of a framed format validates and picks its members
// apart with one scan instead of two.
func ScanMembers(b []byte, member func(name []byte, esc bool, value []byte)) bool {
	p := jsonScanner{b: b}
	p.space()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return validJSON(b)
	}
	if !p.members(member) {
		return false
	}
	p.space()
	return p.i == len(p.b)
}

// members is object at depth 0, reporting each member.
func (p *jsonScanner) members(member func(name []byte, esc bool, value []byte)) bool {
	p.i++ // '{'
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return true
	}
	for {
		p.space()
		start := p.i
		if p.i >= len(p.b) || p.b[p.i] != '"' || !p.str() {
			return false
		}
		name, esc := p.b[start+1:p.i-1], p.esc
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return false
		}
		p.i++
		p.space()
		vstart := p.i
		if !p.value(1, nil) {
			return false
		}
		member(name, esc, p.b[vstart:p.i])
		p.space()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return true
		default:
			return false
		}
	}
}

// scanJSON validates b and, in the same pass, reports the value of every
// object member the trie names to d.found(slot, start, end, kind), with
// b[start:end] the value's bytes (a string's without its quotes, still
// escaped). Members
// inside arrays are never matched. d may be nil when root is. It takes the
// concrete *Delivery rather than a callback: a closure would escape and cost
// two allocations a message.
func scanJSON(b []byte, root *pathNode, d *Delivery) bool {
	p := jsonScanner{b: b, sink: d}
	p.space()
	if !p.value(0, root) {
		return false
	}
	p.space()
	return p.i == len(p.b)
}

// pathNode is a trie of dotted payload paths.
type pathNode struct {
	names []string
	kids  []*pathNode
	slot  int // the payload slot ending here, or -1
}

func newPathTrie(paths [][]string) *pathNode {
	root := &pathNode{slot: -1}
	for slot, segs := range paths {
		n := root
		for _, seg := range segs {
			n = n.child(seg, true)
		}
		n.slot = slot
	}
	return root
}

func (n *pathNode) child(name string, add bool) *pathNode {
	for i, nm := range n.names {
		if nm == name {
			return n.kids[i]
		}
	}
	if !add {
		return nil
	}
	c := &pathNode{slot: -1}
	n.names, n.kids = append(n.names, name), append(n.kids, c)
	return c
}

// childRaw finds the child named by a raw member name, which holds an
// escape when esc is set.
func (n *pathNode) childRaw(raw []byte, esc bool) *pathNode {
	if esc {
		name, err := jsonparser.ParseString(raw)
		if err != nil {
			return nil
		}
		return n.child(name, false)
	}
	for i, nm := range n.names {
		if nm == string(raw) {
			return n.kids[i]
		}
	}
	return nil
}

type jsonScanner struct {
	b    []byte
	i    int
	sink *Delivery
	esc  bool // the last string scanned holds an escape
	high bool // the last string scanned holds a byte >= 0x80
}

const maxJSONDepth = 1000 // levels of nesting; the top value is at depth 0

// nestsTooDeep reports whether b, JSON or not, opens more than
// maxJSONDepth arrays and objects within each other, outside strings: why
// a payload that nests that deep is refused, said apart from other faults.
func nestsTooDeep(b []byte) bool {
	depth, inStr := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '[' || c == '{':
			if depth++; depth > maxJSONDepth {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

func (p *jsonScanner) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonScanner) value(depth int, node *pathNode) bool {
	if p.i >= len(p.b) || depth >= maxJSONDepth {
		return false
	}
	start := p.i
	var ok bool
	var kind valueKind
	switch c := p.b[p.i]; {
	case c == '{':
		ok, kind = p.object(depth, node), vComposite
	case c == '[':
		ok, kind = p.array(depth), vComposite
	case c == '"':
		ok, kind = p.str(), vString
	case c == '-' || (c >= '0' && c <= '9'):
		ok, kind = p.number(), vNumber
	case c == 't':
		ok, kind = p.literal("true"), vBool
	case c == 'f':
		ok, kind = p.literal("false"), vBool
	default:
		ok, kind = p.literal("null"), vNull
	}
	if ok && node != nil && node.slot >= 0 {
		end := p.i
		if kind == vString {
			start, end = start+1, end-1
		}
		if kind == vNumber && end == len(p.b) && depth > 0 { // its digits may go on past what arrived
			kind = vUnread
		}
		p.sink.found(node.slot, start, end, kind, kind == vString && !p.esc && !p.high)
	}
	return ok
}

func (p *jsonScanner) literal(w string) bool {
	if len(p.b)-p.i >= len(w) && string(p.b[p.i:p.i+len(w)]) == w {
		p.i += len(w)
		return true
	}
	return false
}

func (p *jsonScanner) object(depth int, node *pathNode) bool {
	p.i++ // '{'
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return true
	}
	for {
		p.space()
		start := p.i
		if p.i >= len(p.b) || p.b[p.i] != '"' || !p.str() {
			return false
		}
		var kid *pathNode
		if node != nil && len(node.names) > 0 {
			kid = node.childRaw(p.b[start+1:p.i-1], p.esc)
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return false
		}
		p.i++
		p.space()
		if !p.value(depth+1, kid) {
			return false
		}
		p.space()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return true
		default:
			return false
		}
	}
}

func (p *jsonScanner) array(depth int) bool {
	p.i++ // '['
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return true
	}
	for {
		p.space()
		if !p.value(depth+1, nil) {
			return false
		}
		p.space()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return true
		default:
			return false
		}
	}
}

// strPlain marks the bytes a JSON string holds as they are, printable
// ASCII but the quote and the backslash: str skips runs of them.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str scans a string literal. It sets p.esc when the literal holds an
// escape and p.high when it holds a byte of 0x80 or above: a literal with
// neither is printable ASCII, its own unescaped text and valid UTF-8.
func (p *jsonScanner) str() bool {
	p.i++ // opening quote
	p.esc, p.high = false, false
	for {
		for p.i < len(p.b) && strPlain[p.b[p.i]] {
			p.i++
		}
		if p.i >= len(p.b) {
			return false
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			p.esc = true
			p.i++
			if p.i >= len(p.b) {
				return false
			}
			switch p.b[p.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				if len(p.b)-p.i < 5 || !isHex(p.b[p.i+1]) || !isHex(p.b[p.i+2]) || !isHex(p.b[p.i+3]) || !isHex(p.b[p.i+4]) {
					return false
				}
				p.i += 5
			default:
				return false
			}
		default: // 0x80 and above
			p.high = true
			p.i++
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (p *jsonScanner) digits() bool {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

func (p *jsonScanner) number() bool {
	if p.b[p.i] == '-' {
		p.i++
	}
	if p.i >= len(p.b) {
		return false
	}
	if p.b[p.i] == '0' {
		p.i++
	} else if !p.digits() {
		return false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if !p.digits() {
			return false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return false
		}
	}
	return true
}
