package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
	"github.com/replayguard/replayguard/store/memory"
)

// rowStore is an embedded store whose row reads are counted, and fail
// while fail is set.
type rowStore struct {
	*embedded.Store
	loads, keyLoads atomic.Int64
	rowLoads        atomic.Int64 // entity scans, by State
	reread          atomic.Int64 // rows read that were found
	fail            atomic.Bool
}

func openRowStore(t *testing.T, dir string) *rowStore {
	t.Helper()
	s, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &rowStore{Store: s}
}

func (s *rowStore) Capabilities() engine.Capabilities {
	c := s.Store.Capabilities()
	c.Rows = s
	return c
}

func (s *rowStore) Load(ctx context.Context) (*engine.Snapshot, error) {
	s.loads.Add(1)
	return s.Store.Load(ctx)
}

func (s *rowStore) ScanEntities(ctx context.Context, fn func(engine.EntityState) error) error {
	s.rowLoads.Add(1)
	return s.Store.ScanEntities(ctx, fn)
}

func (s *rowStore) LoadKeys(ctx context.Context) (*engine.Snapshot, error) {
	s.keyLoads.Add(1)
	return s.Store.LoadKeys(ctx)
}

var errInjected = errors.New("injected read failure")

func (s *rowStore) ReadRows(ctx context.Context) (engine.RowTx, error) {
	tx, err := s.Store.ReadRows(ctx)
	if err != nil {
		return nil, err
	}
	return &countedTx{RowTx: tx, s: s}, nil
}

type countedTx struct {
	engine.RowTx
	s *rowStore
}

func (c *countedTx) Source(id string) (engine.SourceState, bool, error) {
	if c.s.fail.Load() {
		return engine.SourceState{}, false, errInjected
	}
	st, found, err := c.RowTx.Source(id)
	if found {
		c.s.reread.Add(1)
	}
	return st, found, err
}

func (c *countedTx) Entity(name string) (engine.EntityState, bool, error) {
	if c.s.fail.Load() {
		return engine.EntityState{}, false, errInjected
	}
	st, found, err := c.RowTx.Entity(name)
	if found {
		c.s.reread.Add(1)
	}
	return st, found, err
}

