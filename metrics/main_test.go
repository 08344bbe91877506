package metrics_test

import (
	"testing"

	"go.uber.org/goleak"
)

// A scrape of a shared store that does not answer leaves the count of its
// windows running: a test that forgets Close leaks it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
