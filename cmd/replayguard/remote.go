package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/web"
)

// remote reads and reviews through a running `replayguard run`'s HTTP API,
// for when that process holds the embedded store.
type remote struct {
	base   string
	token  string
	client *http.Client
}

// remoteFor returns the API of the process that holds the store, when err
// says the store is locked and the configuration names an HTTP listener.
func (e *env) remoteFor(err error) (*remote, error) {
	if !errors.Is(err, engine.ErrLocked) || !e.cfg.HTTP.Enabled() {
		return nil, err
	}
	return e.remoteHolding(err, 30*time.Second)
}

// remoteHolding returns the API of the running process that held is about
// (a store or member it holds), each request bounded by timeout.
func (e *env) remoteHolding(held error, timeout time.Duration) (*remote, error) {
	token, err := e.apiToken()
	if err != nil {
		return nil, fmt.Errorf("%v; and the API token: %w", held, err)
	}
	scheme := "http"
	if e.cfg.HTTP.TLS.CertFile != "" {
		scheme = "https"
	}
	e.log.Info("held by a running process; using its API", "listen", e.cfg.HTTP.Listen)
	return &remote{base: scheme + "://" + e.cfg.HTTP.Listen, token: token, client: &http.Client{Timeout: timeout}}, nil
}

// EnvToken is the environment variable holding the bearer token the
// command sends to a running daemon's API, for an operator who holds a
// token of their own rather than the daemon's secret files.
const EnvToken = "REPLAYGUARD_TOKEN"

// apiToken picks the bearer token to send: the http.tokens entry named by
// --token-name, else $REPLAYGUARD_TOKEN, else the single token_env or
// token_file, else the only entry of http.tokens. With several entries and
// none chosen it sends none: reads still work unless auth_reads is set.
func (e *env) apiToken() (string, error) {
	h := e.cfg.HTTP
	if name := e.flagString("token-name"); name != "" {
		var names []string
		for _, t := range h.Tokens {
			if t.Name == name {
				return app.Secret(t.TokenEnv, t.TokenFile)
			}
			names = append(names, strconv.Quote(t.Name))
		}
		if len(names) == 0 {
			return "", fmt.Errorf("--token-name %q: the configuration has no http.tokens", name)
		}
		return "", fmt.Errorf("--token-name %q is not in http.tokens (%s)", name, strings.Join(names, ", "))
	}
	if v := os.Getenv(EnvToken); v != "" {
		return v, nil
	}
	if list := h.TokenList(); len(list) == 1 {
		return app.Secret(list[0].TokenEnv, list[0].TokenFile)
	}
	return "", nil
}

func (r *remote) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, r.base+path, rd)
	if err != nil {
		return err
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("the store is locked by another process and its API did not answer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
		return &apiError{status: resp.StatusCode, msg: e.Error}
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("API: %s: %s", http.StatusText(e.status), e.msg)
	if e.status == http.StatusUnauthorized {
		msg += "; send a token: --token-name NAME (an http.tokens entry) or $" + EnvToken
	}
	return msg
}

// pages walks a paged listing: each page has items and next (nil at the end).
func (r *remote) pages(path string, from uint64, items string, fn func(raw json.RawMessage) error) error {
	for {
		var page map[string]json.RawMessage
		if err := r.do("GET", fmt.Sprintf("%s?from=%d&limit=1000", path, from), nil, &page); err != nil {
			return err
		}
		var list []json.RawMessage
		if err := json.Unmarshal(page[items], &list); err != nil {
			return fmt.Errorf("API: bad %s page: %w", items, err)
		}
		for _, raw := range list {
			if err := fn(raw); err != nil {
				return err
			}
		}
		var next *uint64
		json.Unmarshal(page["next"], &next)
		if next == nil {
			return nil
		}
		from = *next
	}
}

func (r *remote) audit(from uint64, fn func(engine.AuditRecord) error) error {
	return r.pages("/api/v1/audit", from, "records", func(raw json.RawMessage) error {
		var rec engine.AuditRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}

func (r *remote) quarantine(fn func(web.QuarantineItem) error) error {
	return r.pages("/api/v1/quarantine", 0, "entries", func(raw json.RawMessage) error {
		var it web.QuarantineItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return err
		}
		return fn(it)
	})
}

// resolve releases or discards through the API.
func (r *remote) resolve(action string, id uint64, reason string) (engine.Decision, error) {
	var res struct {
		Position uint64 `json:"position"`
		Outcome  string `json:"outcome"`
	}
	var body any = struct{}{}
	if action == "discard" {
		body = map[string]string{"reason": reason}
	}
	err := r.do("POST", fmt.Sprintf("/api/v1/quarantine/%d/%s", id, action), body, &res)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		return engine.Decision{}, engine.ErrNotFound
	}
	if err != nil {
		return engine.Decision{}, err
	}
	o, _ := engine.ParseOutcome(res.Outcome)
	return engine.Decision{Outcome: o, Position: res.Position}, nil
}
