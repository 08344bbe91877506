package audit

import (
	"encoding/json"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// FuzzCheckKeys: checkKeys, a scanner of its own over any line the
// decoder reads as a record, never panics, and never refuses a record as
// encoding/json writes it (each key once, spelled as its field's tag).
func FuzzCheckKeys(f *testing.F) {
	f.Add([]byte(`{"position":3,"time":"2026-01-01T00:00:00Z","route":"r","topic":"t","source":["a"],"outcome":"applied","dup":false,"gap":{"from":1,"to":2},"effects":[{"entity":"e","field":"f","op":"set","value":1,"after":{"a":[1,"x"]}}]}`))
	f.Add([]byte(`{"position":3,"OUTCOME":"x","outcome":"y","effects":null,"gap":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r engine.AuditRecord
		if json.Unmarshal(b, &r) != nil {
			return
		}
		_ = checkKeys(b)
		written, err := json.Marshal(r)
		if err != nil {
			return
		}
		if err := checkKeys(written); err != nil {
			t.Fatalf("a record as written: %v\n%s", err, written)
		}
	})
}
