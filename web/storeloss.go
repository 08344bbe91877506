package web

import (
	"errors"
	"net/http"

	"github.com/replayguard/replayguard/engine"
)

// lossReport is a store loss as the API shows it.
type lossReport struct {
	Store     string `json:"store"`
	Member    string `json:"member"`
	Lost      string `json:"lost"`      // positions, "41..100"
	Uncovered string `json:"uncovered"` // positions no journal holds; "none"
	StoreHead uint64 `json:"store_head"`
	Committed uint64 `json:"committed_head"`
	Forked    bool   `json:"forked,omitempty"`
	Detected  string `json:"detected"`
	Error     string `json:"error"`
}

func reportLoss(l engine.StoreLoss) lossReport {
	return lossReport{Store: l.Store, Member: l.Member, Lost: l.Lost.String(), Uncovered: l.Uncovered.String(),
		StoreHead: l.Head.Position, Committed: l.Known.Position, Forked: l.Forked,
		Detected: l.Detected.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Error: l.Error()}
}

// storeLoss answers {"loss": null} while the store holds every commit this
// member made, else the loss that stops it.
func (s *Server) storeLoss(w http.ResponseWriter, _ *http.Request) {
	if s.deps.Loss == nil {
		writeError(w, http.StatusNotFound, "the store is not shared: there is no member chain to lose")
		return
	}
	out := struct {
		Loss *lossReport `json:"loss"`
	}{}
	if l := s.deps.Loss.Loss(); l != nil {
		r := reportLoss(*l)
		out.Loss = &r
	}
	writeJSON(w, http.StatusOK, out)
}

type acceptBody struct {
	Operator string `json:"operator"`
}

// acceptLoss takes an operator's acceptance of the loss that stops this
// member. The operator is the token's name; without tokens (open writes on
// loopback), the body's "operator", which is then required.
func (s *Server) acceptLoss(w http.ResponseWriter, r *http.Request, operator string) {
	if s.deps.Loss == nil {
		writeError(w, http.StatusNotFound, "the store is not shared: there is no member chain to lose")
		return
	}
	var body acceptBody
	if err := readBody(w, r, &body, operator != ""); err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	operator, err := claimedOperator(operator, body.Operator)
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	if operator == "" {
		writeError(w, http.StatusBadRequest, "accepting a store loss needs the operator's name: send {\"operator\": \"NAME\"}")
		return
	}
	l, err := s.deps.Loss.AcceptLoss(r.Context(), operator)
	var recovery string // the acceptance is recorded; what the recovery after it said, when it failed
	switch {
	case errors.Is(err, engine.ErrNoLoss), errors.Is(err, engine.ErrLossCovered):
		writeError(w, http.StatusConflict, "%v", err)
		return
	case errors.Is(err, engine.ErrRecoveryRetried):
		recovery = err.Error()
	case err != nil:
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Accepted lossReport `json:"accepted"`
		Operator string     `json:"operator"`
		Recovery string     `json:"recovery,omitempty"`
	}{reportLoss(l), operator, recovery})
}