// On a store that reads rows one at a time, an engine that keeps only a
// few of them in memory, and is restarted now and then, decides as the
// model does: rows let go and read again are the rows committed.
func TestRowsReadAgainMatchAReferenceModel(t *testing.T) {
	seed, rng := propertySeed(t)
	var reread int64
	for round := 0; round < 30; round++ {
		opts := randomOptions(rng)
		opts.Routes = []engine.Route{incidentRoute}
		opts.CachedRows = 1 + rng.IntN(6)
		s := openRowStore(t, t.TempDir())
		open := func() *engine.Engine {
			e, err := engine.New(t.Context(), s, opts)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		e := open()
		checkModel(t, fmt.Sprintf("seed %d round %d (%d rows cached)", seed, round, opts.CachedRows), rng, opts,
			randomFeed(rng, 2+rng.IntN(10)), func() *engine.Engine { return e },
			func() { e.Close(); e = open() })
		e.Close()
		if n := s.loads.Load(); n != 0 {
			t.Fatalf("the engine loaded the whole store %d times", n)
		}
		// The rows the store counted, from the batches' NewRows, are the
		// rows it holds.
		ns, ne, err := s.CountRows(t.Context())
		snap, lerr := s.Store.Load(t.Context())
		if err != nil || lerr != nil || ns != len(snap.Sources) || ne != len(snap.Entities) {
			t.Fatalf("seed %d round %d: the store counts %d sources and %d entities, holds %d and %d (%v, %v)",
				seed, round, ns, ne, len(snap.Sources), len(snap.Entities), err, lerr)
		}
		if n := s.rowLoads.Load(); n != int64(stateReads) { // the checks at the end, not the decisions
			t.Fatalf("the entities were read %d times, want %d (by the checks' State and ReadStateUpTo)", n, stateReads)
		}
		reread += s.reread.Load()
	}
	if reread == 0 {
		t.Fatal("no row was ever read again: the cache was never trimmed")
	}
}

// A row read that fails fails its batch: nothing of it is committed, and
// the same batch passed again is decided on the committed rows.
func TestFailedRowReadDropsTheBatch(t *testing.T) {
	s := openRowStore(t, t.TempDir())
	opts := engine.Options{Routes: []engine.Route{incidentRoute}, CachedRows: 1}
	e, err := engine.New(t.Context(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	first := []engine.Message{
		inc("fd", "a", 1, 1, `"incident_id":"7","casualty_delta":3`),
		inc("fd", "b", 1, 1, `"incident_id":"7","casualty_delta":2`),
	}
	if _, err := e.Process(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	// a's rows were let go at the limit of one: the next batch reads them.
	next := []engine.Message{
		inc("fd", "a", 1, 2, `"incident_id":"7","casualty_delta":1`),
		inc("fd", "a", 1, 1, `"incident_id":"7","casualty_delta":3`), // a replay
	}
	s.fail.Store(true)
	if _, err := e.Process(t.Context(), next); !errors.Is(err, errInjected) {
		t.Fatalf("Process with a failed read = %v, want the read's error", err)
	}
	s.fail.Store(false)
	ds, err := e.Process(t.Context(), next)
	if err != nil {
		t.Fatal(err)
	}
	if got := ds[0].Outcome.String() + " " + ds[1].Outcome.String(); got != "applied duplicate" {
		t.Errorf("outcomes after the failed read = %s, want applied duplicate", got)
	}
	if got, want := stateJSON(t, e), `{"incident/7":{"casualties":6}}`; got != want {
		t.Errorf("state = %s, want %s", got, want)
	}
	if st := e.Stats(); st.Sources != 2 || st.Entities != 1 {
		t.Errorf("stats: %d sources, %d entities; want 2, 1", st.Sources, st.Entities)
	}
}

// An engine opened on a store of many sources loads none of them, and
// counts them all.
func TestStartLoadsNoRows(t *testing.T) {
	dir := t.TempDir()
	s := openRowStore(t, dir)
	opts := engine.Options{Routes: []engine.Route{incidentRoute}, CachedRows: 10}
	e, err := engine.New(t.Context(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []engine.Message
	for i := range 100 {
		msgs = append(msgs, inc("fd", fmt.Sprint(i), 1, 1, fmt.Sprintf(`"incident_id":"%d","casualty_delta":1`, i%40)))
	}
	if _, err := e.Process(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e, err = engine.New(t.Context(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if n := s.loads.Load(); n != 0 {
		t.Errorf("the engine loaded every row %d times", n)
	}
	if st := e.Stats(); st.Sources != 100 || st.Entities != 40 {
		t.Errorf("stats after a start: %d sources, %d entities; want 100, 40", st.Sources, st.Entities)
	}
	ds, err := e.Process(t.Context(), msgs[:3])
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if d.Outcome != engine.Duplicate {
			t.Errorf("delivery %d again after a start: %s, want duplicate", i, d.Outcome)
		}
	}
	if got := len(e.State()); got != 40 {
		t.Errorf("State holds %d entities, want 40", got)
	}
}

func stateJSON(t *testing.T, e *engine.Engine) string {
	t.Helper()
	b, err := json.Marshal(engine.StateJSON(e.State()))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAnEntityNothingWroteIsNeitherCountedNorShown: a message names an
// entity whose effect finds none of its paths (a unit with no status): the
// entity is not created, so what the engine counts and shows is what the
// store holds, before and after a restart, and the count does not grow
// each time the message comes again.
func TestAnEntityNothingWroteIsNeitherCountedNorShown(t *testing.T) {
	ctx := context.Background()
	opts := engine.Options{Routes: []engine.Route{incidentRoute}}
	msg := func(seq int64) engine.Message {
		return inc("fd", "e1", 1, seq, `"incident_id":1,"casualty_delta":1,"unit_id":"E7"`) // no unit_status
	}
	s, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(ctx, s, engine.Options{Routes: opts.Routes, CachedRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 5; seq++ { // the unit's row looked for again as the cache lets it go
		if _, err := e.Process(ctx, []engine.Message{msg(seq)}); err != nil {
			t.Fatal(err)
		}
	}
	before := e.Stats()
	e.Close()
	e2, err := engine.New(ctx, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	after := e2.Stats()
	e2.Close()
	if before.Entities != 1 || after.Entities != 1 {
		t.Fatalf("embedded: %d entities counted, %d after a restart; want the incident alone", before.Entities, after.Entities)
	}
	m, _ := engine.New(ctx, memory.New(), opts)
	defer m.Close()
	m.Process(ctx, []engine.Message{msg(1)})
	if st, _ := json.Marshal(engine.StateJSON(m.State())); string(st) != `{"incident/1":{"casualties":1}}` {
		t.Fatalf("memory: state %s", st)
	}
}

// The store counts a new row once: not for a batch whose commit failed,
// once when it is committed again, and once across batches written in
// one commit.
func TestNewRowsAreCountedOnce(t *testing.T) {
	ctx := context.Background()
	rs := openRowStore(t, t.TempDir())
	fs := &failingStore{Store: rs}
	e, err := engine.New(ctx, fs, engine.Options{Routes: []engine.Route{incidentRoute}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	msg := func(src string, seq int64, incident int) engine.Message {
		return inc("fd", src, 1, seq, fmt.Sprintf(`"incident_id":%d,"casualty_delta":1,"unit_id":%q,"unit_status":"enroute"`, incident, src))
	}
	fs.fail = true
	if _, err := e.Process(ctx, []engine.Message{msg("e1", 1, 1)}); err == nil {
		t.Fatal("the failed commit returned no error")
	}
	fs.fail = false
	if _, err := e.Process(ctx, []engine.Message{msg("e1", 1, 1)}); err != nil {
		t.Fatal(err)
	}
	// Held at the store, the batches behind the first wait for the
	// committer (four fit in its queue) and go in one commit; they share
	// rows, and have their own.
	fs.gate = make(chan struct{})
	var waits []func() ([]engine.Decision, error)
	for i, src := range []string{"e2", "e1", "e3", "e2", "e4"} {
		w, err := e.Submit(ctx, []engine.Message{msg(src, int64(2+i), 1+i%3)})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
	}
	close(fs.gate)
	for _, w := range waits {
		if _, err := w(); err != nil {
			t.Fatal(err)
		}
	}
	ns, ne, err := rs.CountRows(ctx)
	snap, lerr := rs.Store.Load(ctx)
	if err != nil || lerr != nil || ns != len(snap.Sources) || ne != len(snap.Entities) || ns != 4 || ne != 7 {
		t.Fatalf("the store counts %d sources and %d entities, holds %d and %d, want 4 and 7 (%v, %v)",
			ns, ne, len(snap.Sources), len(snap.Entities), err, lerr)
	}
}
