package storetest

import "testing"

// suite is a group of cases on one concept; the whole group is skipped
// when a store lacks what it needs.
type suite struct {
	name  string
	needs need
	cases []testCase
}

// testCase is one case. single, when set, says why the case does not hold
// on a group's store: it runs on single-owner stores only.
type testCase struct {
	name   string
	needs  need
	single string
	fn     func(t *testing.T, p *place)
}

// onFirst runs fn on the store's first handle: the single-owner store, or
// member m1 of a group's.
func onFirst(fn func(t *testing.T, h *handle)) func(t *testing.T, p *place) {
	return func(t *testing.T, p *place) { fn(t, p.first(t)) }
}

// Why a case of engine.Store does not hold on a group's store.
const (
	whyNextKey = "NextKey means nothing to a group's store (engine.SharedStore): its Load returns zero"
	whyEvict   = "EvictBelow means nothing to a group's store (engine.SharedStore): the store prunes its keys by age and count " +
		"(group/an expired key lets its message apply again, and each backend's pruning tests)"
	whyLocked = "a group's store is opened by many processes at once; a member id held by a live handle is refused instead " +
		"(group/a member id held by a live handle is refused)"
	whyOneOwner = "the case checks that a single-owner store refuses what names a member"
	whyOwned    = "a group's store commits each batch before its submit returns: no batch is decided while another commits"
)

