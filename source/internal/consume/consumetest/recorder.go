package consumetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// Key identifies a test message: its payload's source_id and sequence.
type Key struct {
	Source string
	Seq    int64
}

// KeyOf reads m's Key, and fails the test when the payload has none.
func KeyOf(t testing.TB, m engine.Message) Key {
	var p struct {
		Source string `json:"source_id"`
		Seq    int64  `json:"sequence"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		t.Errorf("payload %q: %v", m.Payload, err)
	}
	return Key{p.Source, p.Seq}
}

// Keys are the keys of msgs, in order.
func Keys(t testing.TB, msgs []engine.Message) []Key {
	out := make([]Key, len(msgs))
	for i, m := range msgs {
		out[i] = KeyOf(t, m)
	}
	return out
}

// Seqs are the keys of source from sequence from to to.
func Seqs(source string, from, to int64) []Key {
	var out []Key
	for s := from; s <= to; s++ {
		out = append(out, Key{source, s})
	}
	return out
}

// FmtKeys prints ks, shortened past twelve.
func FmtKeys(ks []Key) string {
	if len(ks) > 12 {
		return fmt.Sprintf("%v … (%d)", ks[:12], len(ks))
	}
	return fmt.Sprint(ks)
}

// Recorder is a Processor that commits by recording: every call, and how
// often each key was committed. Hook, when set, runs first; an error from
// it fails the call with nothing recorded.
type Recorder struct {
	t    testing.TB
	Hook func(ctx context.Context, call int, msgs []engine.Message) error

	mu        sync.Mutex
	calls     [][]engine.Message // every call, failed ones included
	committed []engine.Message
	count     map[Key]int
}

// NewRecorder returns an empty Recorder that reports bad payloads to t.
func NewRecorder(t testing.TB) *Recorder { return &Recorder{t: t, count: map[Key]int{}} }

// Process records msgs, after Hook.
func (r *Recorder) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	r.mu.Lock()
	call := len(r.calls)
	r.calls = append(r.calls, append([]engine.Message(nil), msgs...))
	r.mu.Unlock()
	if r.Hook != nil {
		if err := r.Hook(ctx, call, msgs); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.committed = append(r.committed, m)
		r.count[KeyOf(r.t, m)]++
	}
	return make([]engine.Decision, len(msgs)), nil
}

// Committed returns the messages committed so far, in order.
func (r *Recorder) Committed() []engine.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]engine.Message(nil), r.committed...)
}

// Calls returns the batches of every call so far, failed ones included.
func (r *Recorder) Calls() [][]engine.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]engine.Message(nil), r.calls...)
}

// Count is how often k was committed.
func (r *Recorder) Count(k Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[k]
}

// Len is how many messages were committed.
func (r *Recorder) Len() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.committed))
}
