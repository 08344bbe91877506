package app

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
)

// audit verify --file compares each chain's end in the file with the
// store's chain head: on the embedded store it reads that head alone, not
// the key window, sources and entities a snapshot holds, which grow with
// the store (180 MB of RSS for 770,454 decisions).
func TestVerifyFileReadsTheEmbeddedStoresHeadWithoutItsKeyWindow(t *testing.T) {
	cfg, err := config.Parse(fmt.Appendf(nil, `store: {kind: embedded, path: %s}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
`, filepath.Join(t.TempDir(), "data")), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Open(t.Context(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const decisions = 50_000
	for i := 0; i < decisions; i += 1000 {
		msgs := make([]engine.Message, 1000)
		for j := range msgs {
			msgs[j] = engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m-%d"}`, i+j)}
		}
		if _, err := a.Engine.Process(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()

	tool := &Tool{Config: cfg, Out: io.Discard}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ends, err := tool.readStoreEnds(t.Context())
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	ends.done()
	if h := ends.heads[""]; h.Position != decisions {
		t.Fatalf("the store's head read is at %d, want %d", h.Position, decisions)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("reading the store's head allocated %d bytes for a store of %d decisions; want it independent of the store's size (under 1 MiB)", n, decisions)
	}
}
