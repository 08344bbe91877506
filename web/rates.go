package web

import (
	"fmt"
	"net/http"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Rate history limits: the Hub keeps one bucket per second for rateSpan
// seconds, and /api/v1/rates serves a window of at most that.
const (
	rateSpan      = 15 * 60 // seconds of history kept
	defaultWindow = 5 * time.Minute
)

// outcomeIndex numbers the delivery outcomes, in engine.Outcomes order.
var outcomeIndex = func() map[string]int {
	m := map[string]int{}
	for i, o := range engine.Outcomes() {
		m[o.String()] = i
	}
	return m
}()

// rateRing counts deliveries per second by outcome over the last rateSpan
// seconds, in a fixed ring: bucket i holds second secs[i], and a bucket
// found holding an older second is cleared before it is reused, so the
// ring never grows. The zero value is empty. Not safe for concurrent use:
// the Hub's mutex guards it.
type rateRing struct {
	secs   [rateSpan]int64
	counts [rateSpan][]uint64 // per outcome index; nil until the bucket is first used
	used   [rateSpan]bool
	newest int64 // the latest second counted
}

// add counts one decision of outcome o at second sec, now being the
// current second. A second already older than the ring holds (its bucket
// reused by a later one) is not counted: it is outside every window the
// ring can serve. But one that is older than the whole history while now
// says it is current means the clock stepped back: the history, of seconds
// that are now in the future, is dropped, or the decisions since would not
// be charted until the clock caught up with it.
func (r *rateRing) add(sec int64, o int, now int64) {
	if sec+rateSpan <= r.newest && sec > now-rateSpan {
		*r = rateRing{}
	}
	r.newest = max(r.newest, sec)
	i := bucketOf(sec)
	switch {
	case r.used[i] && r.secs[i] == sec:
	case r.used[i] && r.secs[i] > sec:
		return
	default:
		if r.counts[i] == nil {
			r.counts[i] = make([]uint64, len(outcomeIndex))
		}
		clear(r.counts[i])
		r.secs[i], r.used[i] = sec, true
	}
	r.counts[i][o]++
}

// window returns, per outcome index, the counts of the n seconds ending
// with second last, oldest first; a second the ring does not hold is 0.
func (r *rateRing) window(last int64, n int) [][]uint64 {
	out := make([][]uint64, len(outcomeIndex))
	for o := range out {
		out[o] = make([]uint64, n)
	}
	for k := range n {
		sec := last - int64(n-1-k)
		i := bucketOf(sec)
		if !r.used[i] || r.secs[i] != sec {
			continue
		}
		for o, c := range r.counts[i] {
			out[o][k] = c
		}
	}
	return out
}

func bucketOf(sec int64) int {
	i := int(sec % rateSpan)
	if i < 0 {
		i += rateSpan
	}
	return i
}

// Rates are the deliveries per second by outcome over a window, from a
// Hub: the body of /api/v1/rates.
type Rates struct {
	Start       time.Time           `json:"start"`        // the first second of the window, UTC
	Now         time.Time           `json:"now"`          // the server's clock as it answered
	StepSeconds int                 `json:"step_seconds"` // 1: one bucket per second
	Position    uint64              `json:"position"`     // the last audit position counted; later decision events are not in Counts
	Counts      map[string][]uint64 `json:"counts"`       // per outcome, one bucket per second from Start, oldest first; the last is the current second, still filling
}

// Rates returns the deliveries per second by outcome over the window that
// ends with the current second: window is rounded up to whole seconds and
// capped at the history kept (15 minutes). A decision counts in the second
// of its audit record's time. Releases and discards are not deliveries and
// are not counted, as in Counts.Decisions.
func (h *Hub) Rates(window time.Duration) Rates {
	n := int(min(max((window+time.Second-1)/time.Second, 1), rateSpan))
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now().UTC()
	last := now.Unix()
	per := h.rates.window(last, n)
	out := Rates{Start: time.Unix(last-int64(n-1), 0).UTC(), Now: now, StepSeconds: 1, Position: h.position,
		Counts: make(map[string][]uint64, len(per))}
	for o, name := range engine.Outcomes() {
		out.Counts[name.String()] = per[o]
	}
	return out
}

// rates serves GET /api/v1/rates?window=5m.
func (s *Server) rates(w http.ResponseWriter, r *http.Request) {
	if s.deps.Hub == nil {
		writeError(w, http.StatusNotFound, "decision rates are not enabled")
		return
	}
	window, err := windowParam(r.URL.Query().Get("window"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, s.deps.Hub.Rates(window))
}

// windowParam reads window: a Go duration of whole seconds, 1s to 15m;
// default 5m.
func windowParam(raw string) (time.Duration, error) {
	if raw == "" {
		return defaultWindow, nil
	}
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		return 0, fmt.Errorf("window=%q: want a duration such as 5m or 90s", raw)
	case d%time.Second != 0 || d < time.Second || d > rateSpan*time.Second:
		return 0, fmt.Errorf("window=%q: want whole seconds from 1s to %s", raw, rateSpan*time.Second)
	}
	return d, nil
}
