package shared

import (
	"errors"
	"testing"
	"time"
)

// A lease renewal's error lasts until a renewal succeeds, with no write in
// between; an update's lasts until a write succeeds, whatever the lease does.
func TestALeaseErrorLastsUntilARenewalSucceeds(t *testing.T) {
	var c Counters
	c.LeaseFailed(errors.New("renew: connection refused"))
	if st := c.Stats("", time.Second); st.LeaseError != "renew: connection refused" || st.LastError != st.LeaseError {
		t.Fatalf("after a failed renewal: lease error %q, last error %q", st.LeaseError, st.LastError)
	}
	c.Leased(time.Now().Add(time.Second))
	if st := c.Stats("", time.Second); st.LeaseError != "" || st.LastError != "" {
		t.Fatalf("after a renewal: lease error %q, last error %q; want none", st.LeaseError, st.LastError)
	}

	c.LeaseFailed(errors.New("renew: timeout"))
	c.Failed(errors.New("update: connection refused"))
	c.Leased(time.Now().Add(time.Second))
	if st := c.Stats("", time.Second); st.LeaseError != "" || st.LastError != "update: connection refused" {
		t.Fatalf("after a failed update and a renewal: lease error %q, last error %q; want the update's kept", st.LeaseError, st.LastError)
	}
	c.Wrote(time.Millisecond, 1)
	if st := c.Stats("", time.Second); st.LastError != "" {
		t.Fatalf("after a write: last error %q", st.LastError)
	}
}
