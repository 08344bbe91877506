// Package storetest is the conformance suite every engine.Store backend
// runs, plus the workload its benchmarks share.
//
// A backend's test calls Run, or RunDurable when it keeps its data in a
// directory:
//
//	func TestConformance(t *testing.T) {
//		storetest.RunDurable(t, func(t *testing.T, dir string) (engine.Store, error) {
//			s, err := mystore.Open(dir)
//			if err != nil {
//				return nil, err
//			}
//			t.Cleanup(func() { _ = s.Close() })
//			return s, nil
//		})
//	}
//
// A store that keeps an outbox (engine.OutboxStore) also runs RunOutbox,
// or RunSharedOutbox for a shared store, whose group cases check the
// claims of engine.OutboxClaimer.
//
// The suite checks what engine.Store, engine.AuditScanner and
// engine.QuarantineScanner promise: what Commit wrote is what Load and the
// scanners return, a batch is written whole or not at all, and every method
// fails with engine.ErrClosed after Close. Subtests run one after another,
// each on a fresh store; one of them commits while three goroutines read,
// so run a backend's suite under -race at least once.
package storetest
