package memory_test

import (
	"context"
	"fmt"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

func Example() {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()

	rec := engine.AuditRecord{Position: 1, Route: "meters", Topic: "plant/meter-3/energy", Outcome: "applied"}
	if err := engine.Seal(&rec, engine.Hash{}); err != nil {
		panic(err)
	}
	err := s.Commit(ctx, &engine.Batch{
		Keys:    []engine.KeyEntry{{Ordinal: 1, Key: engine.IDKey("meters", []string{"meter-3"}, "meter-3-000042")}},
		NextKey: 2,
		Audit:   []engine.AuditRecord{rec},
	})
	if err != nil {
		panic(err)
	}
	snap, err := s.Load(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(snap.Keys), "key, audit head at", snap.AuditHead.Position, "next key", snap.NextKey)
	// Output: 1 key, audit head at 1 next key 2
}
