package sqltext

import "testing"

func TestTransactionControlStatements(t *testing.T) {
	for sql, want := range map[string]string{
		"ROLLBACK":                                     "ROLLBACK",
		"rollback to savepoint replayguard_sql":        "ROLLBACK",
		"  /* a /* nested */ comment */ end;":          "END",
		"-- first\n-- second\nCommit and chain":        "COMMIT",
		"COMMIT/* now */":                              "COMMIT",
		"begin":                                        "BEGIN",
		"START TRANSACTION":                            "START",
		"abort":                                        "ABORT",
		"SAVEPOINT s":                                  "SAVEPOINT",
		"release s":                                    "RELEASE",
		"PREPARE /* it */ TRANSACTION 'x'":             "PREPARE TRANSACTION",
		"PREPARE p AS SELECT 1":                        "",
		"INSERT INTO commits VALUES ($1)":              "",
		"WITH ended AS (SELECT 1) SELECT * FROM ended": "",
		"SELECT 'rollback'":                            "",
		"ENDPOINT":                                     "",
		"/* unclosed comment COMMIT":                   "",
		"-- COMMIT":                                    "",
		"":                                             "",
	} {
		if got := TransactionControl(sql); got != want {
			t.Errorf("TransactionControl(%q) = %q, want %q", sql, got, want)
		}
	}
}

func TestHighestParamSkipsQuotesAndComments(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want int
	}{
		{"INSERT INTO t VALUES ($1, $2)", 2},
		{"INSERT INTO t VALUES ($1, '$9')", 1},
		{"INSERT INTO t VALUES ($1, 'it''s $7', $2)", 2},
		{`INSERT INTO "col$5" VALUES ($1)`, 1},
		{"INSERT INTO t VALUES ($1) -- not $2\n", 1},
		{"INSERT INTO t VALUES ($1 /* not $2 /* nor $3 */ still not $4 */, $2)", 2},
		{"INSERT INTO t VALUES ($1, $q$ not $2 $q$)", 1},
		{"INSERT INTO t VALUES ($$it's$$, $1)", 1},
		{"INSERT INTO t VALUES (E'\\'', $1, E'\\\\', $2)", 2},
		{"INSERT INTO t VALUES ('E\\', $1)", 1},
		{"SELECT x$7 FROM t WHERE y = $1", 1},
		{"SELECT 1", 0},
		{"INSERT INTO t VALUES ($1, '$2", 1}, // an unclosed quote runs to the end
	} {
		if got := HighestParam(tc.sql); got != tc.want {
			t.Errorf("HighestParam(%q) = %d, want %d", tc.sql, got, tc.want)
		}
	}
}
