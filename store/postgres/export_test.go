package postgres

// Kill ends s as kill -9 ends its process: the lease is no longer renewed
// and nothing is released, neither the lease nor the outbox claims.
func Kill(s *Store) {
	s.closed.Store(true)
	s.bgCancel()
	s.bg.Wait()
	s.pool.Close()
}

// UseSavepoints makes s run sql effects with a savepoint per message, the
// variant the benchmark compares with the default.
func UseSavepoints(s *Store) { s.savepoints = true }
