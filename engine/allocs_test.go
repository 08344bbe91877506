package engine

import (
	"testing"
	"time"
)

// TestTheDigestOfARouteWithoutForwardAllocatesNothing: the digest's input
// stays on the stack for a route whose effects read named fields only;
// the canonical content a forward route adds (appendContent, which
// recurses) must not make it escape for every route, a 512-byte
// allocation a message.
func TestTheDigestOfARouteWithoutForwardAllocatesNothing(t *testing.T) {
	e := benchEngine(t, []Route{benchIncidents}, 1000)
	m := Message{Topic: "incidents/fire", Payload: incidentPayload(1, 1)}
	d, err := e.decode(&m)
	if err != nil {
		t.Fatal(err)
	}
	jr := d.route.reader.(*jsonReader)
	want := d.digest
	if n := testing.AllocsPerRun(100, func() { d.hash(jr, m.Payload) }); n != 0 {
		t.Fatalf("the digest allocated %v times a message, want 0", n)
	}
	if d.digest != want {
		t.Fatal("the digest changed from one run to the next")
	}
}

// TestFindingASourcesWindowAllocatesNothing: the source's id is built in a
// stack buffer to look its window up; the store read behind a miss must
// not make that buffer escape, an allocation a message.
func TestFindingASourcesWindowAllocatesNothing(t *testing.T) {
	e := benchEngine(t, []Route{benchIncidents}, 1000)
	m := Message{Topic: "incidents/fire", Payload: incidentPayload(1, 1)}
	d, err := e.decode(&m)
	if err != nil {
		t.Fatal(err)
	}
	want := e.source(d)
	if n := testing.AllocsPerRun(100, func() {
		if e.source(d) != want || e.lookupSource(d) != want {
			t.Fatal("the source's window was not found again")
		}
	}); n != 0 {
		t.Fatalf("finding the window allocated %v times, want 0", n)
	}
}

// nopPlacer places nothing and changes no state.
type nopPlacer struct{}

func (nopPlacer) Place(*Delivery, *Placement) (string, error) { return "", nil }
func (nopPlacer) Applied(*Delivery, *Placement) bool          { return false }
func (nopPlacer) Held(*Delivery, *Placement) bool             { return false }

// TestPlacingADeliveryOfAKindAllocatesNothing: the Placement a kind's
// Place, Applied and Held are given lives in the delivery, not in an
// allocation of its own for each call (two a message on the Sparkplug path).
func TestPlacingADeliveryOfAKindAllocatesNothing(t *testing.T) {
	e := benchEngine(t, []Route{benchIncidents}, 1000)
	m := Message{Topic: "incidents/fire", Payload: incidentPayload(1, 1)}
	d, err := e.decode(&m)
	if err != nil {
		t.Fatal(err)
	}
	d.placer = nopPlacer{}
	now := time.Unix(1700000000, 0)
	if n := testing.AllocsPerRun(100, func() {
		if _, stop := e.place(d, &m, now, false, false); stop {
			t.Fatal("a placement that holds nothing stopped the decision")
		}
		e.placed(d, m.Topic, now)
		e.heldPlaced(d, m.Topic, now)
	}); n != 0 {
		t.Fatalf("placing the delivery allocated %v times, want 0", n)
	}
}
