package engine_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every engine owns a committer goroutine: a test that forgets Close leaks it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
