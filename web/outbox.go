package web

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// HeldItem is one outbox entry its downstream refused for good, as the
// API lists it, the same as a line of `replayguard outbox list`: the
// downstream's answer in reason, the raw bytes in payload_b64 and the
// payload again as JSON when it is valid JSON (else null), as a
// quarantine entry's. Member is "" on a single-owner store.
type HeldItem struct {
	Member     string          `json:"member"`
	ID         uint64          `json:"id"`
	Output     string          `json:"output"`
	Target     string          `json:"target"`
	Route      string          `json:"route"`
	Topic      string          `json:"topic"`
	Key        string          `json:"key"`
	Reason     string          `json:"reason"`
	Time       time.Time       `json:"time"` // when the message was decided
	Payload    json.RawMessage `json:"payload"`
	PayloadB64 string          `json:"payload_b64"`
}

// NewHeldItem returns h as the API lists it.
func NewHeldItem(h engine.HeldEntry) HeldItem {
	it := HeldItem{Member: h.Member, ID: h.ID, Output: h.Output, Target: engine.RedactTarget(h.Output, h.Target), Route: h.Route, Topic: h.Topic,
		Key: h.Key.String(), Reason: h.Reason, Time: h.Time.UTC(), Payload: json.RawMessage("null"),
		PayloadB64: base64.StdEncoding.EncodeToString(h.Payload)}
	if engine.ValidJSON(h.Payload) { // as NewQuarantineItem
		it.Payload = h.Payload
	}
	return it
}

// HeldRef names a held entry: the from of the next page.
type HeldRef struct {
	Member string `json:"member"`
	ID     uint64 `json:"id"`
}

// OutboxPage is the body of GET /api/v1/outbox: a page of the held
// entries, by member then id, starting at the member and from parameters;
// how many are held in all; and each member's pending entries. Next is
// where the next page starts, null on the last.
type OutboxPage struct {
	Held      []HeldItem           `json:"held"`
	TotalHeld int                  `json:"total_held"`
	Pending   []engine.OutboxDepth `json:"pending"`
	Next      *HeldRef             `json:"next"`
}

func (s *Server) outboxList(w http.ResponseWriter, r *http.Request) {
	if s.deps.Outbox == nil {
		writeError(w, http.StatusNotFound, "this process keeps no outbox")
		return
	}
	q := r.URL.Query()
	from, err := uintParam(q, "from", 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	limit, err := limitParam(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	start := HeldRef{Member: q.Get("member"), ID: from}
	rep, err := s.deps.Outbox.OutboxReport(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	page := OutboxPage{Held: []HeldItem{}, TotalHeld: len(rep.Held), Pending: rep.Pending}
	if page.Pending == nil {
		page.Pending = []engine.OutboxDepth{}
	}
	size := 0
	for _, h := range rep.Held {
		if cmp.Or(strings.Compare(h.Member, start.Member), cmp.Compare(h.ID, start.ID)) < 0 {
			continue
		}
		if len(page.Held) == limit || len(page.Held) > 0 && size+len(h.Payload) > maxPageBytes {
			page.Next = &HeldRef{Member: h.Member, ID: h.ID}
			break
		}
		size += len(h.Payload)
		page.Held = append(page.Held, NewHeldItem(h))
	}
	writeJSON(w, http.StatusOK, page)
}

// forwardBody is the body of a retry (every field optional) or a drop
// (reason required). Member names the outbox on a shared store; without
// it, the one member whose held entries have the id.
type forwardBody struct {
	Member   string `json:"member"`
	Reason   string `json:"reason"`
	Operator string `json:"operator"` // without tokens only: see claimedOperator
}

// forwardResolution is the answer to a retry or drop: the entry and what
// was audited.
type forwardResolution struct {
	ID       uint64 `json:"id"`
	Member   string `json:"member,omitempty"` // whose outbox
	Output   string `json:"output"`
	Target   string `json:"target"`
	Position uint64 `json:"position"`        // the audit record of this action
	Chain    string `json:"chain,omitempty"` // the member whose audit chain holds it
	Outcome  string `json:"outcome"`
	Reason   string `json:"reason,omitempty"`
	Route    string `json:"route,omitempty"`
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"` // the token's name, or the one the body named (see claimedOperator)
}

func (s *Server) retryForward(w http.ResponseWriter, r *http.Request, operator string) {
	s.resolveForward(w, r, operator, "retry")
}

func (s *Server) dropForward(w http.ResponseWriter, r *http.Request, operator string) {
	s.resolveForward(w, r, operator, "drop")
}

// holdForward holds a pending entry (reason required): the one a
// downstream keeps failing, so that the entries behind it go on.
func (s *Server) holdForward(w http.ResponseWriter, r *http.Request, operator string) {
	s.resolveForward(w, r, operator, "hold")
}

// resolveForward retries or drops a held entry, or holds a pending one
// (action "retry", "drop", "hold").
func (s *Server) resolveForward(w http.ResponseWriter, r *http.Request, operator, action string) {
	retry := action == "retry"
	if s.deps.Outbox == nil {
		writeError(w, http.StatusNotFound, "this process keeps no outbox")
		return
	}
	id, ok := pathID(w, r, "outbox")
	if !ok {
		return
	}
	var body forwardBody
	if err := readBody(w, r, &body, retry); err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	body.Reason = strings.TrimSpace(body.Reason)
	switch {
	case !retry && body.Reason == "":
		writeError(w, http.StatusBadRequest, `a %s needs a non-empty "reason"`, action)
		return
	case len(body.Reason) > maxReasonSize:
		writeError(w, http.StatusBadRequest, "reason is over %d bytes", maxReasonSize)
		return
	case badReason(body.Reason):
		writeError(w, http.StatusBadRequest, "reason %q has control characters (a tab is allowed) or invalid UTF-8", body.Reason)
		return
	}
	operator, err := claimedOperator(operator, body.Operator)
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	var res engine.ForwardResolution
	switch action {
	case "retry":
		res, err = s.deps.Outbox.RetryForward(r.Context(), body.Member, id, body.Reason, operator)
	case "drop":
		res, err = s.deps.Outbox.DropForward(r.Context(), body.Member, id, body.Reason, operator)
	default:
		res, err = s.deps.Outbox.HoldPending(r.Context(), body.Member, id, body.Reason, operator)
	}
	switch {
	case errors.Is(err, engine.ErrNotFound) && action == "hold":
		writeError(w, http.StatusNotFound, "no pending outbox entry %d%s", id, ofMember(body.Member))
	case errors.Is(err, engine.ErrNotFound):
		writeError(w, http.StatusNotFound, "no held outbox entry %d%s", id, ofMember(body.Member))
	case errors.Is(err, engine.ErrAmbiguous):
		writeError(w, http.StatusConflict, "%v", err)
	case errors.Is(err, engine.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "%v", err)
	case err != nil:
		s.serverError(w, r, err)
	default:
		rec, h := res.Record, res.Entry
		writeJSON(w, http.StatusOK, forwardResolution{ID: id, Member: h.Member, Output: h.Output, Target: engine.RedactTarget(h.Output, h.Target),
			Position: rec.Position, Chain: rec.Member, Outcome: rec.Outcome, Reason: rec.Reason, Route: rec.Route,
			Key: h.Key.String(), Operator: operator})
	}
}

func ofMember(m string) string {
	if m == "" {
		return ""
	}
	return " of member " + m
}
