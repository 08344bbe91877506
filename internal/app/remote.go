package app

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/web"
)

// EnvToken is the environment variable holding the bearer token a command
// sends to a running daemon's API, for an operator who holds a token of
// their own rather than the daemon's secret files. The command reads it
// into Tool.Token; the API's refusals name it.
const EnvToken = "REPLAYGUARD_TOKEN"

// remote reads and reviews through a running `replayguard run`'s HTTP API,
// for when that process holds the embedded store, or the member id a
// shared store's configuration names.
type remote struct {
	base   string
	token  string
	client *http.Client
	held   error // why the command could not open the store itself
}

// remoteFor returns the API of the process that holds the store, when err
// says the store is locked, or that a running member holds the member id
// store.member names, and the configuration names an HTTP listener.
func (t *Tool) remoteFor(err error) (*remote, error) {
	if errors.Is(err, engine.ErrLocked) && !t.Config.HTTP.Enabled() {
		return nil, fmt.Errorf("%w: with http.listen off there is no API of the process holding it to go through: wait for it to end (an ingest), stop it, or give run an http.listen", err)
	}
	if !errors.Is(err, engine.ErrLocked) && !errors.Is(err, engine.ErrMemberHeld) || !t.Config.HTTP.Enabled() {
		return nil, err
	}
	return t.remoteHolding(err, 30*time.Second)
}

// remoteHolding returns the API of the running process that held is about
// (a store or member it holds), each request bounded by timeout.
func (t *Tool) remoteHolding(held error, timeout time.Duration) (*remote, error) {
	token, err := t.apiToken()
	if err != nil {
		return nil, fmt.Errorf("%v; and the API token: %w", held, err)
	}
	h := t.Config.HTTP
	client := &http.Client{Timeout: timeout}
	if h.Scheme() == "https" {
		tc, err := apiClientTLS(h.TLS, apiAddr(h.Listen))
		if err != nil {
			return nil, fmt.Errorf("%v; and its API's TLS: %w", held, err)
		}
		client.Transport = &http.Transport{TLSClientConfig: tc}
	}
	t.logger().Info("held by a running process; using its API", "listen", h.Listen)
	return &remote{base: h.Scheme() + "://" + apiAddr(h.Listen), token: token, client: client, held: held}, nil
}

// apiClientTLS is how a command reaches the API of the process holding the
// store over http.tls. The server presents http.tls.cert_file of the same
// configuration, which the command reads: that certificate is taken as
// it is (a site's self-signed or private-CA one, whatever host name or
// address it was issued for, the command dialling the listener on this
// host); any other must verify against the system's roots and that
// file's certificates for the host dialled (apiAddr's).
func apiClientTLS(t config.TLSConfig, dialled string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(dialled)
	if err != nil {
		host = dialled
	}
	data, err := os.ReadFile(t.CertFile)
	if err != nil {
		return nil, fmt.Errorf("http.tls.cert_file: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	var own *x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && b.Type == "CERTIFICATE" {
			own = cmp.Or(own, c)
			roots.AddCert(c)
		}
	}
	if own == nil {
		return nil, fmt.Errorf("http.tls.cert_file %s: no PEM certificate in it", t.CertFile)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true, // verified here:
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the API presented no certificate")
			}
			if cs.PeerCertificates[0].Equal(own) {
				return nil
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: inter})
			return err
		}}, nil
}

// apiAddr is the address of the API of the process listening on listen,
// on this host: a listener on every address (":9780", "0.0.0.0:9780",
// "[::]:9780") is reached on loopback.
func apiAddr(listen string) string {
	if host, port, err := net.SplitHostPort(listen); err == nil {
		ip := net.ParseIP(host)
		switch {
		case host == "" || ip != nil && ip.IsUnspecified() && ip.To4() != nil:
			return net.JoinHostPort("127.0.0.1", port)
		case ip != nil && ip.IsUnspecified():
			return net.JoinHostPort("::1", port)
		}
	}
	return listen
}

// operator is who a write through the API is to be audited as: the
// token's name, which the process holding the store takes (so --operator
// is refused), or, with no token sent, name, else the OS user, as a
// command on a local store names them.
func (r *remote) operator(name string) (string, error) {
	if r.token != "" {
		if name != "" {
			return "", errOperatorRemote()
		}
		return "", nil
	}
	return LocalOperator(name)
}

// CheckTokenName returns an error wrapping ErrUsage unless name, given as
// --token-name, names an entry of h's tokens. A command checks it whether
// it goes through a running process's API or reads the store itself.
func CheckTokenName(h config.HTTPConfig, name string) error {
	var names []string
	for _, tok := range h.Tokens {
		if tok.Name == name {
			return nil
		}
		names = append(names, strconv.Quote(tok.Name))
	}
	if len(names) == 0 {
		return fmt.Errorf("%w: --token-name %q: the configuration has no http.tokens", ErrUsage, name)
	}
	return fmt.Errorf("%w: --token-name %q is not in http.tokens (%s)", ErrUsage, name, strings.Join(names, ", "))
}

