package jetstream

import (
	"slices"
	"testing"
)

// cut splits runs where the span of a bind starts and ends; tell bounds
// what it owes by the ack pending count, less what came again and what
// was told.
func TestOwedCutsRunsAtItsSpanAndTellsNoMoreThanWasPending(t *testing.T) {
	var o owed
	o.reset(10, 20, 3) // 11..20, 3 of them ack pending
	out, in := o.cut([]span{{1, 4}, {8, 12}, {15, 15}, {19, 25}, {30, 31}})
	if want := []span{{1, 4}, {8, 10}, {21, 25}, {30, 31}}; !slices.Equal(out, want) {
		t.Errorf("outside = %v, want %v", out, want)
	}
	if want := []span{{11, 12}, {15, 15}, {19, 20}}; !slices.Equal(in, want) {
		t.Errorf("inside = %v, want %v", in, want)
	}
	o.received(14) // one pending one came again
	o.received(14) // twice: counted once
	o.received(21) // not of the span
	if got := o.tell(5); got != 2 {
		t.Errorf("tell(5) = %d, want 2: 3 pending, one came again", got)
	}
	if got := o.tell(5); got != 0 {
		t.Errorf("tell(5) again = %d, want 0: both told", got)
	}
	var none owed
	none.reset(7, 7, 0) // nothing delivered past the floor
	if out, in := none.cut([]span{{1, 9}}); !slices.Equal(out, []span{{1, 9}}) || in != nil {
		t.Errorf("an empty span cut %v into %v and %v", []span{{1, 9}}, out, in)
	}
}
