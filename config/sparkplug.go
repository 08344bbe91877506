package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/replayguard/replayguard/internal/sptopic"
)

// Route kinds.
const (
	RouteJSON      = "json"
	RouteSparkplug = "sparkplug"
)

// SparkplugNamespace is the first level of every Sparkplug B topic.
const SparkplugNamespace = sptopic.Namespace

// checkSparkplug checks a route of kind sparkplug in place of the identity
// checks of a json route: its source, sequence and epoch are implied.
func (r Route) checkSparkplug(ps *problems, f field) {
	for _, p := range []struct{ name, val string }{{"source", strings.Join(r.Source, ",")}, {"sequence", r.Sequence}, {"epoch", r.Epoch}, {"id", r.ID}} {
		if p.val != "" {
			ps.add(f.dot(p.name), "a sparkplug route must not set %s: source, sequence and epoch are implied "+
				"(source [group, edge] from the topic, sequence the payload's seq, epoch the edge's session from bdSeq); drop it", p.name)
		}
	}
	if r.Topic == "" {
		return
	}
	if err := sptopic.CheckFilter(r.Topic); err != nil {
		ps.add(f.dot("topic"), "%v", err)
	}
}

// sparkplugTypes are the message types a sparkplug route decides.
var sparkplugTypes = strings.Join(sptopic.Types, ", ")

// checkSparkplugPath reports p unless a sparkplug route can read it:
// metrics.<Name> (the name is the rest, '.', '/' and spaces included),
// timestamp.<Name>, is_historical.<Name>, timestamp, seq, or topic[N].
func checkSparkplugPath(ps *problems, f field, p, filter string) bool {
	switch {
	case strings.HasPrefix(p, "topic["):
		return checkPath(ps, f, p, filter)
	case p == "timestamp", p == "seq":
		return true
	}
	for _, root := range []string{"metrics.", "timestamp.", "is_historical."} {
		if strings.HasPrefix(p, root) && len(p) > len(root) {
			return true
		}
	}
	ps.add(f, "%q: a sparkplug route reads metrics.<Name> (like metrics.Energy), timestamp.<Name> and is_historical.<Name> "+
		"(that metric's own timestamp and flag), timestamp, seq or topic[N]", p)
	return false
}

// sparkplugWarnings warns of a sparkplug route on input jetstream whose
// topic covers a host application's commands (NCMD, DCMD) and STATE
// messages, unless jetstream.subjects leaves them out: there the stream's
// subjects, not the route's topic, decide what comes, and each such
// message is held as malformed.
func (c *Config) sparkplugWarnings(warn func(path, msg string)) {
	if c.Input != InputJetStream || c.JetStream == nil {
		return
	}
	typed := len(c.JetStream.Subjects) > 0
	for _, s := range c.JetStream.Subjects {
		tokens := strings.Split(s, ".")
		typed = typed && len(tokens) > 2 && slices.Contains(sptopic.Types, tokens[2])
	}
	if typed {
		return
	}
	for i, r := range c.Routes {
		levels := strings.Split(r.Topic, "/")
		if r.Kind != RouteSparkplug || len(levels) < 2 || levels[1] != "#" && (len(levels) < 3 || levels[2] != "+" && levels[2] != "#") {
			continue
		}
		warn(fmt.Sprintf("routes[%d] (%s).topic", i, r.Name), fmt.Sprintf("on input jetstream the stream's subjects, not the route's topic, "+
			"decide what comes: topic %q covers a host application's commands (NCMD, DCMD) and STATE messages, which are not an edge's, "+
			"and each one in the stream is held as malformed; list in jetstream.subjects only the types a sparkplug route decides (%s), "+
			"like spBv1//0.plant.NDATA.>", r.Topic, sparkplugTypes))
	}
}
