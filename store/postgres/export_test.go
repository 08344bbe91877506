package postgres

import "context"

// SchemaVersion is the newest schema layout this build knows.
var SchemaVersion = schemaVersion

// Kill ends s as kill -9 ends its process: the lease is no longer renewed
// and nothing is released, neither the lease nor the outbox claims.
func Kill(s *Store) {
	s.closed.Store(true)
	s.bgCancel()
	s.bg.Wait()
	s.pool.Close()
}

// Stall stops s renewing its lease, as a process stalled past it stops;
// s is used as before.
func Stall(s *Store) {
	s.bgCancel()
	s.bg.Wait()
}

// The ways of running sql effects the benchmark compares.
const (
	SQLAdaptive   = sqlAdaptive
	SQLRerun      = sqlRerun
	SQLSavepoints = sqlSavepoints
)

// SetSQLMode makes s run sql effects the way m says.
func SetSQLMode(s *Store, m sqlMode) { s.sqlMode = m }

// SQLMode is how a store runs sql effects.
type SQLMode = sqlMode

// ResetPool closes s's idle connections and makes the pool forget the
// others: the next use connects anew, as after a failover.
func ResetPool(s *Store) { s.pool.Reset() }

// AnalyzeAfter is how many keys a new group's table holds when Prune
// analyzes it.
const AnalyzeAfter = analyzeAfter

// Renew renews s's lease once, as its renewal task does, also when s
// was stalled.
func Renew(s *Store) error {
	s.bgCtx = context.Background()
	return s.renew()
}
