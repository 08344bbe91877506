package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// exported returns the JSONL export of a store holding n decisions, the
// same bytes at each call (the records' time is fixed).
func exported(t testing.TB, n int) (*memory.Store, []string) {
	t.Helper()
	st := memory.New()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	e, err := engine.New(context.Background(), st, engine.Options{Routes: []engine.Route{{
		Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}},
		Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	var msgs []engine.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, engine.Message{Topic: "plant/m1/energy", Payload: []byte(fmt.Sprintf(`{"msgId":"m-%d","kwh":0.25}`, i%(n-1)))})
	}
	if _, err := e.Process(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if got, err := audit.Export(context.Background(), st, 1, &buf); err != nil || got != uint64(n) {
		t.Fatalf("exported %d records, err %v; want %d", got, err, n)
	}
	return st, strings.Split(strings.TrimSpace(buf.String()), "\n")
}

func TestVerifyAcceptsAnIntactLog(t *testing.T) {
	st, lines := exported(t, 6)
	if n, err := audit.VerifyJSONL(strings.NewReader(strings.Join(lines, "\n"))); err != nil || n != 6 {
		t.Fatalf("VerifyJSONL = %d, %v", n, err)
	}
	snap, _ := st.Load(context.Background())
	if n, err := audit.Verify(context.Background(), st, snap.AuditHead); err != nil || n != 6 {
		t.Fatalf("Verify = %d, %v", n, err)
	}
}

func TestVerifyFindsTheFirstBadRecord(t *testing.T) {
	alter := func(lines []string) []string {
		var r map[string]any
		json.Unmarshal([]byte(lines[2]), &r)
		r["outcome"] = "conflict" // an apply turned into a hold
		b, _ := json.Marshal(r)
		lines[2] = string(b)
		return lines
	}
	cases := []struct {
		name   string
		tamper func([]string) []string
		at     uint64
	}{
		{"an altered record breaks the chain at itself", func(l []string) []string {
			return append(l[:3], append([]string{strings.Replace(l[3], `"outcome":"applied"`, `"outcome":"duplicate"`, 1)}, l[4:]...)...)
		}, 4},
		{"an altered outcome is caught even when re-marshalled", alter, 3},
		{"a removed record leaves a hole", func(l []string) []string { return append(l[:2], l[3:]...) }, 3},
		{"reordered records are caught", func(l []string) []string { l[1], l[2] = l[2], l[1]; return l }, 2},
		{"a record whose hash was recomputed still breaks its successor", func(l []string) []string {
			var r engine.AuditRecord
			json.Unmarshal([]byte(l[1]), &r)
			r.Reason = "edited"
			h, _ := engine.ChainHash(r)
			r.Hash = h
			b, _ := json.Marshal(r)
			l[1] = string(b)
			return l
		}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, lines := exported(t, 6)
			_, err := audit.VerifyJSONL(strings.NewReader(strings.Join(c.tamper(lines), "\n")))
			var broken *audit.BrokenError
			if !errors.As(err, &broken) || broken.Position != c.at {
				t.Fatalf("got %v, want a break at position %d", err, c.at)
			}
			if !errors.Is(err, audit.ErrBroken) {
				t.Fatal("a BrokenError does not match ErrBroken")
			}
		})
	}
}

func TestVerifyCatchesARemovedTailAgainstTheHead(t *testing.T) {
	st, _ := exported(t, 6)
	snap, _ := st.Load(context.Background())
	head := snap.AuditHead
	head.Position++ // the store's head says one more record than the log holds
	if _, err := audit.Verify(context.Background(), st, head); !errors.Is(err, audit.ErrBroken) {
		t.Fatalf("got %v, want a broken chain", err)
	}
}

// pre-operator.jsonl is an export written before audit records could name
// an operator: six records with a release and a discard.
func TestAnExportFromBeforeOperatorsStillVerifies(t *testing.T) {
	raw, err := os.ReadFile("testdata/pre-operator.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := audit.VerifyJSONL(bytes.NewReader(raw)); err != nil || n != 6 {
		t.Fatalf("verify: %d records, %v", n, err)
	}
	for i, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var r engine.AuditRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		got, err := engine.AppendRecordJSON(nil, &r)
		if err != nil || !bytes.Equal(got, line) {
			t.Fatalf("record %d re-encodes differently:\n got %s\nwant %s", i+1, got, line)
		}
	}
}

// TestAnExportThatBeginsAfterPositionOneVerifiesFromItsFirstRecord: an
// export of a store trimmed by retention (or from a later position) links
// its first record to what the file does not hold; it verifies from there,
// and says where it begins.
func TestAnExportThatBeginsAfterPositionOneVerifiesFromItsFirstRecord(t *testing.T) {
	_, lines := exported(t, 6)
	n, starts, err := audit.VerifyJSONLChains(strings.NewReader(strings.Join(lines[2:], "\n")))
	if err != nil || n != 4 || starts[""] != 3 {
		t.Fatalf("an export from position 3: %d records, starts %v, %v; want 4 from 3", n, starts, err)
	}
	tampered := append([]string{lines[2]}, lines[4:]...)
	if _, _, err := audit.VerifyJSONLChains(strings.NewReader(strings.Join(tampered, "\n"))); !errors.Is(err, audit.ErrBroken) {
		t.Fatalf("an export from position 3 with position 4 removed: %v, want broken", err)
	}
}