// apiToken picks the bearer token to send: the http.tokens entry named by
// TokenName, else Token, else the single token_env or token_file, else the
// only entry of http.tokens. With several entries and none chosen it sends
// none: reads still work unless auth_reads is set.
func (t *Tool) apiToken() (string, error) {
	h := t.Config.HTTP
	if name := t.TokenName; name != "" {
		if err := CheckTokenName(h, name); err != nil {
			return "", err
		}
		i := slices.IndexFunc(h.Tokens, func(tok config.TokenConfig) bool { return tok.Name == name })
		return Secret(h.Tokens[i].TokenEnv, h.Tokens[i].TokenFile)
	}
	if t.Token != "" {
		return t.Token, nil
	}
	if list := h.TokenList(); len(list) == 1 {
		return Secret(list[0].TokenEnv, list[0].TokenFile)
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
		why := "the store is held by another process"
		if r.held != nil {
			why = r.held.Error()
		}
		return fmt.Errorf("%s; and the API of the process holding it, at %s (http.listen; %s names another member's), did not answer: %w", why, r.base, config.EnvHTTPListen, err)
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

// apiSaid is the API's message of an error the engine returns as err.
type apiSaid struct {
	msg string
	err error
}

func (a apiSaid) Error() string { return a.msg }
func (a apiSaid) Unwrap() error { return a.err }

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

// head reads the audit head the process committed. hashed is false when
// the process did not say the head's hash (a build before it did). base is
// where the store's log begins, nil when the process did not say (a build
// before it did, or a store that keeps none).
func (r *remote) head() (h engine.AuditHead, hashed bool, base *engine.AuditHead, err error) {
	var stats struct {
		Position uint64       `json:"position"`
		Head     *engine.Hash `json:"head"`
		Base     *struct {
			Position uint64      `json:"position"`
			Hash     engine.Hash `json:"hash"`
		} `json:"base"`
	}
	if err := r.do("GET", "/api/v1/stats", nil, &stats); err != nil {
		return h, false, nil, fmt.Errorf("read the audit head: %w", err)
	}
	h.Position = stats.Position
	if stats.Head != nil {
		h.Hash = *stats.Head
	}
	if stats.Base != nil {
		base = &engine.AuditHead{Position: stats.Base.Position, Hash: stats.Base.Hash}
	}
	return h, stats.Head != nil || stats.Position == 0, base, nil
}

// firstStored is the position of the first record the store holds (0:
// none): it moves up when audit retention trims the log.
func (r *remote) firstStored() (uint64, error) {
	var page struct {
		Records []engine.AuditRecord `json:"records"`
	}
	if err := r.do("GET", "/api/v1/audit?from=1&limit=1", nil, &page); err != nil {
		return 0, fmt.Errorf("read the first stored audit record: %w", err)
	}
	if len(page.Records) == 0 {
		return 0, nil
	}
	return page.Records[0].Position, nil
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
func (r *remote) resolve(action string, id uint64, reason, operator string) (engine.Decision, error) {
	var res struct {
		Position uint64 `json:"position"`
		Outcome  string `json:"outcome"`
		Reason   string `json:"reason"`
		Held     uint64 `json:"held"`
	}
	body := map[string]string{}
	if action == "discard" {
		body["reason"] = reason
	}
	if operator != "" {
		body["operator"] = operator
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
	return engine.Decision{Outcome: o, Position: res.Position, Reason: res.Reason, Held: res.Held}, nil
}

// outbox walks GET /api/v1/outbox and returns the pending depths.
func (r *remote) outbox(fn func(web.HeldItem) error) ([]engine.OutboxDepth, error) {
	path := "/api/v1/outbox?limit=1000"
	for {
		var page web.OutboxPage
		if err := r.do("GET", path, nil, &page); err != nil {
			return nil, err
		}
		for _, it := range page.Held {
			if err := fn(it); err != nil {
				return nil, err
			}
		}
		if page.Next == nil {
			return page.Pending, nil
		}
		path = fmt.Sprintf("/api/v1/outbox?limit=1000&member=%s&from=%d", url.QueryEscape(page.Next.Member), page.Next.ID)
	}
}

// resolveForward retries or drops, or holds a pending entry, through the API.
func (r *remote) resolveForward(action, member string, id uint64, reason, operator string) (forwardResult, error) {
	var res forwardResult
	body := map[string]string{}
	if operator != "" {
		body["operator"] = operator
	}
	if member != "" {
		body["member"] = member
	}
	if reason != "" {
		body["reason"] = reason
	}
	err := r.do("POST", fmt.Sprintf("/api/v1/outbox/%d/%s", id, action), body, &res)
	var ae *apiError
	switch {
	case errors.As(err, &ae) && ae.status == http.StatusNotFound:
		return res, engine.ErrNotFound
	case errors.As(err, &ae) && ae.status == http.StatusConflict:
		return res, apiSaid{ae.msg, engine.ErrAmbiguous}
	}
	return res, err
}
