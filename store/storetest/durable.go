package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// lockWait bounds how long a second Open of a held directory may take to fail.
const lockWait = 3 * time.Second

// The cases of Features.Durable: what was committed outlives the handle.

func testDurable(t *testing.T, p *place) {
	s := p.first(t)
	c := s.chain()
	commit(t, s, s.fullBatch(t, &c, 1))
	commit(t, s, s.bulk(t, c.records(t, 2)))
	want := readState(t, s)

	s = p.reopen(t, s)
	equal(t, "state after reopening", readState(t, s), want)
	commit(t, s, &engine.Batch{Audit: c.records(t, 1), Keys: s.keys(9, 9), NextKey: 10})
	if got := load(t, s).AuditHead; got != c.head {
		t.Errorf("head after a commit on the reopened store = %+v, want %+v", got, c.head)
	}
	closeStore(t, s)
}

func testDurableFailed(t *testing.T, p *place) {
	s := p.first(t)
	c := s.chain()
	commit(t, s, s.fullBatch(t, &c, 1))
	want := readState(t, s)
	cc := c
	cc.records(t, 1)
	if err := s.Commit(t.Context(), s.bulk(t, cc.records(t, 1))); !errors.Is(err, engine.ErrAuditGap) {
		t.Fatalf("Commit with a gap = %v, want ErrAuditGap", err)
	}
	equal(t, "state after reopening", readState(t, p.reopen(t, s)), want)
}

func testDurableTrim(t *testing.T, p *place) {
	s := p.first(t)
	tr := s.caps.Trim
	all := trimmedLog(t, s)
	if err := tr.TrimAudit(t.Context(), 180, baseOf(all[178])); err != nil {
		t.Fatalf("TrimAudit: %v", err)
	}
	s = p.reopen(t, s)
	if b, err := s.caps.Trim.AuditBase(t.Context()); err != nil || b != baseOf(all[178]) {
		t.Fatalf("AuditBase after reopening = %v, %v; want position 179", b, err)
	}
	if got := scanAudit(t, s, 0); len(got) != 121 || got[0].Position != 180 {
		t.Fatalf("after reopening the log holds %d records from %d; want 121 from 180", len(got), got[0].Position)
	}
	closeStore(t, s)
}

func testDurableLocked(t *testing.T, p *place) {
	s := p.first(t)
	start := time.Now()
	other, err := p.open("")
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
	p.first(t) // free again once closed
}
