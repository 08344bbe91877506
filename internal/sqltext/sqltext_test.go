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
