// Package sqltext reads the little of a SQL statement's text that the
// configuration and the engine check before PostgreSQL sees it.
package sqltext

import "strings"

// TransactionControl returns the first word of a statement that controls
// its transaction, in capitals (BEGIN, START, COMMIT, END, ROLLBACK,
// ABORT, SAVEPOINT, RELEASE, PREPARE TRANSACTION), or "" for any other
// statement. Leading white space and comments (-- and nested /* */) are
// skipped. A sql effect may not be one: it would commit or roll back the
// decision's transaction before its key and audit record are written, or
// undo the store's own savepoints.
func TransactionControl(sql string) string {
	w, rest := sqlWord(sql)
	switch w {
	case "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE":
		return w
	case "PREPARE":
		if next, _ := sqlWord(rest); next == "TRANSACTION" {
			return "PREPARE TRANSACTION"
		}
	}
	return ""
}

// sqlWord returns the keyword sql begins with, after white space and
// comments (-- and nested /* */), in capitals, and the rest of sql after it.
func sqlWord(sql string) (word, rest string) {
	for {
		sql = strings.TrimLeft(sql, " \t\n\r\f\v")
		if strings.HasPrefix(sql, "--") {
			i := strings.IndexByte(sql, '\n')
			if i < 0 {
				return "", ""
			}
			sql = sql[i+1:]
			continue
		}
		if !strings.HasPrefix(sql, "/*") {
			break
		}
		i := commentEnd(sql, 0)
		if i >= len(sql) {
			return "", ""
		}
		sql = sql[i+1:]
	}
	i := 0
	for i < len(sql) && (sql[i] >= 'a' && sql[i] <= 'z' || sql[i] >= 'A' && sql[i] <= 'Z') {
		i++
	}
	return strings.ToUpper(sql[:i]), sql[i:]
}

// HighestParam returns the highest $N the statement names outside
// PostgreSQL's quotes and comments: 'text' (E'text' with backslash
// escapes), "identifiers", $tag$dollar quotes$tag$, -- line comments and
// /* block comments */, which nest.
func HighestParam(sql string) int {
	high := 0
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; {
		case c == '\'' || c == '"':
			escapes := c == '\'' && i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e') && (i == 1 || !identByte(sql[i-2]))
			for i++; i < len(sql) && sql[i] != c; i++ {
				if escapes && sql[i] == '\\' {
					i++
				}
			}
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			i = commentEnd(sql, i)
		case c == '$' && i > 0 && identByte(sql[i-1]): // within an identifier, like x$1
		case c == '$' && i+1 < len(sql) && sql[i+1] >= '1' && sql[i+1] <= '9':
			n := 0
			for i+1 < len(sql) && sql[i+1] >= '0' && sql[i+1] <= '9' {
				n = n*10 + int(sql[i+1]-'0')
				i++
			}
			high = max(high, n)
		case c == '$':
			if tag, ok := dollarTag(sql[i:]); ok {
				if end := strings.Index(sql[i+len(tag):], tag); end >= 0 {
					i += len(tag) + end + len(tag) - 1
				} else {
					i = len(sql)
				}
			}
		}
	}
	return high
}

// dollarTag returns the opening $tag$ (or $$) s begins with.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '$':
			return s[:j+1], true
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 || j > 1 && c >= '0' && c <= '9':
		default:
			return "", false
		}
	}
	return "", false
}

// identByte reports whether c may be part of an identifier, in which a $
// is no dollar quote (PostgreSQL allows $ after an identifier's first
// letter).
func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// commentEnd returns the index of the last byte of the block comment (/*
// */, which nest) that begins at sql[i], or len(sql) when it is not
// closed.
func commentEnd(sql string, i int) int {
	depth := 0
	for ; i < len(sql); i++ {
		if strings.HasPrefix(sql[i:], "/*") {
			depth, i = depth+1, i+1
		} else if strings.HasPrefix(sql[i:], "*/") {
			if depth, i = depth-1, i+1; depth == 0 {
				return i
			}
		}
	}
	return len(sql)
}
