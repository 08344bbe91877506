// Package storetest is the conformance suite every engine.Store backend
// runs, plus the workload its benchmarks share.
//
// A backend's test calls Run once per configuration, the way a watermill
// Pub/Sub calls tests.TestPubSub: with the Features its Capabilities cannot
// declare, and a constructor of new, empty stores.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Features{Durable: true}, func(t *testing.T) storetest.Open {
//			dir := t.TempDir() // one store per case
//			return func(member string) (engine.Store, error) {
//				s, err := mystore.Open(dir)
//				if err != nil {
//					return nil, err
//				}
//				t.Cleanup(func() { _ = s.Close() })
//				return s, nil
//			}
//		})
//	}
//
// Run chooses the cases from two sources. What the store can do is what it
// declares in engine.Capabilities where it is opened: Trim brings the audit
// retention cases, Cursors the sink cursors', Outbox the outbox's, Claims
// the outbox claims', Keeper the per-member chain retention, cursors and
// chain claims', Routes the routes' key derivations', Share the share
// group's members'; every case reaches those parts through the declared
// interfaces, never by a type assertion. What Capabilities cannot say is
// in Features: Members (a consumer group's store, opened under member ids;
// it must declare Shared and Chains, and a single-owner store neither),
// Durable (what was committed outlives a handle, so cases close and
// reopen; a durable single-owner store must refuse a second open with
// engine.ErrLocked), Kill (a member ended as by kill -9, for the claim
// cases) and Stall (a member's handle that stops renewing its lease and
// runs on, for the cases of a fenced handle). Run first opens one store and checks that its declarations agree
// with themselves and with the Features. A case that does not apply is
// skipped, and says why.
//
// The cases, by concept (a subtest each):
//
//   - store: what engine.Store promises: what Commit wrote is what Load and
//     the scanners return, a batch is written whole or not at all (an audit
//     gap, a cancelled context), scans stop at the callback's error, the
//     store keeps its own copies, every method fails with engine.ErrClosed
//     after Close, and scans run safely while commits land. On a group's
//     store they run on member m1's handle in the store's own terms: its
//     records name the member, quarantine ids are offset by its
//     QuarantineBase, and keys, which a group's Load leaves out, are read
//     through Update. NextKey and EvictBelow mean nothing there
//     (engine.SharedStore), so their cases run on single-owner stores only.
//   - durable: data, a failed commit and a trim after Close and Open again;
//     the directory lock of a single-owner store.
//   - group: a group's store as members see it: each member's chain, Update's
//     reads and refusals, member leases, read-only handles, and engines on
//     two members racing on keys, windows, entities and releases.
//   - routes: engine.RouteRecorder records a route's key derivation once
//     and keeps it, and an engine whose route derives keys another way is
//     refused (on a group's store: at one member, while another goes on)
//     before it applies a replay again.
//   - share: engine.ShareMembership grants a member leave from its MQTT
//     share group only while another live member holds it (not one whose
//     handle closed, nor one opened again that has not joined), and of the
//     last two members leaving at once exactly one.
//   - outbox, group outbox, claims: engine.OutboxStore on one handle, then
//     between members, then engine.OutboxClaimer's takeovers.
//   - chain keeper, chain claims: engine.ChainKeeper: each member's chain
//     trimmed on its own, its head kept when every record is trimmed, the
//     sinks' cursors per chain and sink, and the chain claims' takeovers,
//     by the outbox claims' rules (their ClaimTTL).
//
// Cases run one after another, each on a fresh store; some start goroutines
// that commit while others read, so run a backend's suite under -race at
// least once. A group's store with Claims should keep claims for about a
// second (OutboxClaimer.ClaimTTL): the claim cases wait for them to expire.
package storetest
