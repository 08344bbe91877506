package app

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/replayguard/replayguard/audit"
)

// HeldWarnEvery is how often at most run logs, while an audit sink keeps
// records beyond audit.retention.max_records in the store, the WARN that
// says so: at the first pass that finds it, then at most this often.
const HeldWarnEvery = 10 * time.Minute

// chainHeld is what one audit retention pass found the audit sinks keep
// of one chain ("" a single-owner store's log) beyond
// audit.retention.max_records, lowest cursor first.
type chainHeld struct {
	chain string
	held  []audit.SinkHeld
	stale bool // the pass failed before it read the sinks' cursors: the last finding stands
}

// heldBySinks is what the last audit retention pass under run found the
// audit sinks keep in the store beyond audit.retention.max_records: a sink
// whose endpoint is down, or slow, holds every record it has yet to
// deliver, and the store grows past the limit. It says so: a WARN per
// sink at the first pass that finds it holding records and then at most
// every HeldWarnEvery while it does, an INFO once no sink holds any,
// /readyz's warning (warning), and the records each sink holds for the
// metrics (bySink). Safe for concurrent use.
type heldBySinks struct {
	log   *slog.Logger
	max   uint64           // audit.retention.max_records
	every time.Duration    // HeldWarnEvery
	now   func() time.Time // time.Now

	mu     sync.Mutex
	last   []chainHeld
	warned map[string]time.Time // by sink, its last WARN
	sinks  []string             // every sink seen, for the metrics' zeros
}

func newHeldBySinks(log *slog.Logger, maxRecords uint64, sinks []string) *heldBySinks {
	return &heldBySinks{log: log, max: maxRecords, every: HeldWarnEvery, now: time.Now, warned: map[string]time.Time{}, sinks: slices.Clone(sinks)}
}

// note takes what a pass found, and logs it as the type says, each sink
// on its own.
func (h *heldBySinks) note(found []chainHeld) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var fresh []chainHeld
	for _, c := range found {
		if !c.stale {
			fresh = append(fresh, c)
			continue
		}
		for _, was := range h.last { // read no cursor: what the last pass found of the chain stands
			if was.chain == c.chain {
				fresh = append(fresh, was)
			}
		}
	}
	found = slices.DeleteFunc(fresh, func(c chainHeld) bool { return len(c.held) == 0 })
	was := len(h.last) > 0
	h.last = found
	now := h.now()
	due := map[string]bool{} // the sinks whose WARN this pass says
	for _, c := range found {
		for _, s := range c.held {
			if !slices.Contains(h.sinks, s.Sink) {
				h.sinks = append(h.sinks, s.Sink)
			}
			if w, ok := h.warned[s.Sink]; due[s.Sink] || !ok || now.Sub(w) >= h.every {
				due[s.Sink] = true
				attrs := []any{"sink", s.Sink, "records", s.Records, "cursor", s.Cursor, "max_records", h.max}
				if c.chain != "" {
					attrs = append(attrs, "chain", c.chain)
				}
				h.log.Warn("audit retention: held back by an audit sink that has yet to deliver records beyond audit.retention.max_records; "+
					"they stay in the store, which grows until the sink catches up: see to its endpoint (replayguard_audit_sink_failures_total), "+
					"or, gone for good, remove it from every member's audit.sinks and run `replayguard audit forget-sink "+s.Sink+" --reason TEXT`", attrs...)
			}
		}
	}
	for sink := range due {
		h.warned[sink] = now
	}
	if len(found) == 0 && was && len(h.warned) > 0 {
		h.log.Info("audit retention: no audit sink holds records beyond audit.retention.max_records any longer", "max_records", h.max)
	}
}

// bySink returns the records each sink held beyond
// audit.retention.max_records at the last pass, summed over the chains;
// 0 for a sink seen before that holds none now.
func (h *heldBySinks) bySink() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]uint64, len(h.sinks))
	for _, s := range h.sinks {
		out[s] = 0
	}
	for _, c := range h.last {
		for _, s := range c.held {
			out[s.Sink] += s.Records
		}
	}
	return out
}

// warning is /readyz's warning of the sinks that held records beyond
// audit.retention.max_records at the last pass; "" when none did.
func (h *heldBySinks) warning() string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.last) == 0 {
		return ""
	}
	held := map[string][]string{} // by sink: chain by chain
	for _, c := range h.last {
		for _, s := range c.held {
			where := fmt.Sprintf("%s (cursor at %d)", counted(s.Records, "record", "records"), s.Cursor)
			if c.chain != "" {
				where = fmt.Sprintf("%s of member %s's chain (cursor at %d)", counted(s.Records, "record", "records"), c.chain, s.Cursor)
			}
			held[s.Sink] = append(held[s.Sink], where)
		}
	}
	var parts []string
	for _, sink := range slices.Sorted(maps.Keys(held)) {
		parts = append(parts, fmt.Sprintf("audit sink %s has yet to deliver %s", sink, strings.Join(held[sink], ", ")))
	}
	return fmt.Sprintf("audit retention is held back: %s, beyond audit.retention.max_records (%d); the store keeps them, and grows, until the sink catches up",
		strings.Join(parts, "; "), h.max)
}
