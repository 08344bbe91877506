package consume

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LeaveQuiet is how long a member that left its share group goes on
// deciding what its session still delivers after the last delivery came.
const LeaveQuiet = time.Second

// LeaveFunc asks a group's store whether this member may leave its share
// group (engine.ShareMembership.LeaveShare): true when another live member
// holds the group's subscription, and the member is then marked as
// leaving.
type LeaveFunc func(ctx context.Context) (bool, error)

// JoinFunc records in a group's store that this member holds its share
// group's subscription (engine.ShareMembership.JoinShare), or may no
// longer hold it (QuitShare).
type JoinFunc func(ctx context.Context) error

// Leaving is how a member of a share group joins it in the group's store
// once the broker granted its subscription, and leaves it as Run stops: when
// the store grants it leave, it unsubscribes the group's filters, so the
// broker deals its share to the live members, and goes on consuming what
// its session still delivers (queued before the unsubscribe) until none
// has come for Quiet while it held none unacknowledged, or for at most
// Timeout; else it keeps its subscription. Deliveries of the Unshared
// filters alone (a Sparkplug route's) are not the group's share: they
// keep coming to the member's own subscription, and wait in its session
// until it returns, so the leaving waits for none of them. A connection
// lost takes the member out of the group in the store (its session, and
// the subscription with it, may be gone at the broker: expired, or
// started clean) until the broker grants the subscription again. One
// Leaving serves one consumer, one Run at a time.
type Leaving struct {
	Group string    // the share group; "" joins and leaves nothing
	Ask   LeaveFunc // nil leaves nothing
	// Join, asked each time the broker grants the group's subscriptions,
	// records that this member holds them; nil records nothing (and the
	// store then grants no leave).
	Join JoinFunc
	// Quit, asked when a connection on which the broker granted the
	// group's subscriptions is lost, records that this member may no
	// longer hold them; nil records nothing.
	Quit JoinFunc
	// Unsubscribe removes the group's filters from the session; an error
	// means they may still be there.
	Unsubscribe func(ctx context.Context) error
	Quiet       time.Duration // Default LeaveQuiet
	// Filters are the consumer's subscriptions; with one Unshared among
	// them, a delivery that matches no shared filter is not waited for.
	Filters []Filter
	Timeout time.Duration // bounds asking, unsubscribing and waiting
	Log     *slog.Logger
	// Adopted, when set, names the gone member whose session the consumer
	// adopts: it leaves the group on the gone member's behalf, and the
	// logs say so.
	Adopted string

	last     atomic.Int64  // UnixNano of the last delivery or acknowledgement
	received atomic.Uint64 // deliveries received: the last one's number
	settled  atomic.Uint64 // the number of the last delivery acknowledged
	shared   atomic.Uint64 // the number of the last delivery of the group's share
	left     atomic.Bool   // unsubscribed, or about to: subscribe no more
	quiet    atomic.Bool   // left, and the session went quiet: nothing of the share waits in it

	conn     atomic.Uint64 // the current connection's number: connections lost so far
	granted  atomic.Bool   // the broker granted the group's subscriptions on the current connection
	mu       sync.Mutex    // orders the store's joins, quits and the leave asked
	joinedOn uint64        // under mu: 1 + the number of the last connection whose grant was recorded; 0 none
}

// Received notes a delivery on topic, received at (the time its consumer
// stamped it with already: none is read again per message), and returns
// its number, for Settled.
func (l *Leaving) Received(topic string, at time.Time) uint64 {
	n := l.received.Add(1)
	if !l.ofShare(topic) {
		return n
	}
	raise(&l.shared, n)
	l.active(at)
	return n
}

// ofShare reports whether a delivery on topic may be of the group's
// share: it matches a filter that is not Unshared, or no filter is.
func (l *Leaving) ofShare(topic string) bool {
	if l.Group == "" || !slices.ContainsFunc(l.Filters, func(f Filter) bool { return f.Unshared }) {
		return true
	}
	return slices.ContainsFunc(l.Filters, func(f Filter) bool { return !f.Unshared && MatchTopic(f.Topic, topic) })
}

// raise sets v to n when n is higher.
func raise(v *atomic.Uint64, n uint64) {
	for cur := v.Load(); n > cur && !v.CompareAndSwap(cur, n); cur = v.Load() {
	}
}

// Settled notes that the deliveries up to number n (Received's), which are
// acknowledged in receive order, were acknowledged at at, or let go: the
// broker, which sends no more than the receive window unacknowledged, may
// send more of what the session holds from then on.
func (l *Leaving) Settled(n uint64, at time.Time) {
	before := l.settled.Load()
	raise(&l.settled, n)
	if before < l.shared.Load() { // some of the group's share among them
		l.active(at)
	}
}

