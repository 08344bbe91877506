package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
)

func quarantineFlags(fs *flag.FlagSet) {
	fs.String("reason", "", "discard: why (required)")
}

// heldLine is one `quarantine list` line.
type heldLine struct {
	ID         uint64          `json:"id"`
	Outcome    string          `json:"outcome"`
	Reason     string          `json:"reason"`
	Route      string          `json:"route,omitempty"`
	Topic      string          `json:"topic"`
	Key        string          `json:"key,omitempty"`
	Time       time.Time       `json:"time"`
	Dup        bool            `json:"dup"`
	Broker     string          `json:"broker,omitempty"`
	Payload    json.RawMessage `json:"payload"`     // the raw payload when it is JSON, else null
	PayloadB64 string          `json:"payload_b64"` // the raw bytes, always
}

func toHeldLine(q engine.QuarantineEntry) heldLine {
	l := heldLine{ID: q.ID, Outcome: q.Outcome, Reason: q.Reason, Route: q.Route, Topic: q.Topic, Key: q.Key,
		Time: q.Time, Dup: q.Dup, Broker: q.Broker, Payload: json.RawMessage("null"),
		PayloadB64: base64.StdEncoding.EncodeToString(q.Payload)}
	if json.Valid(q.Payload) {
		l.Payload = compact(q.Payload)
	}
	return l
}

func compact(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

func cmdQuarantine(e *env) error {
	if len(e.args) == 0 {
		return fmt.Errorf("%w: quarantine takes list, release ID or discard ID", errUsage)
	}
	switch e.args[0] {
	case "list":
		a, err := openRead(e)
		if err != nil {
			return err
		}
		defer a.Close()
		enc := json.NewEncoder(e.stdout)
		return a.Store.ScanQuarantine(e.ctx, func(q engine.QuarantineEntry) error {
			return enc.Encode(toHeldLine(q))
		})
	case "release", "discard":
		if len(e.args) != 2 {
			return fmt.Errorf("%w: quarantine %s takes one ID", errUsage, e.args[0])
		}
		id, err := strconv.ParseUint(e.args[1], 10, 64)
		if err != nil || id == 0 {
			return fmt.Errorf("%w: %q is not a quarantine id", errUsage, e.args[1])
		}
		return resolve(e, e.args[0], id)
	default:
		return fmt.Errorf("%w: unknown quarantine action %q", errUsage, e.args[0])
	}
}

func resolve(e *env, action string, id uint64) error {
	reason := e.flagString("reason")
	if action == "discard" && reason == "" {
		return fmt.Errorf("%w: discard needs --reason TEXT", errUsage)
	}
	a, err := app.Open(e.ctx, e.cfg, app.Options{Logger: e.log})
	if err != nil {
		return err
	}
	defer a.Close()
	var d engine.Decision
	if action == "release" {
		d, err = a.Engine.Release(e.ctx, id)
	} else {
		d, err = a.Engine.Discard(e.ctx, id, reason)
	}
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("no quarantined message #%d", id)
	}
	if err != nil {
		return err
	}
	if action == "release" {
		fmt.Fprintf(e.stdout, "#%d released: %s (audit position %d)\n", id, d.Outcome, d.Position)
	} else {
		fmt.Fprintf(e.stdout, "#%d discarded (audit position %d)\n", id, d.Position)
	}
	return nil
}
