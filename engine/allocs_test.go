package engine

import "testing"

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
