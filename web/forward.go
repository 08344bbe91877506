package web

import (
	"net/http"
	"time"
)

// ForwardStatus is the state of this process's forward drainer, the body
// of GET /api/v1/forward: whether any route forwards here, this member's
// pending entries against outbox.max_entries, whether the outbox is full
// (the consumer has stopped acknowledging upstream, as /readyz says), and
// each output's counts and failure. The pending entries of every member
// of a group are in GET /api/v1/outbox.
type ForwardStatus struct {
	// Forwarding is false when no route of this process forwards: then
	// the rest is zero.
	Forwarding bool            `json:"forwarding"`
	Member     string          `json:"member"` // whose outbox; "" on a single-owner store
	Depth      int             `json:"depth"`
	MaxEntries int             `json:"max_entries"`
	Full       bool            `json:"full"`
	FullSince  time.Time       `json:"full_since,omitzero"`
	Outputs    []ForwardOutput `json:"outputs"`
}

// ForwardOutput is one output of the drainer: an output kind draining one
// member's outbox. Its fields are forward.OutputStatus's, in the same
// order, so that one converts to the other.
type ForwardOutput struct {
	Output string `json:"output"`
	Member string `json:"member"`
	// Delivered and Held count the entries acknowledged downstream and
	// those held since start (refused for good, or held by an operator
	// through this process); Failures the failed attempts.
	Delivered uint64 `json:"delivered"`
	Held      uint64 `json:"held"`
	Failures  uint64 `json:"failures"`
	// Failing is set from a failed attempt until one succeeds; Since is
	// when the last failing began (kept after it ends), Attempts how many
	// have failed since, LastError the last one's error ("" once one
	// succeeds).
	Failing   bool      `json:"failing"`
	Since     time.Time `json:"since,omitzero"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	// Stuck is the pending entry the failing attempts stop at, which the
	// entries behind it wait for; absent while none has.
	Stuck ForwardStuck `json:"stuck,omitzero"`
}

// ForwardStuck is a pending entry failed attempts stop at: its id (for
// `outbox hold`), target, key, the first failed attempt at it and how many
// have failed since.
type ForwardStuck struct {
	ID       uint64    `json:"id"`
	Target   string    `json:"target"`
	Key      string    `json:"key"`
	Since    time.Time `json:"since"`
	Attempts int       `json:"attempts"`
}

// forward serves GET /api/v1/forward. It reads no store: the dashboard
// polls it.
func (s *Server) forward(w http.ResponseWriter, _ *http.Request) {
	st := ForwardStatus{Outputs: []ForwardOutput{}}
	if s.deps.Forward != nil {
		st = s.deps.Forward()
		st.Forwarding = true
		if st.Outputs == nil {
			st.Outputs = []ForwardOutput{}
		}
		st.FullSince = st.FullSince.UTC()
		for i := range st.Outputs {
			st.Outputs[i].Since = st.Outputs[i].Since.UTC()
		}
	}
	writeJSON(w, http.StatusOK, st)
}
