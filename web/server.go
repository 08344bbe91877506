package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves the HTTP API, /metrics, the event stream and the dashboard.
type Server struct {
	cfg        Config
	deps       Deps
	log        *slog.Logger
	tokens     []tokenEntry // every configured token; empty: none
	openWrites bool         // no token, loopback listener: writes need none
	handler    http.Handler
}

// New returns a server over deps. It serves nothing until Run or Serve;
// Handler may be mounted elsewhere.
func New(cfg Config, deps Deps) *Server {
	cfg.setDefaults()
	s := &Server{cfg: cfg, deps: deps, log: cfg.Logger, openWrites: len(cfg.tokens()) == 0 && loopback(cfg.Listen)}
	for _, t := range cfg.tokens() {
		s.tokens = append(s.tokens, tokenEntry{name: t.Name, role: t.Role, hash: sha256.Sum256([]byte(t.Secret))})
	}
	s.handler = s.routes()
	return s
}

// Handler returns the server's handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Run listens on cfg.Listen and serves until ctx is done, then stops
// gracefully within cfg.ShutdownTimeout.
func (s *Server) Run(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	ln, err := s.Listen()
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Listen binds the configured address, for Serve: a caller that binds
// before it starts anything else refuses an address in use at once.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("web: listen: %w", err)
	}
	return ln, nil
}

// Serve serves on ln (closing it) until ctx is done, then stops gracefully:
// event streams end at once, other requests get cfg.ShutdownTimeout. ln
// must be loopback exactly when cfg.Listen is, since the write and Host
// rules follow cfg.Listen.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	err := s.cfg.Validate()
	if err == nil && loopback(ln.Addr().String()) != loopback(s.cfg.Listen) {
		err = fmt.Errorf("%w: listener %s and listen %q disagree on loopback", ErrConfig, ln.Addr(), s.cfg.Listen)
	}
	var tlsCfg *tls.Config
	if err == nil {
		tlsCfg, err = s.clientAuth()
	}
	if err != nil {
		ln.Close()
		return err
	}
	if !s.openWrites && len(s.tokens) == 0 {
		s.log.Warn("no token configured and the listener is not loopback: release, discard, retry and drop are refused",
			"listen", ln.Addr().String())
	}
	base, stopStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStreams()
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		TLSConfig:         tlsCfg,
	}
	done := make(chan error, 1)
	go func() {
		if s.cfg.CertFile != "" {
			done <- srv.ServeTLS(ln, s.cfg.CertFile, s.cfg.KeyFile)
		} else {
			done <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-done:
		return fmt.Errorf("web: serve: %w", err)
	case <-ctx.Done():
	}
	stopStreams()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-done
	return err
}

