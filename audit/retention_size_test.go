package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// TestRetentionBoundsTheEmbeddedStore feeds a steady stream of decisions
// through the engine into an embedded store, 1000 to a batch, with
// retention keeping 50000 records, applied every 50000 decisions. bbolt
// never shrinks its file but reuses the pages a trim frees, so the file
// must stop growing once the first trims have freed pages. 200000
// decisions by default; REPLAYGUARD_RETENTION_DECISIONS=2000000 for the
// long run.
func TestRetentionBoundsTheEmbeddedStore(t *testing.T) {
	total := 200_000
	if v := os.Getenv("REPLAYGUARD_RETENTION_DECISIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 200_000 {
			t.Fatalf("REPLAYGUARD_RETENTION_DECISIONS=%q: want a count of at least 200000", v)
		}
		total = n
	}
	const keep, every, batch = 50_000, 50_000, 1000
	dir, archive := t.TempDir(), t.TempDir()
	// NoSync: the fsync of each commit changes nothing in how pages are freed and reused.
	st, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := engine.New(t.Context(), st, engine.Options{Routes: meters, MaxEntries: keep})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := audit.NewRetention(st, audit.RetentionOptions{Archive: archive, MaxRecords: keep,
		Head: func(ctx context.Context) (uint64, error) { return e.Stats().Position, nil }})
	if err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, embedded.FileName))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	msgs := make([]engine.Message, batch)
	var sizes []int64
	for done := 0; done < total; {
		for i := range msgs {
			msgs[i] = engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m-%d","kwh":0.25}`, done+i)}
		}
		if _, err := e.Process(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
		if done += batch; done%every == 0 {
			if _, err := r.Once(t.Context()); err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, size())
			t.Logf("after %7d decisions: store file %6.1f MiB", done, float64(size())/(1<<20))
		}
	}
	base, err := st.AuditBase(t.Context())
	if err != nil || base.Position != uint64(total-keep) {
		t.Fatalf("AuditBase = %v, %v; want %d", base, err, total-keep)
	}
	plateau := sizes[2] // by the third pass the first trims' pages are free for reuse
	for i, s := range sizes[3:] {
		if s > plateau {
			t.Errorf("after %d decisions the store file grew to %d bytes, above the %d of the third pass", (i+4)*every, s, plateau)
		}
	}
	snap, err := st.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	v, err := audit.VerifyWithArchive(t.Context(), archive, st, snap.AuditHead)
	if err != nil || v.Archive.Records+v.Stored != uint64(total) {
		t.Fatalf("VerifyWithArchive = %+v, %v; want %d records in one chain", v, err, total)
	}
	var archived int64
	files, _ := filepath.Glob(filepath.Join(archive, "*.jsonl.gz"))
	for _, f := range files {
		fi, _ := os.Stat(f)
		archived += fi.Size()
	}
	t.Logf("archive: %d segments, %.1f MiB for %d records", len(files), float64(archived)/(1<<20), v.Archive.Records)
}
