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
		depth, i := 0, 0
		for ; i < len(sql); i++ {
			if strings.HasPrefix(sql[i:], "/*") {
				depth, i = depth+1, i+1
			} else if strings.HasPrefix(sql[i:], "*/") {
				if depth, i = depth-1, i+1; depth == 0 {
					break
				}
			}
		}
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
