package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// maxAuditScan bounds the records one audit request examines, so that a
// filter matching little cannot make a request read the whole log: the
// page then holds fewer records than the limit and next says where to go on.
const maxAuditScan = 100_000

// auditFilter is the query of GET /api/v1/audit.
type auditFilter struct {
	key, route, outcome, source string
	since, until                time.Time // since inclusive, until exclusive; zero: open
	from                        uint64
	limit                       int
}

func parseAuditFilter(q url.Values) (auditFilter, error) {
	f := auditFilter{key: strings.ToLower(q.Get("key")), route: q.Get("route"),
		outcome: q.Get("outcome"), source: q.Get("source")}
	if _, ok := engine.ParseOutcome(f.outcome); f.outcome != "" && !ok && !slices.Contains(recordOutcomes, f.outcome) {
		return f, fmt.Errorf("outcome=%q: want one of %s", f.outcome, strings.Join(outcomeNames(), ", "))
	}
	var err error
	if f.since, err = timeParam(q, "since"); err != nil {
		return f, err
	}
	if f.until, err = timeParam(q, "until"); err != nil {
		return f, err
	}
	if f.from, err = uintParam(q, "from", 0); err != nil {
		return f, err
	}
	f.limit, err = limitParam(q)
	return f, err
}

func outcomeNames() []string {
	var names []string
	for _, o := range engine.Outcomes() {
		names = append(names, o.String())
	}
	return append(names, recordOutcomes...)
}

// recordOutcomes are the outcomes of audit records that are no decision:
// an operator's discard, what became of an outbox entry a downstream
// refused, and an audit sink an operator forgot.
var recordOutcomes = []string{engine.OutcomeDiscarded, engine.OutcomeForwardHeld, engine.OutcomeForwardRetried, engine.OutcomeForwardDropped,
	engine.OutcomeSinkForgotten}

func timeParam(q url.Values, name string) (time.Time, error) {
	raw := q.Get(name)
	if raw == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return t, fmt.Errorf("%s=%q: want an RFC 3339 time such as 2024-05-01T12:00:00Z", name, raw)
	}
	return t, nil
}

// match reports whether r passes the filter. A source matches any one of
// the record's source parts or all of them joined with "/".
func (f *auditFilter) match(r *engine.AuditRecord) bool {
	switch {
	case f.key != "" && (r.Key.IsZero() || r.Key.String() != f.key),
		f.route != "" && r.Route != f.route,
		f.outcome != "" && r.Outcome != f.outcome,
		!f.since.IsZero() && r.Time.Before(f.since),
		!f.until.IsZero() && !r.Time.Before(f.until):
		return false
	case f.source == "":
		return true
	}
	return slices.Contains(r.Source, f.source) || strings.Join(r.Source, "/") == f.source
}

// auditPage is the body of GET /api/v1/audit. Next is the from of the next
// page, null when the scan reached the end of the log.
type auditPage struct {
	Records []engine.AuditRecord `json:"records"`
	Next    *uint64              `json:"next"`
}

var errPageFull = errors.New("page full")

func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	f, err := parseAuditFilter(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	page := auditPage{Records: []engine.AuditRecord{}}
	scanned := 0
	err = s.deps.Audit.ScanAudit(r.Context(), f.from, func(rec engine.AuditRecord) error {
		if len(page.Records) == f.limit || scanned == maxAuditScan {
			next := rec.Position
			page.Next = &next
			return errPageFull
		}
		scanned++
		if f.match(&rec) {
			page.Records = append(page.Records, rec)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
