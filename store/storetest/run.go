package storetest

import (
	"reflect"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// Open opens a handle on the store under test. On a group's store
// (Features.Members) member is the member id whose audit chain the handle
// writes, "" a read-only handle; on a single-owner store it is always "".
// It returns the error of a failed open unchanged (the suite looks for
// engine.ErrLocked and engine.ErrMemberHeld), and registers the handle's
// Close as a cleanup of the test that made the store, ignoring its error:
// some cases close handles themselves.
type Open func(member string) (engine.Store, error)

// NewStore makes a new, empty store for one case (a directory, a group, a
// database schema, a key prefix) and returns how to open it.
type NewStore func(t *testing.T) Open

// Features say what a store's Capabilities cannot: how it is opened and
// what outlives a handle. The zero value is a single-owner store that keeps
// nothing once closed, as memory.Store.
type Features struct {
	// Members says the store is a consumer group's: Open takes member ids
	// ("" for a read-only handle), and the store must declare Shared and
	// Chains. False: a single-owner store, which must declare neither.
	Members bool
	// Durable says what was committed outlives a handle: after Close, Open
	// finds it (a directory, a database schema, a group that outlives its
	// members' handles). The cases that close and reopen run only then. A
	// durable single-owner store is held by one open handle at a time: a
	// second Open fails with engine.ErrLocked until it is closed.
	Durable bool
	// Kill ends a member's handle as kill -9 ends its process: it stops
	// renewing the member's lease and releases nothing, neither the lease
	// nor its outbox claims. The handle is not used again. nil: the claim
	// cases that need a member to die without closing are skipped.
	Kill func(engine.Store)
	// Stall stops a member's handle from renewing its lease, as a process
	// that stalls past it (a pause, a partition) stops; the handle is used
	// again, and its lease taken by a second handle of the member once it
	// expired. nil: the cases of a handle fenced that way are skipped.
	Stall func(engine.Store)
}

// Run runs every conformance case the store's declared Capabilities and
// its Features allow, each on a new store from newStore; a case that does
// not apply is skipped with the reason. It first opens one store and checks
// that its Capabilities agree with themselves and with the Features.
//
// A group's store with Capabilities.Claims should keep its claims
// (engine.OutboxClaimer.ClaimTTL) for about a second: the claim cases wait
// for leases and claims to expire.
func Run(t *testing.T, f Features, newStore NewStore) {
	t.Helper()
	var caps engine.Capabilities
	if !t.Run("the declared capabilities agree with the features", func(t *testing.T) {
		caps = probe(t, f, newStore)
	}) {
		return
	}
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			if why := s.needs.missing(f, caps); why != "" {
				t.Skip(why)
			}
			for _, c := range s.cases {
				t.Run(c.name, func(t *testing.T) {
					if why := c.needs.missing(f, caps); why != "" {
						t.Skip(why)
					}
					if c.single != "" && f.Members {
						t.Skip(c.single)
					}
					c.fn(t, newPlace(f, caps, newStore(t)))
				})
			}
		})
	}
}

// probe opens a store, checks what it declares and returns it.
func probe(t *testing.T, f Features, newStore NewStore) engine.Capabilities {
	t.Helper()
	p := newPlace(f, engine.Capabilities{}, newStore(t))
	h := p.first(t)
	again := h.Capabilities()
	for _, field := range capabilityFields {
		if a, b := field.get(h.caps), field.get(again); !sameValue(a, b) {
			t.Errorf("Capabilities().%s is %T, then %T: it must return the same value every time", field.name, a, b)
		}
	}
	if h.caps.SQL != again.SQL {
		t.Errorf("Capabilities().SQL is %v, then %v", h.caps.SQL, again.SQL)
	}
	if f.Kill != nil && !f.Members {
		t.Errorf("Features.Kill is set on a single-owner store: it ends a member's handle")
	}
	if f.Stall != nil && !f.Members {
		t.Errorf("Features.Stall is set on a single-owner store: it stalls a member's handle")
	}
	closeStore(t, h)
	return h.caps
}

// checkCapabilities checks what a handle declares against the features
// and against itself.
func checkCapabilities(t *testing.T, f Features, s engine.Store, c engine.Capabilities) {
	t.Helper()
	switch {
	case f.Members && (c.Shared == nil || c.Chains == nil):
		t.Fatalf("%T is opened with member ids (Features.Members) but declares Shared %v and Chains %v: a group's store declares both",
			s, c.Shared != nil, c.Chains != nil)
	case !f.Members && (c.Shared != nil || c.Chains != nil || c.Claims != nil):
		t.Fatalf("%T declares Shared, Chains or Claims, but Features.Members says it is a single-owner store", s)
	case c.Claims != nil && c.Outbox == nil:
		t.Fatalf("%T declares Claims without Outbox: the claims hand out outboxes", s)
	case c.Stats != nil && c.Shared == nil:
		t.Fatalf("%T declares Stats without Shared: they are a shared store's counters", s)
	case c.Keeper != nil && c.Shared == nil:
		t.Fatalf("%T declares Keeper without Shared: it keeps the members' chains", s)
	case c.Share != nil && c.Shared == nil:
		t.Fatalf("%T declares Share without Shared: it keeps a group's members", s)
	case c.Marks != nil && c.Shared != nil:
		t.Fatalf("%T declares Marks with Shared: the members of a group share a stream's consumer, and none's position is the consumer's", s)
	case c.Adopt != nil && (c.Share == nil || c.Claims == nil):
		t.Fatalf("%T declares Adopt without Share and Claims: it adopts the sessions that hold a share group, by claims", s)
	case c.Paths != nil && c.Adopt == nil:
		t.Fatalf("%T declares Paths without Adopt: it keeps and adopts the members' sessions path by path, by Adopt's rules", s)
	}
}