// active notes activity at at: the quiet runs from the latest.
func (l *Leaving) active(at time.Time) {
	t := at.UnixNano()
	for cur := l.last.Load(); t > cur && !l.last.CompareAndSwap(cur, t); cur = l.last.Load() {
	}
}

// holding reports whether a delivery of the group's share received is
// not acknowledged yet: while it is, the broker's silence may be the full
// receive window, not the session's end.
func (l *Leaving) holding() bool { return l.settled.Load() < l.shared.Load() }

// Connection returns the current connection's number, for Subscribed:
// read it as the connection comes up.
func (l *Leaving) Connection() uint64 { return l.conn.Load() }

// Subscribed records in the group's store that this member holds the
// share group's subscription, which the broker has just granted on
// connection conn (Connection's): only then may another member leave the
// group counting on it. Not once the member is leaving, nor once conn was
// lost (Lost). A failure is logged and tried again, with a growing wait,
// while conn holds (joinAgain): until then the store counts this member
// out, refuses it leave as it stops, and keeps its share marked lost from
// a connection lost before, for which a live member would adopt its
// session from it.
func (l *Leaving) Subscribed(ctx context.Context, conn uint64) {
	if l.Group == "" || l.Join == nil || l.Left() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn.Load() != conn || l.Left() { // lost meanwhile: the grant holds nothing now; or granted leave meanwhile
		return
	}
	l.granted.Store(true)
	l.joinedOn = conn + 1
	if err := l.Join(ctx); err != nil {
		l.Log.Warn("mqtt subscribed, but the group's store did not record that this member holds the share group's subscription; trying again: "+
			"until then other members stopping do not count on it, and it keeps its subscription as it stops", "group", l.Group, "err", err)
		go l.joinAgain(ctx, conn)
	}
}

// joinAgainMax caps the wait between the tries of joinAgain.
const joinAgainMax = 15 * time.Second

// joinAgain tries Join again for connection conn, waiting longer each
// time, until it succeeds, conn is lost, the member leaves or ctx ends.
func (l *Leaving) joinAgain(ctx context.Context, conn uint64) {
	for wait := time.Second; ; wait = min(2*wait, joinAgainMax) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if l.rejoin(ctx, conn) {
			return
		}
	}
}

// rejoin runs Join once for connection conn, unless conn was lost or the
// member left meanwhile; it reports whether there is nothing more to try.
func (l *Leaving) rejoin(ctx context.Context, conn uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn.Load() != conn || l.Left() {
		return true
	}
	if err := l.Join(ctx); err != nil {
		l.Log.Warn("the group's store still did not record that this member holds the share group's subscription; trying again", "group", l.Group, "err", err)
		return false
	}
	l.Log.Info("the group's store recorded that this member holds the share group's subscription", "group", l.Group)
	return true
}

// Lost marks the current connection lost, at once: a grant of it that
// Subscribed has not recorded yet is recorded no more. It returns the
// recording in the group's store that this member may no longer hold the
// group's subscription, which the caller runs, on a goroutine of its own
// if it must not wait for the store (for at most Timeout); it records
// nothing when a later connection's grant was recorded first.
func (l *Leaving) Lost() func(ctx context.Context) {
	n := l.conn.Add(1) - 1
	l.granted.Store(false)
	return func(ctx context.Context) {
		if l.Group == "" || l.Quit == nil {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.joinedOn == 0 || l.joinedOn > n+1 { // never recorded, or recorded again since
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout())
		defer cancel()
		if err := l.Quit(ctx); err != nil {
			l.Log.Warn("mqtt connection lost, and the group's store did not record that this member may no longer hold the share group's subscription: "+
				"another member stopping may count on it", "group", l.Group, "err", err)
			return
		}
		l.Log.Info("mqtt connection lost: the group's store counts this member out of the share group until the broker grants its subscription again",
			"group", l.Group)
	}
}

// timeout is Timeout, or DefaultShutdownTimeout when unset.
func (l *Leaving) timeout() time.Duration {
	if l.Timeout > 0 {
		return l.Timeout
	}
	return DefaultShutdownTimeout
}

// Left reports whether the consumer is leaving the group, so that a new
// connection must not subscribe to it again.
func (l *Leaving) Left() bool { return l.left.Load() }

// WentQuiet reports whether the consumer left the group and its session
// then delivered nothing more of the group's share before the timeout.
func (l *Leaving) WentQuiet() bool { return l.quiet.Load() }

// Context returns the context a Run consumes under: done once ctx is done
// and the consumer has left the group (or kept its subscription), and
// stop, which ends it at once and waits for the leaving to end; call it
// after consuming, also when consuming ended on its own.
func (l *Leaving) Context(ctx context.Context) (consumeCtx context.Context, stop func()) {
	l.left.Store(false)
	l.quiet.Store(false)
	l.settled.Store(l.received.Load()) // what an earlier Run left unacknowledged is not waited for
	l.shared.Store(l.received.Load())
	consumeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			l.leave(consumeCtx)
			cancel()
		case <-consumeCtx.Done():
		}
	}()
	return consumeCtx, func() {
		cancel()
		<-done
		// The Run's connection ends: a later Run's grants are its own.
		l.conn.Add(1)
		l.granted.Store(false)
	}
}

