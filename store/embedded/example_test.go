package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "replayguard-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		panic(err)
	}
	rec := engine.AuditRecord{Position: 1, Route: "meters", Topic: "plant/meter-3/energy", Outcome: "applied"}
	if err := engine.Seal(&rec, engine.Hash{}); err != nil {
		panic(err)
	}
	err = s.Commit(ctx, &engine.Batch{
		Keys:    []engine.KeyEntry{{Ordinal: 1, Key: engine.IDKey("meters", []string{"meter-3"}, "meter-3-000042")}},
		NextKey: 2,
		Audit:   []engine.AuditRecord{rec},
	})
	if err != nil {
		panic(err)
	}

	// One writer at a time: a second open of the directory fails.
	if _, err := embedded.Open(dir, embedded.Options{}); errors.Is(err, engine.ErrLocked) {
		fmt.Println("locked while open")
	}
	if err := s.Close(); err != nil {
		panic(err)
	}

	// Read commands open the store read-only once the writer has let go.
	r, err := embedded.Open(dir, embedded.Options{ReadOnly: true})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	err = r.ScanAudit(ctx, 1, func(rec engine.AuditRecord) error {
		fmt.Println(rec.Position, rec.Topic, rec.Outcome)
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// locked while open
	// 1 plant/meter-3/energy applied
}