// clientAuth returns the TLS settings that demand a client certificate
// signed by cfg.ClientCAFile, or nil when none is asked for. An operator
// who names a CA for the clients relies on it to keep the API to them, so
// a file that cannot be read or holds no certificate stops the server
// rather than serving everyone.
func (s *Server) clientAuth() (*tls.Config, error) {
	if s.cfg.ClientCAFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(s.cfg.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("%w: client ca_file: %v", ErrConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%w: client ca_file %s: no PEM certificate in it", ErrConfig, s.cfg.ClientCAFile)
	}
	return &tls.Config{ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", s.only("GET", s.healthz))
	mux.HandleFunc("/readyz", s.only("GET", s.readyz))
	mux.HandleFunc("/metrics", s.only("GET", s.reads(s.metrics())))
	mux.HandleFunc("/api/v1/state", s.only("GET", s.reads(s.storeRead(s.state))))
	mux.HandleFunc("/api/v1/sources", s.only("GET", s.reads(s.storeRead(s.sources))))
	mux.HandleFunc("/api/v1/stats", s.only("GET", s.reads(s.stats)))
	mux.HandleFunc("/api/v1/rates", s.only("GET", s.reads(s.rates)))
	mux.HandleFunc("/api/v1/audit", s.only("GET", s.reads(s.storeRead(s.audit))))
	mux.HandleFunc("/api/v1/quarantine", s.only("GET", s.reads(s.storeRead(s.quarantineList))))
	mux.HandleFunc("/api/v1/quarantine/{id}", s.only("GET", s.reads(s.storeRead(s.quarantineOne))))
	mux.HandleFunc("/api/v1/quarantine/{id}/release", s.only("POST", s.writes("release or discard", s.release)))
	mux.HandleFunc("/api/v1/quarantine/{id}/discard", s.only("POST", s.writes("release or discard", s.discard)))
	mux.HandleFunc("/api/v1/outbox", s.only("GET", s.reads(s.storeRead(s.outboxList))))
	mux.HandleFunc("/api/v1/outbox/{id}/retry", s.only("POST", s.writes("retry or drop", s.retryForward)))
	mux.HandleFunc("/api/v1/outbox/{id}/drop", s.only("POST", s.writes("retry or drop", s.dropForward)))
	mux.HandleFunc("/api/v1/outbox/{id}/hold", s.only("POST", s.writes("hold", s.holdForward)))
	mux.HandleFunc("/api/v1/forward", s.only("GET", s.reads(s.forward)))
	mux.HandleFunc("/api/v1/feeds", s.only("GET", s.reads(s.feeds)))
	mux.HandleFunc("/api/v1/store/loss", s.only("GET", s.reads(s.storeLoss)))
	mux.HandleFunc("/api/v1/store/accept-loss", s.only("POST", s.writes("accept a store loss", s.acceptLoss)))
	mux.HandleFunc("/api/v1/explain/{entity...}", s.only("GET", s.reads(s.storeRead(s.explain))))
	mux.HandleFunc("/api/v1/events", s.only("GET", s.reads(s.events)))
	mux.HandleFunc("/{$}", s.only("GET", s.dashboard))
	mux.Handle("/assets/", s.assets())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: %s", r.URL.Path)
	})
	return s.guard(mux)
}

// guard adds security headers and, on a loopback listener, refuses a Host
// that is not a loopback name: a page served from another site that
// rebinds its DNS name to 127.0.0.1 must not reach the API.
func (s *Server) guard(next http.Handler) http.Handler {
	local := loopback(s.cfg.Listen)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		if local && !loopback(hostPort(r.Host)) {
			writeError(w, http.StatusForbidden, "host %q is not a loopback name", r.Host)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostPort gives a Host header a port so that SplitHostPort takes it.
func hostPort(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	if strings.HasPrefix(host, "[") {
		return host + ":0"
	}
	return net.JoinHostPort(host, "0")
}

// only answers 405 for any method but method (and HEAD for GET).
func (s *Server) only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == "GET" && r.Method == "HEAD") {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, "method %s not allowed; use %s", r.Method, method)
			return
		}
		h(w, r)
	}
}

// reads checks the token, of either role, when cfg.AuthReads is set.
func (s *Server) reads(h http.HandlerFunc) http.HandlerFunc {
	if !s.cfg.AuthReads {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.authorized(w, r); ok {
			h(w, r)
		}
	}
}

// storeRead bounds h's reads of a shared store by cfg.StoreReadTimeout.
func (s *Server) storeRead(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.deps.Engine.Stats().Shared {
			h(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.StoreReadTimeout)
		defer cancel()
		h(w, r.WithContext(ctx))
	}
}

// writeHandler is a release, discard, retry or drop, told who asked: the
// token's name, or "" when writes are open.
type writeHandler func(w http.ResponseWriter, r *http.Request, operator string)

