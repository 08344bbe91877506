package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// flaky fails the Update calls it is told to, after deciding: a write that
// never reached the store.
type flaky struct {
	sharedBackend
	fail int // Update calls left to fail
}

type sharedBackend interface {
	engine.SharedStore
	engine.QuarantineScanner
}

// Capabilities declares the wrapper in the store's place.
func (f *flaky) Capabilities() engine.Capabilities {
	c := f.sharedBackend.Capabilities()
	c.Shared = f
	return c
}

var errWrite = errors.New("the write did not reach the store")

func (f *flaky) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if f.fail > 0 {
		f.fail--
		if _, err := decide(&engine.Rows{}); err != nil {
			return err
		}
		return errWrite
	}
	return f.sharedBackend.Update(ctx, r, decide)
}

func meterReading(i int) engine.Message {
	return engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":0.25}`, i)}
}

func TestASharedBatchThatFailedIsDecidedAgain(t *testing.T) {
	ctx := context.Background()
	g := memory.NewGroup(0, 0)
	m, err := g.Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	st := &flaky{sharedBackend: m}
	e, err := engine.New(ctx, st, engine.Options{Routes: []engine.Route{meterRoute}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Process(ctx, []engine.Message{meterReading(1)}); err != nil {
		t.Fatal(err)
	}
	st.fail = 1
	if _, err := e.Process(ctx, []engine.Message{meterReading(2), meterReading(1)}); !errors.Is(err, errWrite) {
		t.Fatalf("Process = %v, want the store's error", err)
	}
	ds, err := e.Process(ctx, []engine.Message{meterReading(2), meterReading(1)})
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Outcome != engine.Applied || ds[1].Outcome != engine.Duplicate || ds[0].Position != 2 {
		t.Fatalf("decided again: %+v", ds)
	}
	res, err := audit.VerifyChains(ctx, m, nil)
	if err != nil || len(res) != 1 || res[0].Records != 3 {
		t.Fatalf("chains %+v, %v: want one intact chain of 3 records", res, err)
	}
	if st, err := e.ReadState(ctx); err != nil || len(st) != 1 || st[0].Fields["kwh"].Num != "0.5" {
		t.Fatalf("state %+v, %v: want 0.5 kWh", st, err)
	}
}

func TestEveryRecordOfASharedStoreNamesItsMember(t *testing.T) {
	ctx := context.Background()
	g := memory.NewGroup(0, 0)
	m, _ := g.Open("plant-a-1")
	e, err := engine.New(ctx, m, engine.Options{Routes: []engine.Route{meterRoute}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	bad := engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-9","kwh":"x"}`)}
	ds, err := e.Process(ctx, []engine.Message{meterReading(1), bad})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Discard(ctx, m.QuarantineBase()+ds[1].Position, "bench noise", "j.doe"); err != nil {
		t.Fatalf("discard by the group-unique id: %v", err)
	}
	n := 0
	m.ScanAudit(ctx, 1, func(r engine.AuditRecord) error {
		n++
		if r.Member != "plant-a-1" {
			t.Errorf("record %d names member %q", r.Position, r.Member)
		}
		return nil
	})
	if n != 3 || e.Member() != "plant-a-1" {
		t.Fatalf("%d records, member %q", n, e.Member())
	}
}