// capabilityFields are the interface fields of engine.Capabilities.
var capabilityFields = []struct {
	name string
	get  func(engine.Capabilities) any
}{
	{"Shared", func(c engine.Capabilities) any { return c.Shared }},
	{"Chains", func(c engine.Capabilities) any { return c.Chains }},
	{"Trim", func(c engine.Capabilities) any { return c.Trim }},
	{"Cursors", func(c engine.Capabilities) any { return c.Cursors }},
	{"Outbox", func(c engine.Capabilities) any { return c.Outbox }},
	{"Claims", func(c engine.Capabilities) any { return c.Claims }},
	{"Keeper", func(c engine.Capabilities) any { return c.Keeper }},
	{"Stats", func(c engine.Capabilities) any { return c.Stats }},
	{"Routes", func(c engine.Capabilities) any { return c.Routes }},
	{"Share", func(c engine.Capabilities) any { return c.Share }},
	{"Adopt", func(c engine.Capabilities) any { return c.Adopt }},
	{"Marks", func(c engine.Capabilities) any { return c.Marks }},
	{"Paths", func(c engine.Capabilities) any { return c.Paths }},
	{"Held", func(c engine.Capabilities) any { return c.Held }},
}

// sameValue reports whether two declared interfaces hold the same value:
// both nil, or the same comparable value (a store declares itself).
func sameValue(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	if !reflect.TypeOf(a).Comparable() {
		return true // nothing to compare by: the types agree
	}
	return a == b
}

// need is what a case needs of a store, one bit each.
type need uint

const (
	needMembers need = 1 << iota // Features.Members
	needDurable                  // Features.Durable
	needKill                     // Features.Kill
	needStall                    // Features.Stall
	needTrim                     // Capabilities.Trim
	needCursors                  // Capabilities.Cursors
	needOutbox                   // Capabilities.Outbox
	needClaims                   // Capabilities.Claims
	needKeeper                   // Capabilities.Keeper
	needRows                     // Capabilities.Rows
	needScan                     // Capabilities.Scan
	needRowScan                  // Capabilities.Rows or Capabilities.Scan
	needRoutes                   // Capabilities.Routes
	needShare                    // Capabilities.Share
	needAdopt                    // Capabilities.Adopt
	needMarks                    // Capabilities.Marks
	needPaths                    // Capabilities.Paths
	needHeld                     // Capabilities.Held
)

// missing returns why a store lacks what n needs; "" when it has all.
func (n need) missing(f Features, c engine.Capabilities) string {
	for _, r := range []struct {
		bit need
		has bool
		why string
	}{
		{needMembers, f.Members, "a single-owner store (Features.Members is false): the case needs a group's members"},
		{needDurable, f.Durable, "the store keeps nothing once closed (Features.Durable is false)"},
		{needKill, f.Kill != nil, "Features.Kill is nil: no member can die without closing"},
		{needStall, f.Stall != nil, "Features.Stall is nil: no member's handle can lose its lease while it runs"},
		{needTrim, c.Trim != nil, "the store does not declare Capabilities.Trim"},
		{needCursors, c.Cursors != nil, "the store does not declare Capabilities.Cursors"},
		{needOutbox, c.Outbox != nil, "the store does not declare Capabilities.Outbox"},
		{needClaims, c.Claims != nil, "the store does not declare Capabilities.Claims"},
		{needKeeper, c.Keeper != nil, "the store does not declare Capabilities.Keeper"},
		{needRows, c.Rows != nil, "the store does not declare Capabilities.Rows"},
		{needScan, c.Scan != nil, "the store does not declare Capabilities.Scan"},
		{needRowScan, c.Rows != nil || c.Scan != nil, "the store declares neither Capabilities.Rows nor Capabilities.Scan"},
		{needRoutes, c.Routes != nil, "the store does not declare Capabilities.Routes"},
		{needShare, c.Share != nil, "the store does not declare Capabilities.Share"},
		{needAdopt, c.Adopt != nil, "the store does not declare Capabilities.Adopt"},
		{needMarks, c.Marks != nil, "the store does not declare Capabilities.Marks"},
		{needPaths, c.Paths != nil, "the store does not declare Capabilities.Paths"},
		{needHeld, c.Held != nil, "the store does not declare Capabilities.Held"},
	} {
		if n&r.bit != 0 && !r.has {
			return r.why
		}
	}
	return ""
}
