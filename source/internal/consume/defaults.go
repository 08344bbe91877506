package consume

import (
	"log/slog"
	"time"

	"github.com/replayguard/replayguard/source"
)

// Defaults every source shares. DefaultBatchSize and DefaultBatchLinger
// were chosen by source/mqtt's BenchmarkConsume against Mosquitto.
const (
	DefaultBatchSize       = 256
	DefaultBatchLinger     = time.Millisecond
	DefaultRetryMin        = 250 * time.Millisecond // between (re)connection rounds
	DefaultRetryMax        = 30 * time.Second
	DefaultCommitRetryMin  = 100 * time.Millisecond
	DefaultCommitRetryMax  = 10 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
)

// Default sets *v to def when *v is the zero value.
func Default[T int | uint16 | time.Duration | string](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// DefaultRetry sets the bounds of a retry backoff left zero: *lo to defLo,
// *hi to defHi or to *lo when that is larger.
func DefaultRetry(lo, hi *time.Duration, defLo, defHi time.Duration) {
	Default(lo, defLo)
	Default(hi, max(defHi, *lo))
}

// DefaultSinks sets a nil logger to one that discards, and a nil observer
// to one that ignores every event.
func DefaultSinks(log **slog.Logger, obs *source.Observer) {
	if *log == nil {
		*log = slog.New(slog.DiscardHandler)
	}
	if *obs == nil {
		*obs = source.ObserverFunc(func(source.Event) {})
	}
}
