package jetstream

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Coverage is how the routes meet the subjects of a stream that a
// consumer takes, as the bind logs it (Config.Routes).
type Coverage struct {
	// Taken are the stream's subjects the consumer takes: the stream's
	// own, or their intersections with the consumer's filter.
	Taken []string
	// Unrouted are the subjects of Taken that no route matches: each of
	// their messages is quarantined as malformed (no route matches).
	Unrouted []string
	// Partly are the subjects of Taken that the routes match only in
	// part, each with the routes that match some of it.
	Partly []Partly
	// Idle are the routes that match none of Taken: they decide nothing.
	Idle []string
}

// Partly is a subject that routes match only in part.
type Partly struct {
	Subject string
	Routes  []string
}

// Cover tells how routes meet the subjects of stream that filter takes
// (all of them when filter is empty).
func Cover(stream, filter []string, routes []Route) Coverage {
	cv := Coverage{Taken: takenOf(stream, filter)}
	used := map[string]bool{}
	for _, s := range cv.Taken {
		full, some := routesOf(s, routes)
		switch {
		case len(some) == 0:
			cv.Unrouted = append(cv.Unrouted, s)
		case len(full) == 0:
			cv.Partly = append(cv.Partly, Partly{Subject: s, Routes: some})
		}
		for _, r := range some {
			used[r] = true
		}
	}
	for _, r := range routes {
		if !used[r.Name] {
			cv.Idle = append(cv.Idle, r.Name)
		}
	}
	return cv
}

// takenOf is the part of each of the stream's subjects that filter takes:
// the subjects themselves with no filter, else their intersections with
// the filter's subjects.
func takenOf(stream, filter []string) []string {
	if len(filter) == 0 {
		return stream
	}
	var out []string
	for _, s := range stream {
		for _, f := range filter {
			if i := intersect(s, f); i != "" && !slices.Contains(out, i) {
				out = append(out, i)
			}
		}
	}
	return out
}

// StreamSubjects connects to cfg's server, with its TLS and credentials,
// once, waiting at most timeout, and returns the subjects of cfg's
// stream. A missing stream is an error wrapping ErrStream; a server that
// cannot be reached or answer, one wrapping ErrUnreachable.
func StreamSubjects(ctx context.Context, cfg Config, timeout time.Duration) ([]string, error) {
	cfg.setDefaults()
	opts := []nats.Option{nats.Name(cfg.Name), nats.Timeout(timeout), nats.NoReconnect()}
	if cfg.TLS != nil {
		opts = append(opts, nats.Secure(cfg.TLS))
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, redacted(cfg.URL), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := js.Stream(ctx, cfg.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("%w: stream %q not found on %s: run refuses to start until it exists", ErrStream, cfg.Stream, nc.ConnectedUrlRedacted())
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, nc.ConnectedUrlRedacted(), err)
	}
	return st.CachedInfo().Config.Subjects, nil
}

// redacted is urls, a comma-separated list, with each one's password
// hidden, and a user with no password, which NATS takes for a token.
func redacted(urls string) string {
	list := strings.Split(urls, ",")
	for i, s := range list {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil {
			list[i] = "(a URL that does not parse)"
			continue
		}
		if _, hasPassword := u.User.Password(); u.User != nil && !hasPassword {
			u.User = url.User("xxxxx")
		}
		list[i] = u.Redacted()
	}
	return strings.Join(list, ",")
}