// leave asks the store, unsubscribes and waits for the session's quiet.
// A consumer whose filters are all Unshared holds none of the group's
// share: it has nothing to leave.
func (l *Leaving) leave(ctx context.Context) {
	if l.Group == "" || l.Ask == nil {
		return
	}
	if len(l.Filters) > 0 && !slices.ContainsFunc(l.Filters, func(f Filter) bool { return !f.Unshared }) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	if !l.askLeave(ctx) {
		return
	}
	l.active(time.Now()) // the quiet runs from the unsubscribe at the earliest
	if err := l.Unsubscribe(ctx); err != nil {
		l.say(slog.LevelWarn, "mqtt stopping: unsubscribing from the share group failed; the broker keeps dealing this member's share to its session until it returns",
			"unsubscribing the gone member's session from the share group failed; it is adopted again later", "err", err)
		return
	}
	l.say(slog.LevelInfo, "mqtt stopping: left the share group, deciding what the session still delivers",
		"unsubscribed the gone member's session from the share group, deciding what it still delivers")
	quiet := l.Quiet
	if quiet <= 0 {
		quiet = LeaveQuiet
	}
	for {
		idle := time.Since(time.Unix(0, l.last.Load()))
		holding := l.holding()
		if idle >= quiet && !holding {
			l.quiet.Store(true)
			l.say(slog.LevelInfo, "mqtt stopping: the session delivered nothing more", "the gone member's session delivered nothing more", "quiet", quiet)
			return
		}
		wait := quiet - idle
		if holding { // their acknowledgement, after a commit that may take long, lets the broker send more
			wait = quiet / 4
		}
		if !Sleep(ctx.Done(), wait) {
			l.say(slog.LevelWarn, "mqtt stopping: the session still delivers at the shutdown timeout; the rest waits in it until this member returns",
				"the gone member's session still delivers at the timeout, or the adoption ended; the rest waits in it, adopted again later", "timeout", l.Timeout)
			return
		}
	}
}

// say logs stopping, or adopting when the consumer adopts a gone
// member's session, with the group (and the member adopted).
func (l *Leaving) say(level slog.Level, stopping, adopting string, args ...any) {
	if l.Adopted == "" {
		l.Log.Log(context.Background(), level, stopping, append([]any{"group", l.Group}, args...)...)
		return
	}
	l.Log.Log(context.Background(), level, "mqtt adopting: "+adopting, append([]any{"group", l.Group}, args...)...)
}

// askLeave asks the store for leave, and marks the member leaving when
// granted. Under mu: a connection regained while the store answers records
// its grant (Subscribed) once the answer is known, and not at all when the
// member was granted leave, for it unsubscribes on that connection.
func (l *Leaving) askLeave(ctx context.Context) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Join != nil && !l.granted.Load() {
		l.Log.Warn("mqtt stopping: not leaving the share group: the broker has not granted this member the group's subscription on its current connection "+
			"(not connected, or not subscribed yet), so no other member counts on it; a subscription its session holds from before keeps its share until it returns",
			"group", l.Group)
		return false
	}
	granted, err := l.Ask(ctx)
	switch {
	case err != nil:
		l.Log.Warn("mqtt stopping: keeping the share group's subscription, the store could not say whether another member holds it; "+
			"the broker keeps dealing this member's share to its session until it returns", "group", l.Group, "err", err)
		return false
	case !granted:
		l.Log.Warn("mqtt stopping: keeping the share group's subscription, no other live member of the group holds it; "+
			"the broker keeps this member's share in its session until it returns", "group", l.Group)
		return false
	}
	l.left.Store(true)
	return true
}
