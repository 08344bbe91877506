package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/memory"
)

// TestRetentionGoesOnAfterAFailoverTheMemberRecoveredFromItsJournal: a
// member's chain is archived with a small max_records; its store fails
// over to a replica that lacks the last commits and the trims that
// followed them, so the archive holds segments of positions the promoted
// store lost; the member decides them again from its journal. Retention
// must go on (the lost segments moved aside, and kept), and the archive
// and the store verify as one chain.
func TestRetentionGoesOnAfterAFailoverTheMemberRecoveredFromItsJournal(t *testing.T) {
	ctx := t.Context()
	g := memory.NewGroup(0, 0)
	m, err := g.Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(ctx, m, engine.Options{Routes: meters, StoreName: "memory", Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); m.Close(); j.Close() })
	next := 0
	decide := func(n int) {
		t.Helper()
		for ; n > 0; n -= 10 {
			msgs := make([]engine.Message, 10)
			for i := range msgs {
				msgs[i] = engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":0.25}`, next)}
				next++
			}
			if _, err := e.Process(ctx, msgs); err != nil {
				t.Fatal(err)
			}
		}
	}
	archive := t.TempDir()
	ro, err := g.Open("")
	if err != nil {
		t.Fatal(err)
	}
	r, err := audit.NewChainRetention(m, audit.RetentionOptions{Archive: archive, Member: "m1", MaxRecords: 50, SegmentRecords: 20,
		Head: func(context.Context) (uint64, error) { return e.Stats().Position, nil }})
	if err != nil {
		t.Fatal(err)
	}
	decide(150)
	once(t, r) // archives 1..100
	replica := g.Checkpoint()
	decide(150)
	once(t, r) // archives 101..250: the replica lacks them, and 151..300
	g.FailOver(replica)
	if err := e.CheckStore(ctx); err != nil {
		t.Fatalf("the member did not recover what the store lost from its journal: %v", err)
	}
	decide(100)
	res, err := r.Once(ctx)
	if err != nil {
		t.Fatalf("retention after the failover: %v", err)
	}
	head := e.Stats().Position
	if res.Base.Position != head-50 {
		t.Errorf("retention after the failover trimmed up to %d, want %d (the head %d less max_records)", res.Base.Position, head-50, head)
	}
	v, err := audit.VerifyChainsWithArchive(ctx, archive, ro, ro)
	if err != nil {
		t.Fatalf("audit verify --archive after the failover: %v", err)
	}
	if len(v) != 1 || v[0].Head.Position != head || v[0].Archive.Records+v[0].Stored != head {
		t.Errorf("audit verify --archive: %+v, want one chain of %d records", v, head)
	}
	// The segments of the records the store lost are kept, out of the
	// chain's way.
	entries, err := os.ReadDir(audit.ChainDir(archive, "m1"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, d := range entries {
		if d.IsDir() && strings.HasPrefix(d.Name(), "lost-") {
			files, err := os.ReadDir(filepath.Join(audit.ChainDir(archive, "m1"), d.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				kept = append(kept, f.Name())
			}
		}
	}
	if want := audit.ManifestName(141, 160); !strings.Contains(strings.Join(kept, " "), want) {
		t.Errorf("the segments the store lost, kept aside: %v, want among them %s", kept, want)
	}
}
