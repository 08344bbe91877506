package storetest

import (
	"reflect"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The case of the members' audit chains (engine.ChainScanner).

func testSharedChains(t *testing.T, p *place) {
	a, b := p.handle(t, "member-a"), p.handle(t, "member-b")
	var ca, cb chain
	for range 3 {
		commit(t, a, &engine.Batch{Audit: memberRecords(t, &ca, "member-a", 2)})
		commit(t, b, &engine.Batch{Audit: memberRecords(t, &cb, "member-b", 3)})
	}
	chains, err := a.Chains(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Chain{{Member: "member-a", Head: ca.head}, {Member: "member-b", Head: cb.head}}
	if !reflect.DeepEqual(chains, want) {
		t.Fatalf("Chains = %+v, want %+v", chains, want)
	}
	for _, m := range []struct {
		s    *handle
		name string
		n    uint64
	}{{a, "member-a", 6}, {b, "member-b", 9}} {
		var got []engine.AuditRecord
		if err := a.ScanChain(t.Context(), m.name, 2, func(r engine.AuditRecord) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if uint64(len(got)) != m.n-1 || got[0].Position != 2 || got[len(got)-1].Position != m.n {
			t.Fatalf("ScanChain(%s, 2) read %d records", m.name, len(got))
		}
		for _, r := range got {
			if r.Member != m.name {
				t.Fatalf("chain %s holds a record of %q", m.name, r.Member)
			}
		}
		if h, err := m.s.Head(t.Context()); err != nil || h.Position != m.n {
			t.Fatalf("Head of %s = %+v, %v", m.name, h, err)
		}
	}
}
