package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/replayguard/replayguard/engine"
)

// Paging limits of the list endpoints.
const (
	defaultLimit  = 100
	maxLimit      = 1000
	maxBodyBytes  = 64 << 10
	maxReasonSize = 4096
	maxPageBytes  = 8 << 20 // payload bytes in one quarantine page; past it the page ends early
	maxPartLimit  = 100000  // entities or sources in a part of state or sources
)

// state answers exactly what `replayguard state --json` prints; with
// entity (repeated), only the entities with those names or matching those
// patterns (engine.EntityMatcher); with limit, the first entities by name
// only, X-Total-Count saying how many there are.
func (s *Server) state(w http.ResponseWriter, r *http.Request) {
	limit, err := partLimit(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	match, err := engine.EntityMatcher(r.URL.Query()["entity"])
	if err != nil {
		writeError(w, http.StatusBadRequest, "entity: %v", err)
		return
	}
	var st []engine.EntityState
	switch {
	case r.URL.Query().Has("entity"):
		st, err = s.deps.Engine.ReadState(r.Context())
		st = slices.DeleteFunc(st, func(e engine.EntityState) bool { return !match(e.Name) })
		if limit > 0 {
			w.Header().Set("X-Total-Count", strconv.Itoa(len(st)))
			slices.SortFunc(st, func(a, b engine.EntityState) int { return strings.Compare(a.Name, b.Name) })
			st = st[:min(limit, len(st))]
		}
	case limit == 0:
		st, err = s.deps.Engine.ReadState(r.Context())
	default:
		var total int
		st, total, err = s.deps.Engine.ReadStateUpTo(r.Context(), limit)
		w.Header().Set("X-Total-Count", strconv.Itoa(total))
	}
	if err != nil {
		s.storeUnavailable(w, err)
		return
	}
	writeJSON(w, http.StatusOK, engine.StateJSON(st))
}

// storeUnavailable answers 503 when the store could not be read.
func (s *Server) storeUnavailable(w http.ResponseWriter, err error) {
	writeError(w, http.StatusServiceUnavailable, "the store cannot be read: %v", err)
}

// sources answers what `replayguard sources --json` prints; with limit,
// that many sources at most, those with open gaps first, X-Total-Count
// and X-Open-Gaps saying how many sources and missing sequences there are
// in all.
func (s *Server) sources(w http.ResponseWriter, r *http.Request) {
	limit, err := partLimit(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var reports []engine.SourceReport
	if limit == 0 {
		reports, err = s.deps.Engine.ReadSources(r.Context())
	} else {
		var sel engine.SourceSelection
		sel, err = s.deps.Engine.ReadSourcesUpTo(r.Context(), limit)
		reports = sel.Reports
		w.Header().Set("X-Total-Count", strconv.Itoa(sel.Total))
		w.Header().Set("X-Open-Gaps", strconv.FormatInt(sel.OpenGaps, 10))
	}
	if err != nil {
		s.storeUnavailable(w, err)
		return
	}
	if reports == nil {
		reports = []engine.SourceReport{}
	}
	writeJSON(w, http.StatusOK, reports)
}

// statsJSON is the body of /api/v1/stats: window sizes, the audit head and,
// with a Hub, the decisions counted since it started. The window sizes are
// left out on a shared store: its windows are the group's, in the store,
// not held by this member (/api/v1/sources reads them).
type statsJSON struct {
	Version  string `json:"version,omitempty"`
	Position uint64 `json:"position"`
	// Head is the hash of the record at Position, so that a reader of the
	// log through the API can tell its last record was not rewritten.
	Head *engine.Hash `json:"head,omitempty"`
	// Base is where the stored log begins, when the store keeps one (see
	// engine.AuditTrimmer): the last record audit retention moved out
	// (position 0 when none), to which the first stored record links, so
	// that a reader of the log through the API can tell records removed
	// from its start from records retention moved to the archive.
	Base     *baseJSON `json:"base,omitempty"`
	Keys     *int      `json:"keys,omitempty"`
	Sources  *int      `json:"sources,omitempty"`
	Entities *int      `json:"entities,omitempty"`
	Counts   *Counts   `json:"counts,omitempty"`
}

// baseJSON is a store's audit base as /api/v1/stats says it.
type baseJSON struct {
	Position uint64      `json:"position"`
	Hash     engine.Hash `json:"hash"`
}

// auditBase is a store that keeps where its log begins (engine.AuditTrimmer).
type auditBase interface {
	AuditBase(ctx context.Context) (engine.AuditHead, error)
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	var base *baseJSON
	if b, ok := s.deps.Audit.(auditBase); ok { // read before the head: a trim meanwhile leaves the head above it
		h, err := b.AuditBase(r.Context())
		if err != nil {
			s.serverError(w, r, fmt.Errorf("read the audit base: %w", err))
			return
		}
		base = &baseJSON{Position: h.Position, Hash: h.Hash}
	}
	st := s.deps.Engine.Stats()
	out := statsJSON{Version: s.cfg.Version, Position: st.Position, Base: base}
	if st.Position > 0 {
		out.Head = &st.Head
	}
	if !st.Shared {
		out.Keys, out.Sources, out.Entities = &st.Keys, &st.Sources, &st.Entities
	}
	if s.deps.Hub != nil {
		c := s.deps.Hub.Counts()
		out.Counts = &c
	}
	writeJSON(w, http.StatusOK, out)
}

// QuarantineItem is one held message as the API lists it, the same as a
// line of `replayguard quarantine list`: the raw bytes in payload_b64, and
// the payload again as JSON when it is valid JSON (else null).
type QuarantineItem struct {
	ID         uint64          `json:"id"`
	Outcome    string          `json:"outcome"`
	Reason     string          `json:"reason"`
	Route      string          `json:"route,omitempty"`
	Topic      string          `json:"topic"`
	Key        *string         `json:"key"` // null for a message with none (malformed, a Sparkplug message held before its birth)
	Time       time.Time       `json:"time"`
	Dup        bool            `json:"dup"`
	Broker     string          `json:"broker,omitempty"`
	Feed       string          `json:"feed,omitempty"`
	Payload    json.RawMessage `json:"payload"`
	PayloadB64 string          `json:"payload_b64"`
}

// NewQuarantineItem returns e as the API lists it.
func NewQuarantineItem(e engine.QuarantineEntry) QuarantineItem {
	it := QuarantineItem{ID: e.ID, Outcome: e.Outcome, Reason: e.Reason, Route: e.Route, Topic: e.Topic,
		Time: e.Time, Dup: e.Dup, Broker: e.Broker, Feed: e.Feed, Payload: json.RawMessage("null"),
		PayloadB64: base64.StdEncoding.EncodeToString(e.Payload)}
	if e.Key != "" {
		it.Key = &e.Key
	}
	if engine.ValidJSON(e.Payload) { // nested at most 1000 levels: the response, a few levels more, still encodes
		it.Payload = e.Payload
	}
	return it
}

// quarantinePage is the body of GET /api/v1/quarantine. Next is the from
// of the next page, null on the last.
type quarantinePage struct {
	Entries []QuarantineItem `json:"entries"`
	Total   int              `json:"total"` // open entries in all
	Next    *uint64          `json:"next"`
}

func (s *Server) quarantineList(w http.ResponseWriter, r *http.Request) {
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
	page := quarantinePage{Entries: []QuarantineItem{}}
	size := 0
	// A store that counts its entries without reading them lets the scan
	// stop at the page's end: a quarantine of large payloads is not read
	// whole for each page.
	counter, counts := s.deps.Quarantine.(engine.QuarantineCounter)
	pageDone := errors.New("page done")
	err = s.deps.Quarantine.ScanQuarantine(r.Context(), func(e engine.QuarantineEntry) error {
		page.Total++
		full := len(page.Entries) == limit || len(page.Entries) > 0 && size+len(e.Payload) > maxPageBytes
		switch {
		case e.ID < from:
		case page.Next != nil:
		case full:
			id := e.ID
			page.Next = &id
			if counts {
				return pageDone
			}
		default:
			size += len(e.Payload)
			page.Entries = append(page.Entries, NewQuarantineItem(e))
		}
		return nil
	})
	if errors.Is(err, pageDone) { // the scan stopped short of the end: count the rest
		page.Total, err = counter.CountQuarantine(r.Context())
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) quarantineOne(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "quarantine")
	if !ok {
		return
	}
	e, err := s.deps.Quarantine.Quarantined(r.Context(), id)
	if err != nil {
		s.reviewError(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, NewQuarantineItem(e))
}

// resolution is the answer to a release or discard: what was audited.
type resolution struct {
	ID       uint64 `json:"id"`
	Position uint64 `json:"position"` // the audit record of this action
	Outcome  string `json:"outcome"`
	Reason   string `json:"reason,omitempty"`
	Route    string `json:"route,omitempty"`
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"` // the token's name, or the one the body named (see claimedOperator)
	Held     uint64 `json:"held,omitempty"`     // a release held again: its new entry
}

// releaseBody is the optional body of a release.
type releaseBody struct {
	Operator string `json:"operator"` // without tokens only: see claimedOperator
}

type discardBody struct {
	Reason   string `json:"reason"`
	Operator string `json:"operator"` // without tokens only: see claimedOperator
}

// maxOperatorSize bounds an operator's name a request body gives.
const maxOperatorSize = 200

// badReason reports whether a reason holds a control character other than
// tab, or invalid UTF-8, as an operator's name may not: the audit record
// carries it as is.
func badReason(reason string) bool {
	return strings.ContainsFunc(reason, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }) || !utf8.ValidString(reason)
}

// errNotTheToken is a body naming an operator other than the token's
// holder: refused (403), since the token names the operator.
var errNotTheToken = errors.New("not the token's operator")

// claimedOperator is who a write is audited as: the token's name, else
// (open writes on loopback, no tokens configured) the name the body
// gives, as the CLI sends the OS user's, which the process takes on trust
// as the CLI on a local store does; "" when neither names one. With a
// token, a body naming someone else is refused (errNotTheToken), as the
// CLI refuses --operator beside a token: audited under the token's name,
// the write would name another than the caller said.
func claimedOperator(token, claimed string) (string, error) {
	claimed = strings.TrimSpace(claimed)
	if token != "" {
		if claimed != "" && claimed != token {
			return "", fmt.Errorf("%w: the body names %q, and the token names the operator, %s: leave \"operator\" out, or use %q's own token",
				errNotTheToken, claimed, token, claimed)
		}
		return token, nil
	}
	switch {
	case strings.ContainsFunc(claimed, unicode.IsControl) || !utf8.ValidString(claimed):
		return "", fmt.Errorf("operator %q has control characters or invalid UTF-8", claimed)
	case len(claimed) > maxOperatorSize:
		return "", fmt.Errorf("operator is over %d bytes", maxOperatorSize)
	}
	return claimed, nil
}

func (s *Server) release(w http.ResponseWriter, r *http.Request, operator string) {
	id, ok := pathID(w, r, "quarantine")
	if !ok {
		return
	}
	var body releaseBody
	if err := readBody(w, r, &body, true); err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	operator, err := claimedOperator(operator, body.Operator)
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	d, err := s.deps.Engine.Release(r.Context(), id, operator)
	if err != nil {
		s.reviewError(w, r, id, err)
		return
	}
	res := resolution{ID: id, Position: d.Position, Outcome: d.Outcome.String(), Reason: d.Reason, Route: d.Route,
		Operator: operator, Held: d.Held}
	if !d.Key.IsZero() {
		res.Key = d.Key.String()
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) discard(w http.ResponseWriter, r *http.Request, operator string) {
	id, ok := pathID(w, r, "quarantine")
	if !ok {
		return
	}
	var body discardBody
	if err := readBody(w, r, &body, false); err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	body.Reason = strings.TrimSpace(body.Reason)
	switch {
	case body.Reason == "":
		writeError(w, http.StatusBadRequest, `a discard needs a non-empty "reason"`)
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
	d, err := s.deps.Engine.Discard(r.Context(), id, body.Reason, operator)
	if err != nil {
		s.reviewError(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, resolution{ID: id, Position: d.Position, Outcome: engine.OutcomeDiscarded,
		Reason: body.Reason, Route: d.Route, Operator: operator})
}

// reviewError maps the engine's and store's errors for a quarantine entry.
func (s *Server) reviewError(w http.ResponseWriter, r *http.Request, id uint64, err error) {
	switch {
	case errors.Is(err, engine.ErrNotFound):
		writeError(w, http.StatusNotFound, "no open quarantine entry %d", id)
	case errors.Is(err, engine.ErrStillMalformed):
		writeError(w, http.StatusConflict, "%v; discard it instead", err)
	case errors.Is(err, engine.ErrInProgress):
		writeError(w, http.StatusConflict, "%v; look again once it has answered", err)
	case errors.Is(err, engine.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "%v", err)
	default:
		s.serverError(w, r, err)
	}
}

// pathID reads the path's id of a quarantine or outbox (what) entry.
func pathID(w http.ResponseWriter, r *http.Request, what string) (uint64, bool) {
	raw := r.PathValue("id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || id == 0 {
		writeError(w, http.StatusBadRequest, "bad %s id %q: want a positive integer", what, raw)
		return 0, false
	}
	return id, true
}

// errBody is a request body that does not decode; errTooLarge one over
// maxBodyBytes.
var (
	errBody     = errors.New("bad request body")
	errTooLarge = errors.New("request body too large")
)

func statusOf(err error) int {
	switch {
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errNotTheToken):
		return http.StatusForbidden
	}
	return http.StatusBadRequest
}

// readBody decodes one JSON object into v, refusing unknown fields and
// trailing data. An empty body is accepted when optional.
func readBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%w: over %d bytes", errTooLarge, maxBodyBytes)
	case err != nil:
		return fmt.Errorf("%w: %v", errBody, err)
	case len(bytes.TrimSpace(raw)) == 0 && optional:
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errBody, err)
	}
	// dec.More is false before a stray '}' or ']', so look at what is left
	// itself: anything but white space after the object is refused.
	if len(bytes.TrimSpace(raw[dec.InputOffset():])) > 0 {
		return fmt.Errorf("%w: data after the JSON object", errBody)
	}
	// The decoder keeps the last of a key given twice; which one the
	// client meant cannot be told.
	if key, ok := repeatedKey(raw[:dec.InputOffset()]); ok {
		return fmt.Errorf("%w: key %q given twice", errBody, key)
	}
	return nil
}

// repeatedKey returns a key that an object of raw, one JSON value that
// decodes, gives twice.
func repeatedKey(raw []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	// For each object open, its keys seen; nil for an array.
	var open []map[string]bool
	afterKey := false // the token read last was an object's key
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		inObject := len(open) > 0 && open[len(open)-1] != nil
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				open = append(open, map[string]bool{})
			case '[':
				open = append(open, nil)
			default:
				open = open[:len(open)-1]
			}
			afterKey = false
			continue
		case string:
			if inObject && !afterKey {
				keys := open[len(open)-1]
				if keys[v] {
					return v, true
				}
				keys[v] = true
				afterKey = true
				continue
			}
		}
		afterKey = false
	}
}

func uintParam(q url.Values, name string, def uint64) (uint64, error) {
	raw := q.Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want a non-negative integer", name, raw)
	}
	return n, nil
}

// partLimit reads the limit of state and sources: absent, 0 (every
// row); else at least 1, capped at maxPartLimit.
func partLimit(q url.Values) (int, error) {
	n, err := uintParam(q, "limit", 0)
	switch {
	case err != nil:
		return 0, err
	case n == 0 && q.Has("limit"):
		return 0, fmt.Errorf("limit=0: want 1 to %d, or no limit for every one", maxPartLimit)
	}
	return int(min(n, maxPartLimit)), nil
}

// limitParam reads limit: default 100, at most 1000 (larger is capped).
func limitParam(q url.Values) (int, error) {
	n, err := uintParam(q, "limit", defaultLimit)
	switch {
	case err != nil:
		return 0, err
	case n == 0:
		return 0, fmt.Errorf("limit=0: want 1 to %d", maxLimit)
	}
	return int(min(n, maxLimit)), nil
}
