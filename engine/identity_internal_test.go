package engine

import (
	"hash/fnv"
	"testing"
)

// sourceTag is FNV-1a over the source's identity, never 0, and tells apart
// sources that a delimiter join would confuse.
func TestSourceTag(t *testing.T) {
	h := fnv.New64a()
	h.Write([]byte(sourceID("incidents", []string{"fd", "e1"})))
	if got, want := sourceTag("incidents", []string{"fd", "e1"}), h.Sum64(); got != want {
		t.Fatalf("sourceTag = %x, want FNV-1a %x", got, want)
	}
	if sourceTag("r", []string{"a|b", "c"}) == sourceTag("r", []string{"a", "b|c"}) {
		t.Fatal("two sources a join would confuse have one tag")
	}
	long := string(make([]byte, 300)) // past the stack buffer
	if sourceTag("r", []string{long}) == 0 || sourceTag("r", []string{long}) != sourceTag("r", []string{long}) {
		t.Fatal("a long source's tag is 0 or not stable")
	}
}