// suites are every case of the suite, by concept.
var suites = []suite{
	{name: "store", cases: []testCase{
		{name: "a new store loads empty", fn: onFirst(testEmpty)},
		{name: "load returns what commit wrote", fn: onFirst(testRoundTrip)},
		{name: "keys come back in ordinal order across batches", fn: onFirst(testKeyOrder)},
		{name: "sources are upserted by route and source identity", fn: onFirst(testSourceUpsert)},
		{name: "entities are upserted by name", fn: onFirst(testEntityUpsert)},
		{name: "the audit head is the last record written", fn: onFirst(testAuditHead)},
		{name: "next key never goes backwards", single: whyNextKey, fn: onFirst(testNextKey)},
		{name: "evict below deletes older key entries", single: whyEvict, fn: onFirst(testEvict)},
		{name: "an audit gap fails the whole batch", fn: onFirst(testAuditGap)},
		{name: "a cancelled context writes nothing", fn: onFirst(testCancelled)},
		{name: "scan audit starts at a position and keeps order", fn: onFirst(testScanAudit)},
		{name: "scan audit stops at the first callback error", fn: onFirst(testScanAuditStops)},
		{name: "quarantine lists open entries in id order", fn: onFirst(testQuarantineList)},
		{name: "resolved entries leave the quarantine", fn: onFirst(testQuarantineResolve)},
		{name: "an unknown quarantine id is not found", fn: onFirst(testQuarantineUnknown)},
		{name: "scan quarantine stops at the first callback error", fn: onFirst(testScanQuarantineStops)},
		{name: "payload bytes round-trip exactly", fn: onFirst(testPayloads)},
		{name: "the store keeps its own copies", fn: onFirst(testCopies)},
		{name: "every method returns ErrClosed after close", fn: onFirst(testClosed)},
		{name: "scans run safely while commits land", fn: onFirst(testConcurrent)},
		{name: "a trimmed audit log starts after its base", needs: needTrim, fn: onFirst(testTrim)},
		{name: "a trim that would break the chain or drop a held record is refused", needs: needTrim, fn: onFirst(testTrimRefuses)},
		{name: "sink cursors are kept by name", needs: needCursors, fn: testCursors},
		{name: "sink cursors named with separators and unicode are kept apart", needs: needCursors, fn: testOddCursorNames},
		{name: "stream marks are kept by name", needs: needMarks, fn: testMarks},
		{name: "rows are read one at a time and counted", needs: needRows, fn: onFirst(testRows)},
		{name: "a group's rows are scanned one at a time and counted", needs: needScan, fn: onFirst(testScan)},
		{name: "rows are scanned across many reads", needs: needRowScan, fn: onFirst(testScanMany)},
		{name: "rows named as long and as oddly as the engine allows round-trip", fn: onFirst(testOddNames)},
		{name: "an empty batch changes nothing", fn: onFirst(testEmptyBatch)},
		{name: "a log trimmed of every record keeps its head and takes the next batch", needs: needTrim, fn: testTrimAll},
		{name: "close while commits run: what returned nil is kept, what failed is not", fn: testCloseWhileCommitting},
	}},
	{name: "durable", needs: needDurable, cases: []testCase{
		{name: "committed data survives close and reopen", fn: testDurable},
		{name: "a failed commit leaves nothing behind after reopen", fn: testDurableFailed},
		{name: "a trimmed audit log keeps its base after reopen", needs: needTrim, fn: testDurableTrim},
		{name: "a second open of a held directory fails with ErrLocked", single: whyLocked, fn: testDurableLocked},
	}},
	{name: "group", needs: needMembers, cases: []testCase{
		{name: "a new group loads empty", fn: testSharedEmpty},
		{name: "load returns the group's rows and the member's head", fn: testSharedRoundTrip},
		{name: "each member writes its own chain", fn: testSharedChains},
		{name: "an audit gap fails the whole batch", fn: testSharedAuditGap},
		{name: "update hands decide the stored rows it names", fn: testSharedUpdateReads},
		{name: "a resolved entry that is not open fails the whole batch", fn: testSharedResolveGone},
		{name: "an error from decide writes nothing", fn: testSharedDecideError},
		{name: "a member id held by a live handle is refused", fn: testSharedMemberHeld},
		{name: "quarantine ids are unique in the group", fn: testSharedQuarantineBase},
		{name: "a read-only handle reads and writes nothing", fn: testSharedReadOnly},
		{name: "payload bytes round-trip exactly", fn: testSharedPayloads},
		{name: "every method returns ErrClosed after close", fn: testSharedClosed},
		{name: "one replay at two members at once applies once", fn: testSharedSameReplay},
		{name: "two members racing on one source's window", fn: testSharedSourceRace},
		{name: "two members creating one entity add both", fn: testSharedEntityRace},
		{name: "two concurrent releases of one entry apply once", fn: testSharedConcurrentRelease},
		{name: "two concurrent releases of an entry that applies apply it once", fn: testSharedConcurrentReleaseApplies},
		{name: "an expired key lets its message apply again", fn: testSharedExpiredKey},
		{name: "a key applied at the cutoff is live; a nanosecond before it, expired", fn: testSharedKeyCutoff},
		{name: "a batch with more keys than max_entries commits, its replays duplicates", fn: testSharedBatchPastMaxEntries},
		{name: "close while an update decides: it commits whole or not at all", fn: testSharedCloseWhileUpdating},
		{name: "a message held by a commit the member never journaled is held once when delivered again", needs: needDurable, fn: testSharedHeldOnceAfterAKill},
		{name: "a message held by the member's last journaled batch is held once when delivered again", needs: needDurable, fn: testSharedHeldOnceAfterAKillBeforeTheAck},
		{name: "a message held by a commit whose answer was lost is held once when passed again", fn: testSharedHeldOnceAfterALostAnswer},
		{name: "a commit's entries read on two reloads each take one delivery", fn: testSharedHeldOnceAfterTwoLostAnswers},
		{name: "a held message published again after its entry was discarded is held again", needs: needDurable, fn: testSharedHeldDiscardedThenPublishedAgain},
		{name: "a held message of the last batch published anew after a restart is a duplicate of its entry, or held again without a key", needs: needDurable, fn: testSharedHeldPublishedAnewAfterARestart},
	}},
	{name: "held", needs: needHeld, cases: []testCase{
		{name: "a held message delivered again is a duplicate of its open entry; a keyless one is held again", fn: testHeldAgain},
		{name: "two copies of a held message in one batch are held once", fn: testHeldTwiceInABatch},
		{name: "a held message delivered again after a restart is a duplicate of its entry", needs: needDurable, fn: testHeldAgainAfterARestart},
		{name: "a held message delivered again at another member is a duplicate of its entry", needs: needMembers, fn: testHeldAgainAtAnotherMember},
		{name: "a held message delivered again after its entry was released or discarded is held anew", fn: testHeldAgainAfterResolve},
		{name: "a delivery decided while its entry's discard commits is held anew", single: whyOwned, fn: testHeldAgainWhileDiscarding},
		{name: "a delivery decided while another member discards its entry is held anew, or a duplicate committed before the discard", needs: needMembers, fn: testHeldAgainWhileAnotherMemberDiscards},
		{name: "a conflict two members hold at once is held once, the later commit a duplicate of the first one's entry", needs: needMembers, fn: heldAtTwoMembersAtOnce(reading(1, "5"))},
		{name: "a message below the window two members hold at once is held once, the later commit a duplicate of the first one's entry", needs: needMembers, fn: heldAtTwoMembersAtOnce(incident(1, 1))},
	}},
	{name: "routes", needs: needRoutes, cases: []testCase{
		{name: "a route's key derivation is recorded once and kept", fn: testRoutesRecordedOnce},
		{name: "a route whose key derivation changed is refused; an effect or a route added or removed is not", fn: testRoutesChangedRefused},
		{name: "a member whose route derives keys another way is refused while the others go on", needs: needMembers, fn: testRoutesMemberRefused},
	}},
	{name: "share", needs: needShare | needMembers, cases: []testCase{
		{name: "a member leaves its share group only while another live member holds it", fn: testShareLeftWhileAnotherHolds},
		{name: "a member whose handle closed holds no share group, nor does one opened again until it joins", fn: testShareNotHeldByClosedMember},
		{name: "of the last two members leaving at once, exactly one is granted", fn: testShareLastTwoLeavingAtOnce},
		{name: "a member that quit its share group is not counted until it joins again", fn: testShareQuitUntilJoinedAgain},
	}},
	{name: "adopt", needs: needShare | needAdopt | needMembers | needKill | needClaims, cases: []testCase{
		{name: "the session of a member gone while it held the group is claimed by one live member, with its client id", fn: testAdoptGoneMemberOnce},
		{name: "a session released is claimed by another member at once", fn: testAdoptReleased},
		{name: "a member that returns is neither claimed nor recorded out by its old adoption", fn: testAdoptReturned},
		{name: "a live member's share lost for the wait asked is claimed, with its loss time, and recorded out", fn: testAdoptLost},
		{name: "a lost member that joins again is neither claimed nor recorded out; lost again, it is claimed anew", fn: testAdoptLostJoinedAgain},
		{name: "a lost member that takes its lease again is neither claimed nor recorded out", fn: testAdoptLostLeaseTaken},
	}},
	{name: "paths", needs: needPaths | needShare | needAdopt | needMembers | needKill | needClaims, cases: []testCase{
		{name: "the session on each path of a member gone while it held the group there is claimed by one live member, path by path", fn: testPathsAdoptedPathByPath},
		{name: "a path lost is claimed with its loss time, and a path's session released by another member at once", fn: testPathsQuitAndReleased},
		{name: "a live member's share lost on a path for the wait asked is claimed there alone, and recorded out", fn: testPathsLost},
		{name: "a member that returns has its paths' shares cleared: neither claimed nor recorded out by its old adoption", fn: testPathsReturned},
		{name: "a member's one session and its paths' sessions are claimed apart", fn: testPathsApartFromTheOneSession},
	}},
	{name: "outbox", needs: needOutbox, cases: []testCase{
		{name: "entries committed with a batch are listed in id order, fields and payloads exact", fn: onOutbox(testOutboxList)},
		{name: "a failed commit writes no entry", fn: onOutbox(testOutboxFailed)},
		{name: "an entry that names no record of its batch fails the whole batch", fn: onOutbox(testOutboxBadID)},
		{name: "done removes delivered entries and is idempotent", fn: onOutbox(testOutboxDone)},
		{name: "a hold moves an entry to the held ones with its reason", fn: onOutbox(testOutboxHold)},
		{name: "done of a held entry's id leaves it held", fn: onOutbox(testOutboxDoneHeld)},
		{name: "pending and held entries survive reopening", needs: needDurable, fn: onOutbox(testOutboxReopen)},
		{name: "the store keeps its own copies", fn: onOutbox(testOutboxCopies)},
		{name: "a listing limit below one is refused", fn: onOutbox(testOutboxLimit)},
		{name: "an engine with forward routes writes an entry per applied forward", fn: onOutbox(testOutboxEngine)},
		{name: "a retry puts a held entry back with its id and bytes; a drop removes it", fn: onOutbox(testOutboxResolve)},
		{name: "resolving an entry that is not held fails the whole batch", fn: onOutbox(testOutboxResolveNotHeld)},
		{name: "two resolutions of one held entry at once: exactly one commits", fn: onOutbox(testOutboxResolveRace)},
		{name: "the engine retries and drops held entries, each with an audit record", fn: onOutbox(testOutboxEngineResolve)},
		{name: "an operator holds a pending entry, with an audit record", fn: onOutbox(testOutboxEngineHoldPending)},
		{name: "a hold or a resolution naming a member without the entry is not found", fn: onOutbox(testOutboxEngineOtherMember)},
		{name: "an operator's hold of an entry the drainer delivered meanwhile is refused, with no record", fn: onOutbox(testOutboxEngineHoldDeliveredMeanwhile)},
		{name: "a refused hold leaves a consumer's batch decided meanwhile to commit", single: whyOwned, fn: onOutbox(testOutboxEngineHoldDeliveredMeanwhileKeepsDecisions)},
		{name: "outbox methods return ErrClosed after close", fn: onOutbox(testOutboxClosed)},
		{name: "a member other than \"\" is refused", single: whyOneOwner, fn: onOutbox(testOutboxSingleOwner)},
	}},
	{name: "group outbox", needs: needMembers | needOutbox, cases: []testCase{
		{name: "each member's outbox is its own; a hold may name another member's", fn: testOutboxMembers},
		{name: "a read-only handle lists every outbox and claims nothing", needs: needClaims, fn: testOutboxReadOnly},
		{name: "a member resolves another's held entry; of two members resolving one, one commits", fn: testOutboxResolveMembers},
	}},
	{name: "claims", needs: needMembers | needClaims, cases: []testCase{
		{name: "a live member's outbox is claimed by itself only", fn: testClaimLive},
		{name: "a dead member's outbox is claimed by one other member once its lease expired", needs: needKill, fn: testClaimDead},
		{name: "a restarted member waits for its outbox's claimant, then drains it", needs: needKill, fn: testClaimRestart},
		{name: "a claim that is not released expires", needs: needKill, fn: testClaimExpires},
		{name: "two members claiming one outbox at once: one gets it", needs: needKill, fn: testClaimRace},
		{name: "a handle whose lease another process took claims no outbox, its member's or a departed one's", needs: needKill | needStall, fn: testClaimFenced},
	}},
	{name: "chain keeper", needs: needMembers | needKeeper, cases: []testCase{
		{name: "each member's chain is trimmed on its own and starts after its base", fn: testChainTrim},
		{name: "a chain trimmed of every record keeps its head and takes the next batch", fn: testChainTrimAll},
		{name: "a trim that would break a chain or drop its member's held record is refused", fn: testChainTrimRefuses},
		{name: "scans of a chain run safely while it is trimmed", fn: testChainTrimScans},
		{name: "an engine on a chain trimmed of every record goes on after its head", fn: testChainTrimmedEngine},
		{name: "sink cursors are kept per member's chain and sink", fn: testChainCursors},
		{name: "a sink cursor is set only at the record the chain holds there", fn: testChainCursorsAt},
		{name: "every sink cursor on a chain is listed, and a sink forgotten on every chain", fn: testChainCursorsForgotten},
		{name: "chain sink cursors named with separators and unicode are kept apart", fn: testChainOddCursorNames},
		{name: "every member's quarantine base is listed", fn: testChainQuarantineBases},
		{name: "a read-only handle reads bases and cursors and changes nothing", fn: testChainReadOnly},
		{name: "chain keeper methods return ErrClosed after close", fn: testChainClosed},
	}},
	{name: "chain claims", needs: needMembers | needKeeper | needClaims, cases: []testCase{
		{name: "a live member's chain is claimed by itself only, and freed by its close", fn: testChainClaimLive},
		{name: "a chain another handle claims is trimmed by that handle only", fn: testChainTrimClaimed},
		{name: "a dead member's chain is claimed by one other member once its lease expired", needs: needKill, fn: testChainClaimDead},
		{name: "a restarted member waits for its chain's claimant, then keeps it", needs: needKill, fn: testChainClaimRestart},
		{name: "a chain claim that is not released expires", needs: needKill, fn: testChainClaimExpires},
		{name: "two members claiming one chain at once: one gets it", needs: needKill, fn: testChainClaimRace},
		{name: "a handle whose lease another process took claims no chain, its member's or a departed one's", needs: needKill | needStall, fn: testChainClaimFenced},
	}},
}