// writes checks for an operator's token, or that writes are open (no token
// on a loopback listener), and demands a JSON body type: a cross-site form
// cannot send one without a CORS preflight, which this server never grants.
// what names the actions, for a refusal.
func (s *Server) writes(what string, h writeHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var t *tokenEntry
		switch {
		case len(s.tokens) == 0 && !s.openWrites:
			writeError(w, http.StatusForbidden, "writes need a token when the listener is not loopback")
			return
		case len(s.tokens) > 0:
			var ok bool
			if t, ok = s.authorized(w, r); !ok {
				return
			}
		}
		switch {
		case t != nil && t.role != RoleOperator:
			writeError(w, http.StatusForbidden, "role %s may not %s: that needs role %s", t.role, what, RoleOperator)
			return
		case !isJSON(r.Header.Get("Content-Type")):
			writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
			return
		}
		operator := ""
		if t != nil {
			operator = t.name
		}
		h(w, r, operator)
	}
}

func isJSON(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// tokenEntry is a configured token: the hash of its secret, compared in
// constant time, and whom it stands for.
type tokenEntry struct {
	name string
	role Role
	hash [sha256.Size]byte
}

// authorized finds the request's bearer token among the configured ones,
// answering 401 when it is missing or matches none. It compares against
// every token in constant time, so the time taken tells nothing of which
// matched or how closely.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) (*tokenEntry, bool) {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := -1
	for i := range s.tokens {
		eq := subtle.ConstantTimeCompare(got[:], s.tokens[i].hash[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if strings.EqualFold(scheme, "Bearer") && match >= 0 {
		return &s.tokens[match], true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="replayguard"`)
	writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
	return nil, false
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	var st StoreStatus
	if s.deps.Store != nil {
		st = s.deps.Store()
	}
	type readiness struct {
		Ready   bool   `json:"ready"`
		Error   string `json:"error,omitempty"`
		Warning string `json:"warning,omitempty"`
	}
	if s.deps.Ready != nil && !s.deps.Ready() {
		why := "not ready: the broker is not connected or the store is not writable"
		if st.Error != "" {
			why = "not ready: " + oneLine(st.Error)
		}
		writeJSON(w, http.StatusServiceUnavailable, readiness{Error: why, Warning: oneLine(st.Warning)})
		return
	}
	writeJSON(w, http.StatusOK, readiness{Ready: true, Warning: oneLine(st.Warning)})
}

// oneLine is s with each run of white space that holds a line break or a
// tab made one space: a driver's error (pgx's "failed to connect to …:\n\t…")
// read by a probe or a person on one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

func (s *Server) metrics() http.HandlerFunc {
	if s.deps.Gatherer == nil {
		return func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusNotFound, "metrics are not enabled")
		}
	}
	h := promhttp.HandlerFor(s.deps.Gatherer, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	})
	return h.ServeHTTP
}

type apiError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, format string, a ...any) {
	writeJSON(w, code, apiError{Error: fmt.Sprintf(format, a...)})
}

// writeJSON writes v indented by two spaces and a newline, as the CLI's
// --json output is, so that a body and the command's output are the same
// bytes.
func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code, body = http.StatusInternalServerError, []byte(`{"error":"response does not encode"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(append(body, '\n'))
}

// serverError answers 500 for a failure of the server's own (the store),
// never of the request, and logs it; 503 when the store did not answer in
// time or could not be reached (unreachable).
func (s *Server) serverError(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("request failed", "path", r.URL.Path, "err", err)
	code := http.StatusInternalServerError
	if unreachable(err) {
		code = http.StatusServiceUnavailable
	}
	writeError(w, code, "%v", err)
}

// unreachable reports whether err ends a store read that did not reach
// the store: it did not answer in time (timedOut), or its connection was
// refused, reset or closed (a store server down or restarting).
func unreachable(err error) bool {
	var op *net.OpError
	return timedOut(err) || errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// timedOut reports whether err ends a store read or write that did not
// answer in time: the request's context (the store read timeout, or a
// client gone), or the store client's own deadline on its connection (a
// Redis client's read timeout, shorter than the request's, ends in a
// net.Error, not in the context's error).
func timedOut(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
