package engine_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// TestChainLinkReadsPastRetention reads the links of a member's chain that
// audit retention trimmed: at the base the base's link, below it archived
// (the store cannot show it), above it the stored record's.
func TestChainLinkReadsPastRetention(t *testing.T) {
	ctx := context.Background()
	m, err := memory.NewGroup(0, 0).Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := engine.New(ctx, m, engine.Options{Routes: []engine.Route{meterRoute}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := e.Process(ctx, []engine.Message{meterReading(i)}); err != nil {
			t.Fatal(err)
		}
	}
	e.Close()
	var recs []engine.AuditRecord
	if err := m.ScanChain(ctx, "m1", 1, func(r engine.AuditRecord) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	link := func(r engine.AuditRecord) engine.AuditHead {
		return engine.AuditHead{Position: r.Position, Hash: r.Hash}
	}
	if err := m.TrimChain(ctx, "m1", 6, link(recs[4])); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pos      uint64
		want     engine.AuditHead
		archived bool
	}{{5, link(recs[4]), false}, {3, engine.AuditHead{}, true}, {8, link(recs[7]), false}} {
		got, archived, err := engine.ChainLink(ctx, m, m, "m1", c.pos)
		if err != nil || got != c.want || archived != c.archived {
			t.Errorf("position %d: %+v archived %v, %v; want %+v archived %v", c.pos, got, archived, err, c.want, c.archived)
		}
	}
	if _, _, err := engine.ChainLink(ctx, m, nil, "m1", 3); err == nil {
		t.Error("position 3 read without the chain's base: want ErrNoRecord")
	}
}
