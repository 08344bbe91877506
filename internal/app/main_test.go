package app

import (
	"os"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestMain removes the PostgreSQL template the package's tests start
// their servers from, once they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	testbroker.CleanupPostgres()
	os.Exit(code)
}
