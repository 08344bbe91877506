package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/source/jetstream"
)

// CheckJetStream reads, with input: jetstream, the stream's subjects from
// jetstream.url (once, within lintTimeout) and returns as warnings what
// the configuration makes of them: each subject the consumer takes that no
// route matches, or that the routes match only in part (its messages no
// route matches are quarantined as malformed, as run's bind logs too), and
// each route that matches none of them (it decides nothing). A stream
// that does not exist is a problem, at jetstream.stream: run refuses to
// start. When the server cannot be reached or answer, skipped says why
// nothing was checked.
func CheckJetStream(ctx context.Context, cfg *config.Config) (problems, warnings []config.Problem, skipped error) {
	if cfg.Input != config.InputJetStream || cfg.JetStream == nil {
		return nil, nil, nil
	}
	jc, err := jetStreamConfig(cfg, nil, nil)
	if err != nil {
		return nil, nil, nil // CheckLocal tells the TLS files
	}
	subjects, err := jetstream.StreamSubjects(ctx, jc, lintTimeout)
	switch {
	case errors.Is(err, jetstream.ErrStream):
		return []config.Problem{cfg.Place("jetstream.stream", config.Problem{Path: "jetstream.stream", Message: err.Error()})}, nil, nil
	case err != nil:
		return nil, nil, err
	}
	cv := jetstream.Cover(subjects, jc.Subjects, jc.Routes)
	at := "jetstream.stream"
	if len(jc.Subjects) > 0 {
		at = "jetstream.subjects"
	}
	warn := func(key, path, msg string) {
		warnings = append(warnings, cfg.Place(key, config.Problem{Path: path, Message: msg}))
	}
	stream := fmt.Sprintf("stream %s's subject", jc.Stream)
	for _, s := range cv.Taken { // in the stream's order, as the bind logs them
		if slices.Contains(cv.Unrouted, s) {
			warn(at, at, fmt.Sprintf("no route matches %s %s, which the consumer takes: each of its messages is quarantined as malformed (no route matches); add a route, or narrow jetstream.subjects or the stream", stream, s))
		}
		for _, p := range cv.Partly {
			if p.Subject == s {
				warn(at, at, fmt.Sprintf("the routes (%s) match only part of %s %s, which the consumer takes: a message no route matches is quarantined as malformed (no route matches)", strings.Join(p.Routes, ", "), stream, s))
			}
		}
	}
	for i, r := range cfg.Routes {
		if slices.Contains(cv.Idle, r.Name) {
			key := fmt.Sprintf("routes[%d].topic", i)
			warn(key, fmt.Sprintf("routes[%d] (%s).topic", i, r.Name), fmt.Sprintf("%s matches none of the subjects of stream %s the consumer takes (%s): the route decides nothing", r.Topic, jc.Stream, strings.Join(cv.Taken, ", ")))
		}
	}
	return nil, warnings, nil
}
