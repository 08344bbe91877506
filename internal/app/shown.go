package app

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// shown is s as the text of state, sources and explain prints it: as is,
// or, when s holds a character controlRune reports or invalid UTF-8,
// quoted with those escaped as strconv.Quote writes them (\x1b, \n,
// \u202e). A producer's text (an entity name, a topic, a source) cannot
// then move the cursor, recolour or retitle the terminal, or forge a line
// or a cell; other UTF-8 is kept.
func shown(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, controlRune) {
		return strconv.Quote(s)
	}
	return s
}

// shownAll is shown of each of parts, joined by sep.
func shownAll(parts []string, sep string) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = shown(p)
	}
	return strings.Join(out, sep)
}

// shownJSON is JSON value v with each character controlRune reports
// written as a \uXXXX escape: the same value, safe to print. (JSON escapes
// C0 controls already, not DEL, C1 or bidirectional overrides.)
func shownJSON(v []byte) string {
	if utf8.Valid(v) && !bytes.ContainsFunc(v, controlRune) {
		return string(v)
	}
	var b strings.Builder
	for _, r := range string(v) {
		if controlRune(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// controlRune reports whether a terminal may act on r rather than print
// it: a control character (C0, DEL, C1; a tab too, which would split a
// table's cell) or a bidirectional override.
func controlRune(r rune) bool {
	return unicode.IsControl(r) || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069')
}
