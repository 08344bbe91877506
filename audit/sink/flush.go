package sink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Flush delivers, on the calling goroutine, what every sink can up to the
// current head of every chain it is given before ctx ends, each sink on
// its own. It returns ErrUndelivered naming the sinks left behind; their
// cursors keep the rest.
func (s *Set) Flush(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(s.sinks))
	heads := s.givenHeads()
	for i, r := range s.sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			backoff := s.opts.MinBackoff
			for {
				err := s.catchUp(ctx, r, nil)
				if r.behind(heads) == "" || ctx.Err() != nil || err == nil {
					break
				}
				s.sleep(ctx, nil, backoff)
				backoff = min(2*backoff, s.opts.MaxBackoff)
			}
			if b := r.behind(heads); b != "" {
				errs[i] = fmt.Errorf("%w: sink %s delivered %s", ErrUndelivered, r.Name, b)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// FlushUntilIdle is Flush for as long as the sinks make progress: it
// gives up once no sink delivered a record for idle, or ctx ends. A sink
// that is slow but moving is waited for to the end; one that is down
// holds it idle for at most idle.
func (s *Set) FlushUntilIdle(ctx context.Context, idle time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.cancelWhenIdle(ctx, cancel, idle)
	}()
	err := s.Flush(ctx)
	cancel()
	<-watched
	return err
}

// cancelWhenIdle calls cancel once the sinks delivered nothing for idle,
// checking ten times per idle period, and returns then or when ctx ends.
func (s *Set) cancelWhenIdle(ctx context.Context, cancel context.CancelFunc, idle time.Duration) {
	tick := time.NewTicker(max(idle/10, time.Millisecond))
	defer tick.Stop()
	last, moved := s.progress(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if p := s.progress(); p != last {
				last, moved = p, now
			} else if now.Sub(moved) >= idle {
				cancel()
				return
			}
		}
	}
}

// progress counts the records every sink delivered so far: it moves with
// any sink's cursor.
func (s *Set) progress() uint64 {
	var n uint64
	for _, r := range s.sinks {
		n += r.delivered.Load()
	}
	return n
}

// givenHeads are the heads of the chains given now.
func (s *Set) givenHeads() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.chains))
	for _, c := range s.chains {
		out[c] = s.heads[c]
	}
	return out
}

// behind says which chains the sink has not delivered up to heads: ""
// when none.
func (r *runner) behind(heads map[string]uint64) string {
	var out []string
	for _, chain := range slices.Sorted(maps.Keys(heads)) {
		c, h := r.cursor(chain), heads[chain]
		switch {
		case c >= h:
		case chain == "":
			out = append(out, fmt.Sprintf("up to %d of %d", c, h))
		default:
			out = append(out, fmt.Sprintf("member %s's chain up to %d of %d", chain, c, h))
		}
	}
	return strings.Join(out, ", ")
}

// Close closes every exporter.
func (s *Set) Close(ctx context.Context) error {
	var errs []error
	for _, r := range s.sinks {
		if err := r.Exporter.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("audit sink %s: %w", r.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Status is one sink's delivery state.
type Status struct {
	Name string
	// Cursor is the sink's cursor on the member's own chain
	// (Options.Member; a single-owner store's log). CursorRead is false
	// until the sink read it from the store, at its first delivery: Cursor
	// is 0 until then, whatever the store keeps.
	Cursor     uint64
	CursorRead bool
	// Backlog is what the sink has yet to deliver, summed over the chains
	// it is given.
	Backlog             uint64
	Delivered, Failures uint64
	// Oversize counts the records sent as stubs, too large for the
	// receiver (a syslog sink's max_message); always 0 for other sinks.
	Oversize uint64
}

// Status returns every sink's state, in configuration order.
func (s *Set) Status() []Status {
	heads := s.givenHeads()
	out := make([]Status, len(s.sinks))
	for i, r := range s.sinks {
		st := Status{Name: r.Name, Delivered: r.delivered.Load(), Failures: r.failures.Load()}
		st.Cursor, st.CursorRead = r.cursorRead(s.opts.Member)
		if o, ok := r.Exporter.(oversizer); ok {
			st.Oversize = o.Oversize()
		}
		for chain, h := range heads {
			st.Backlog += h - min(r.cursor(chain), h)
		}
		out[i] = st
	}
	return out
}
