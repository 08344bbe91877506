package consumetest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Runner is a consumer: Run consumes until ctx is done.
type Runner interface {
	Run(ctx context.Context) error
}

// Run is a consumer whose Run goes on in the background.
type Run struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // what it returned; set before done closes
}

// Start runs c until Stop or the end of the test.
func Start(t testing.TB, c Runner) *Run {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Run{cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = c.Run(ctx)
		close(r.done)
	}()
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

// Done is closed when Run has returned by itself or after Stop.
func (r *Run) Done() <-chan struct{} { return r.done }

// Err is what Run returned, once Done is closed.
func (r *Run) Err() error {
	<-r.done
	return r.err
}

// Stop cancels Run and returns what it returned.
func (r *Run) Stop() error {
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-time.After(30 * time.Second):
		return errors.New("Run did not return within 30s")
	}
}
