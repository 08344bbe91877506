package web

import (
	"errors"
	"net/http"
	"time"
)

// ExplainQuery is what GET /api/v1/explain/{entity} asks Deps.Explain.
type ExplainQuery struct {
	// Entity is the entity's name, slashes and all ("incident/7").
	Entity string
	// Field keeps only that field's changes; empty: every field.
	Field string
	// At shows the entity as the picture showed it then; zero: now.
	At time.Time
}

// explain answers an entity's lineage: every decision that changed it,
// with the replays suppressed and the deliveries held beside each, and
// its state at the query's at.
func (s *Server) explain(w http.ResponseWriter, r *http.Request) {
	if s.deps.Explain == nil {
		writeError(w, http.StatusNotFound, "this process does not explain entities")
		return
	}
	q := ExplainQuery{Entity: r.PathValue("entity"), Field: r.URL.Query().Get("field")}
	if q.Entity == "" {
		writeError(w, http.StatusBadRequest, "name an entity: /api/v1/explain/{entity}, e.g. /api/v1/explain/incident/7")
		return
	}
	var err error
	if q.At, err = timeParam(r.URL.Query(), "at"); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	lineage, err := s.deps.Explain(r.Context(), q)
	switch {
	case errors.Is(err, ErrNoLineage):
		writeError(w, http.StatusNotFound, "%v", err)
	case err != nil:
		s.serverError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, lineage)
	}
}
