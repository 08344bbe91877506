package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// skipped refuses a durable consumer whose filter the configured subjects
// widen while the stream holds messages that the widening would never
// deliver. The server keeps a consumer's position (the stream sequence it
// delivered last) when its filter changes: a message of an added subject
// stored at or below it is passed over for good, with no sign anywhere.
// It returns nil when no subject is added, or no message of one lies at or
// below the position, or the server does not say (logged); an error
// wrapping ErrStream otherwise.
func (c *Consumer) skipped(ctx context.Context, st jetstream.Stream) error {
	cons, err := st.Consumer(ctx, c.cfg.Consumer)
	if err != nil {
		return nil // none yet, or not one to bind: bindOnce tells
	}
	info := cons.CachedInfo()
	streamSubjects := st.CachedInfo().Config.Subjects
	have := filterSubjects(info.Config.FilterSubject, info.Config.FilterSubjects, streamSubjects)
	want := filterSubjects("", c.cfg.Subjects, streamSubjects)
	at := info.Delivered.Stream
	if at == 0 {
		return nil
	}
	for _, f := range want {
		if covered(f, have) {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		seq, sure, err := c.passedOver(pctx, st, f, have, at)
		cancel()
		if err != nil { // a user allowed to consume, not to read the stream, say
			c.log.Warn("jetstream: cannot tell whether jetstream.subjects, wider than the consumer's filter, passes over messages stored before its position",
				"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "filter", have, "added", f, "position", at, "err", err)
			return nil
		}
		if seq == 0 {
			continue
		}
		found := fmt.Sprintf("whose messages stored up to there (one at sequence %d) the server would never deliver", seq)
		if !sure {
			found = fmt.Sprintf("and its first %d messages up to there were all of the filter, so whether the server would pass over a later one cannot be told at start", maxProbes)
		}
		return fmt.Errorf("%w: consumer %q on stream %q is filtered to %s and has delivered through stream sequence %d; "+
			"jetstream.subjects adds %s, %s: "+
			"to take the added subjects only from now on, change the consumer's filter on the server first; "+
			"to take them from the stream's first message, name another jetstream.consumer",
			ErrStream, c.cfg.Consumer, c.cfg.Stream, strings.Join(have, ", "), at, f, found)
	}
	return nil
}

const (
	// maxProbes bounds the messages passedOver reads: past it, whether a
	// message is passed over is not known, and the bind is refused.
	maxProbes = 256
	// probeTimeout bounds passedOver, leaving the rest of apiTimeout to
	// the bind: a server that does not answer the reads (a user not
	// allowed them) must not keep the consumer from binding.
	probeTimeout = apiTimeout / 4
)

// passedOver returns the sequence of the stream's first message that
// filter f takes and filters have do not, if it lies at or below at; 0
// when there is none. sure is false when maxProbes messages of f up to at
// were all of have: seq is then the last read, not one passed over.
func (c *Consumer) passedOver(ctx context.Context, st jetstream.Stream, f string, have []string, at uint64) (seq uint64, sure bool, err error) {
	seq = 1
	for probe := 1; ; probe++ {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(f))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return 0, true, nil
		case err != nil:
			return 0, false, err
		case m.Sequence > at:
			return 0, true, nil
		case !covered(m.Subject, have):
			return m.Sequence, true, nil
		case probe == maxProbes:
			return m.Sequence, false, nil
		}
		seq = m.Sequence + 1
	}
}

// filterSubjects is the subjects a consumer with filter one, or filters
// many, takes: every one of the stream's when it has none.
func filterSubjects(one string, many, stream []string) []string {
	var out []string
	if one != "" {
		out = append(out, one)
	}
	out = append(out, many...)
	if len(out) == 0 {
		return stream
	}
	return out
}

// covered reports whether every subject filter f matches is matched by a
// filter of fs.
func covered(f string, fs []string) bool {
	for _, g := range fs {
		if subsetOf(f, g) {
			return true
		}
	}
	return false
}

// subsetOf reports whether every subject filter f matches, filter g
// matches too.
func subsetOf(f, g string) bool {
	ft, gt := strings.Split(f, "."), strings.Split(g, ".")
	for i, t := range gt {
		switch {
		case t == ">":
			return len(ft) > i
		case i >= len(ft), ft[i] == ">":
			return false
		case t != "*" && t != ft[i]:
			return false
		}
	}
	return len(ft) == len(gt)
}
