package report_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// group is two members' chains of a shared store, as a ChainScanner.
type group map[string][]engine.AuditRecord

func (g group) Chains(context.Context) ([]engine.Chain, error) {
	var out []engine.Chain
	for _, m := range []string{"a", "b"} {
		c := g[m]
		out = append(out, engine.Chain{Member: m, Head: engine.AuditHead{Position: c[len(c)-1].Position, Hash: c[len(c)-1].Hash}})
	}
	return out, nil
}

func (g group) ScanChain(_ context.Context, member string, from uint64, fn func(engine.AuditRecord) error) error {
	for _, r := range g[member] {
		if r.Position >= from {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// chain seals records as member's chain.
func chain(t *testing.T, member string, recs ...engine.AuditRecord) []engine.AuditRecord {
	var prev engine.Hash
	for i := range recs {
		r := &recs[i]
		r.Position, r.Member, r.Prev = uint64(i+1), member, prev
		h, err := engine.ChainHash(*r)
		if err != nil {
			t.Fatal(err)
		}
		r.Hash, prev = h, h
	}
	return recs
}

func rec(sec int, outcome, broker string, seq int64) engine.AuditRecord {
	return engine.AuditRecord{Time: start.Add(time.Duration(sec) * time.Second), Route: "incidents", Topic: "incidents/fire/e7",
		Source: []string{"fire", "e7"}, Epoch: "1", Sequence: &seq, Outcome: outcome, Broker: broker}
}

func TestChainsOfAGroup(t *testing.T) {
	// Member b holds a conflict at its position 2; member a releases it.
	// b's quarantine id is its number (2) shifted by 40 bits plus 2.
	release := rec(200, "duplicate", primary, 3)
	release.Ref, release.Operator = 2<<40|2, "duty officer"
	g := group{
		"a": chain(t, "a", rec(10, "applied", primary, 1), rec(70, "applied", primary, 2), release),
		"b": chain(t, "b", rec(20, "duplicate", primary, 1), rec(130, "conflict", standby, 3), rec(140, "malformed", standby, 4)),
	}
	recs, heads, err := report.Chains(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for r, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, fmt.Sprintf("%s%d", r.Member, r.Position))
	}
	if fmt.Sprint(order) != "[a1 b1 a2 b2 b3 a3]" {
		t.Fatalf("merged %v, want by time", order)
	}
	recs, _, _ = report.Chains(context.Background(), g, nil)
	rep, err := report.Build(recs, report.Options{Heads: heads})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("every member's chain is verified to its head", func(t *testing.T) {
		v := rep.Verification
		if !v.Intact || len(v.Chains) != 2 || v.Chains[0].Records != 3 || v.Chains[1].Records != 3 ||
			v.Chains[1].HeadHash != g["b"][2].Hash.String() {
			t.Fatalf("%+v", v)
		}
	})
	t.Run("a resolution from another member is matched to the held decision", func(t *testing.T) {
		q := rep.Quarantine
		if len(q) != 2 || q[0].ID != 2<<40|2 || q[0].Status != "released" || q[0].Resolved.Member != "a" ||
			q[1].ID != 2<<40|3 || q[1].Status != "open" {
			t.Fatalf("%+v", q)
		}
	})
	t.Run("broker changes are per member", func(t *testing.T) {
		bc := rep.BrokerChanges
		if len(bc) != 3 || bc[2].Member != "b" || bc[2].To != standby || bc[2].Position != 2 {
			t.Fatalf("%+v", bc)
		}
	})
	t.Run("a member's chain with a hole is broken, naming the member", func(t *testing.T) {
		g2 := group{"a": g["a"], "b": append([]engine.AuditRecord{g["b"][0]}, g["b"][2])}
		recs, heads, _ := report.Chains(context.Background(), g2, nil)
		rep, err := report.Build(recs, report.Options{Heads: heads})
		if err != nil || rep.Verification.Intact || rep.Verification.Chains[0].Broken != "" || rep.Verification.Chains[1].Broken == "" {
			t.Fatalf("%+v %v", rep.Verification, err)
		}
	})
}
