package storetest

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

func testQuarantineList(t *testing.T, s *handle) {
	c := s.chain()
	recs := c.records(t, 9)
	q := []engine.QuarantineEntry{quarantineEntry(s.q(5), []byte("five")), quarantineEntry(s.q(2), []byte("two")), quarantineEntry(s.q(9), []byte("nine"))}
	commit(t, s, &engine.Batch{Audit: recs, Quarantine: q})
	equal(t, "quarantine", scanQuarantine(t, s), []engine.QuarantineEntry{q[1], q[0], q[2]})
	got, err := s.Quarantined(t.Context(), s.q(5))
	if err != nil {
		t.Fatalf("Quarantined(5): %v", err)
	}
	equal(t, "Quarantined(5)", normalizeEntry(got), q[0])
}

// testQuarantineResolve: on a single-owner store, resolving an id that is
// not open is not an error. A group's store refuses it (engine.SharedStore;
// group/a resolved entry that is not open fails the whole batch), so there
// the case resolves open entries only.
func testQuarantineResolve(t *testing.T, s *handle) {
	c := s.chain()
	q := []engine.QuarantineEntry{quarantineEntry(s.q(1), []byte("a")), quarantineEntry(s.q(2), []byte("b")), quarantineEntry(s.q(3), []byte("c"))}
	commit(t, s, &engine.Batch{Audit: c.records(t, 3), Quarantine: q})
	resolved := []uint64{2, 77} // a release may be retried
	if s.shared() {
		resolved = []uint64{s.q(2)}
	}
	commit(t, s, &engine.Batch{Audit: c.records(t, 1), Resolved: resolved})
	equal(t, "quarantine after resolving 2", scanQuarantine(t, s), []engine.QuarantineEntry{q[0], q[2]})
	if _, err := s.Quarantined(t.Context(), s.q(2)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Quarantined(resolved id) = %v, want ErrNotFound", err)
	}
	commit(t, s, &engine.Batch{Resolved: []uint64{s.q(1), s.q(3)}})
	if got := scanQuarantine(t, s); len(got) != 0 {
		t.Errorf("quarantine still lists %d entries after resolving all", len(got))
	}
}

func testQuarantineUnknown(t *testing.T, s *handle) {
	if _, err := s.Quarantined(t.Context(), s.q(1)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Quarantined on an empty store = %v, want ErrNotFound", err)
	}
	c := s.chain()
	commit(t, s, &engine.Batch{Audit: c.records(t, 2), Quarantine: []engine.QuarantineEntry{quarantineEntry(s.q(2), nil)}})
	for _, id := range []uint64{0, s.q(1), s.q(3), 1 << 63} {
		if _, err := s.Quarantined(t.Context(), id); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("Quarantined(%d) = %v, want ErrNotFound", id, err)
		}
	}
}

func testScanQuarantineStops(t *testing.T, s *handle) {
	c := s.chain()
	commit(t, s, &engine.Batch{Audit: c.records(t, 4), Quarantine: []engine.QuarantineEntry{
		quarantineEntry(s.q(1), nil), quarantineEntry(s.q(2), nil), quarantineEntry(s.q(3), nil), quarantineEntry(s.q(4), nil),
	}})
	stop := errors.New("stop here")
	var seen []uint64
	err := s.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		seen = append(seen, q.ID)
		if q.ID == s.q(2) {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Errorf("ScanQuarantine = %v, want the callback's error", err)
	}
	equal(t, "ids seen", seen, []uint64{s.q(1), s.q(2)})
}

func testPayloads(t *testing.T, s *handle) {
	every := make([]byte, 512)
	for i := range every {
		every[i] = byte(i) // every byte value, invalid UTF-8 included
	}
	big := make([]byte, 256<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	payloads := map[uint64][]byte{1: every, 2: {}, 3: nil, 4: big, 5: []byte(`{"payload_b64":"AA=="}`), 6: {0}}
	c := s.chain()
	b := &engine.Batch{Audit: c.records(t, len(payloads))}
	for pos, p := range payloads {
		b.Quarantine = append(b.Quarantine, quarantineEntry(s.q(pos), p))
	}
	commit(t, s, b)
	for pos, want := range payloads {
		got, err := s.Quarantined(t.Context(), s.q(pos))
		if err != nil {
			t.Fatalf("Quarantined(%d): %v", s.q(pos), err)
		}
		if !bytes.Equal(got.Payload, want) {
			t.Errorf("payload %d: got %d bytes, want %d bytes (first difference at %d)", pos, len(got.Payload), len(want), firstDiff(got.Payload, want))
		}
	}
	for _, q := range scanQuarantine(t, s) {
		if !bytes.Equal(q.Payload, payloads[q.ID-s.qbase]) {
			t.Errorf("scanned payload %d differs from what was written", q.ID)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
