package redis

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// Every member handle owns three tasks: a test that forgets Close leaks them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var groups atomic.Int64

// group is one consumer group: a fresh prefix on a server.
type group struct {
	srv    *testbroker.Redis
	prefix string
}

func newGroup(srv *testbroker.Redis) *group {
	return &group{srv: srv, prefix: fmt.Sprintf("{g%d}:", groups.Add(1))}
}

// open opens a handle for member ("" read-only) and closes it at cleanup.
func (g *group) open(t *testing.T, member string, opts ...func(*Options)) (*Store, error) {
	t.Helper()
	o := Options{URL: g.srv.URL(), Member: member, Prefix: g.prefix, LeaseTTL: 3 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	s, err := Open(t.Context(), o)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, nil
}

func (g *group) must(t *testing.T, member string, opts ...func(*Options)) *Store {
	t.Helper()
	s, err := g.open(t, member, opts...)
	if err != nil {
		t.Fatalf("open member %q: %v", member, err)
	}
	return s
}

// do sends one command to the group's server.
func (g *group) do(t *testing.T, args ...string) any {
	t.Helper()
	v, err := g.srv.Do(args...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return v
}

func hashOf(s string) engine.Hash { return sha256.Sum256([]byte(s)) }

// records returns n sealed records of member following head.
func records(t *testing.T, member string, head engine.AuditHead, n int) []engine.AuditRecord {
	t.Helper()
	out := make([]engine.AuditRecord, n)
	for i := range out {
		pos := head.Position + 1
		out[i] = engine.AuditRecord{Position: pos, Time: time.Unix(1_700_000_000, int64(pos)).UTC(), Route: "meters",
			Topic: "plant/m1/energy", Source: []string{"m1"}, ID: fmt.Sprintf("id-%d", pos), Outcome: "applied", Member: member,
			Key: hashOf(fmt.Sprint("key", member, pos))}
		if err := engine.Seal(&out[i], head.Hash); err != nil {
			t.Fatal(err)
		}
		head = engine.AuditHead{Position: pos, Hash: out[i].Hash}
	}
	return out
}

// batchAfter returns a batch of n records, each with a key, following s's head.
func batchAfter(t *testing.T, s *Store, n int) *engine.Batch {
	t.Helper()
	head, err := s.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b := &engine.Batch{Audit: records(t, s.Member(), head, n)}
	now := time.Now().UnixNano()
	for i, r := range b.Audit {
		b.Keys = append(b.Keys, engine.KeyEntry{Ordinal: uint64(now) + uint64(i), Key: r.Key, Digest: hashOf(r.ID), Time: now})
	}
	return b
}

// update runs one Update and returns how many times it called decide.
func update(ctx context.Context, s *Store, r *engine.Reads, decide func(rows *engine.Rows) (*engine.Batch, error)) (int, error) {
	calls := 0
	err := s.Update(ctx, r, func(rows *engine.Rows) (*engine.Batch, error) {
		calls++
		return decide(rows)
	})
	return calls, err
}

// chainOf reads member's whole chain.
func chainOf(t *testing.T, s *Store, member string) []engine.AuditRecord {
	t.Helper()
	var out []engine.AuditRecord
	if err := s.ScanChain(t.Context(), member, 1, func(r engine.AuditRecord) error { out = append(out, r); return nil }); err != nil {
		t.Fatalf("scan chain %q: %v", member, err)
	}
	return out
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want one wrapping %v", err, target)
	}
}

var meters = engine.Route{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
	Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}

// meterMsg is an id-route message for meter m.
func meterMsg(m int, id string) engine.Message {
	return engine.Message{Topic: fmt.Sprintf("plant/m%d/energy", m), Payload: fmt.Appendf(nil, `{"msgId":%q,"kwh":1.5}`, id)}
}

func newEngine(t testing.TB, s engine.Store) *engine.Engine {
	t.Helper()
	e, err := engine.New(context.Background(), s, engine.Options{Routes: []engine.Route{meters}})
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}
