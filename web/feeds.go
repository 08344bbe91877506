package web

import "net/http"

// FeedStatus is one redundant broker path (mqtt.feeds) as GET
// /api/v1/feeds and the dashboard show it.
type FeedStatus struct {
	Name      string `json:"name"`
	Connected bool   `json:"connected"` // its broker connection is up (replayguard_feed_connected)
	// Deliveries counts what the feed delivered since start; First those
	// it delivered first (applied or applied late: the messages it won),
	// Duplicates those decided duplicate (mostly the twin of a message the
	// other feed delivered first).
	Deliveries uint64 `json:"deliveries"`
	First      uint64 `json:"first"`
	Duplicates uint64 `json:"duplicates"`
	// AppliedAgain counts the twins it delivered that were applied
	// although the other feed's copy was applied before: their key had
	// left the key window (counted in First too).
	AppliedAgain uint64 `json:"applied_again"`
	// BehindSeconds is how long after the other feed's copy the last twin
	// this feed delivered arrived: how far the feed trails; 0 before any.
	BehindSeconds float64 `json:"behind_seconds"`
}

// feeds answers the redundant feeds' state; {"feeds": []} with one path.
func (s *Server) feeds(w http.ResponseWriter, r *http.Request) {
	out := []FeedStatus{}
	if s.deps.Feeds != nil {
		out = append(out, s.deps.Feeds()...)
	}
	writeJSON(w, http.StatusOK, map[string][]FeedStatus{"feeds": out})
}
