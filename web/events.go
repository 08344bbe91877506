package web

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

// Event stream timing.
const (
	pingInterval = 15 * time.Second // a comment line keeps proxies from closing an idle stream
	writeTimeout = 10 * time.Second // a client that takes longer to take a write is dropped
	retryMillis  = 2000             // the reconnect delay a browser's EventSource uses
)

// events serves the server-sent-events stream: `hello` (with the audit
// position) on connect, then a `decision` per committed audit record and a
// `state` per changed entity. `resync` means events were dropped because
// the client fell behind: refetch state, sources and the quarantine.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	hub := s.deps.Hub
	if hub == nil {
		writeError(w, http.StatusNotFound, "the event stream is not enabled")
		return
	}
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/event-stream")
		return
	}
	sub := hub.subscribe()
	if sub == nil {
		writeError(w, http.StatusServiceUnavailable, "too many event-stream clients")
		return
	}
	defer hub.unsubscribe(sub)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(write func(io.Writer) error) bool {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		return write(w) == nil && rc.Flush() == nil
	}
	hello := fmt.Sprintf(`{"position":%d}`, s.deps.Engine.Stats().Position)
	if !send(func(w io.Writer) error { return writeEvent(w, "hello", hello, true) }) {
		return
	}
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	for {
		var ok bool
		select {
		case <-r.Context().Done():
			return
		case ev := <-sub.ch:
			ok = send(func(w io.Writer) error { return writeQueued(w, sub, ev) })
		case <-ping.C:
			ok = send(func(w io.Writer) error { _, err := io.WriteString(w, ": ping\n\n"); return err })
		}
		if !ok {
			return
		}
	}
}

// writeQueued writes ev and whatever else is queued, then a resync if the
// hub dropped events for this client.
func writeQueued(w io.Writer, sub *subscriber, ev event) error {
	for more := true; more; {
		if err := writeEvent(w, ev.name, string(ev.data), false); err != nil {
			return err
		}
		select {
		case ev = <-sub.ch:
		default:
			more = false
		}
	}
	if sub.lost.Swap(false) {
		return writeEvent(w, "resync", "{}", false)
	}
	return nil
}

func writeEvent(w io.Writer, name, data string, retry bool) error {
	var err error
	if retry {
		_, err = fmt.Fprintf(w, "retry: %d\nevent: %s\ndata: %s\n\n", retryMillis, name, data)
	} else {
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
	}
	return err
}
