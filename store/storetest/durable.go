package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// lockWait bounds how long a second Open of a held directory may take to fail.
const lockWait = 3 * time.Second

// RunDurable runs the conformance suite plus the durability tests for a
// backend that keeps its data in a directory. open opens the store in dir
// (creating it when empty) and returns the error of a failed open unchanged;
// it should register a t.Cleanup that closes a store it opened, ignoring the
// error.
func RunDurable(t *testing.T, open func(t *testing.T, dir string) (engine.Store, error)) {
	t.Helper()
	must := func(t *testing.T, dir string) Backend {
		t.Helper()
		s, err := open(t, dir)
		if err != nil {
			t.Fatalf("open %s: %v", dir, err)
		}
		b, ok := s.(Backend)
		if !ok {
			t.Fatalf("%T does not implement engine.AuditScanner and engine.QuarantineScanner", s)
		}
		return b
	}
	Run(t, func(t *testing.T) engine.Store { return must(t, t.TempDir()) })

	t.Run("committed data survives close and reopen", func(t *testing.T) {
		dir := t.TempDir()
		s := must(t, dir)
		var c chain
		commit(t, s, fullBatch(t, &c, 1))
		commit(t, s, bulk(t, c.records(t, 2)))
		want := readState(t, s)
		closeStore(t, s)

		s = must(t, dir)
		equal(t, "state after reopening", readState(t, s), want)
		commit(t, s, &engine.Batch{Audit: c.records(t, 1), Keys: keyEntries(9, 9), NextKey: 10})
		if got := load(t, s).AuditHead; got != c.head {
			t.Errorf("head after a commit on the reopened store = %+v, want %+v", got, c.head)
		}
		closeStore(t, s)
	})

	t.Run("a failed commit leaves nothing behind after reopen", func(t *testing.T) {
		dir := t.TempDir()
		s := must(t, dir)
		var c chain
		commit(t, s, fullBatch(t, &c, 1))
		want := readState(t, s)
		cc := c
		cc.records(t, 1)
		if err := s.Commit(t.Context(), bulk(t, cc.records(t, 1))); !errors.Is(err, engine.ErrAuditGap) {
			t.Fatalf("Commit with a gap = %v, want ErrAuditGap", err)
		}
		closeStore(t, s)
		equal(t, "state after reopening", readState(t, must(t, dir)), want)
	})

	t.Run("a trimmed audit log keeps its base after reopen", func(t *testing.T) {
		dir := t.TempDir()
		s := must(t, dir)
		tr := trimmer(t, s)
		all := trimmedLog(t, s)
		if err := tr.TrimAudit(t.Context(), 180, baseOf(all[178])); err != nil {
			t.Fatalf("TrimAudit: %v", err)
		}
		closeStore(t, s)
		s = must(t, dir)
		if b, err := s.(engine.AuditTrimmer).AuditBase(t.Context()); err != nil || b != baseOf(all[178]) {
			t.Fatalf("AuditBase after reopening = %v, %v; want position 179", b, err)
		}
		if got := scanAudit(t, s, 0); len(got) != 121 || got[0].Position != 180 {
			t.Fatalf("after reopening the log holds %d records from %d; want 121 from 180", len(got), got[0].Position)
		}
		closeStore(t, s)
	})

	t.Run("a second open of a held directory fails with ErrLocked", func(t *testing.T) {
		dir := t.TempDir()
		s := must(t, dir)
		start := time.Now()
		other, err := open(t, dir)
		if !errors.Is(err, engine.ErrLocked) {
			if other != nil {
				_ = other.Close()
			}
			t.Fatalf("second open = %v, want ErrLocked", err)
		}
		if d := time.Since(start); d > lockWait {
			t.Errorf("second open took %v to fail, want under %v", d, lockWait)
		}
		closeStore(t, s)
		must(t, dir) // free again once closed
	})
}

func closeStore(t *testing.T, s engine.Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
