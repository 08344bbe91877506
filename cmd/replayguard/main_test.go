package main

import (
	"os"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbroker.CleanupPostgres() // the template data directory a PostgreSQL test made
	os.Exit(code)
}
