package memory

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The copy functions name every field that shares memory (pointers, slices,
// maps); a new one must be added to them.
func TestCopiesCoverEveryReference(t *testing.T) {
	known := map[string]string{
		"AuditRecord":     "Source Sequence Gap Effects",
		"SourceState":     "Source Epochs Seen Sparkplug",
		"EpochWindow":     "Bitmap Gaps",
		"EntityState":     "Fields",
		"QuarantineEntry": "Payload",
		"KeyEntry":        "",
		"FieldValue":      "",
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[engine.AuditRecord](), reflect.TypeFor[engine.SourceState](), reflect.TypeFor[engine.EpochWindow](),
		reflect.TypeFor[engine.EntityState](), reflect.TypeFor[engine.QuarantineEntry](), reflect.TypeFor[engine.KeyEntry](),
		reflect.TypeFor[engine.FieldValue](),
	} {
		var refs []string
		for f := range typ.Fields() {
			if slices.Contains([]reflect.Kind{reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface}, f.Type.Kind()) {
				refs = append(refs, f.Name)
			}
		}
		if got := strings.Join(refs, " "); got != known[typ.Name()] {
			t.Errorf("engine.%s shares memory through %q; copy.go handles %q", typ.Name(), got, known[typ.Name()])
		}
	}
}
