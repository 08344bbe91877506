package config

import (
	"strings"
)

// Route kinds.
const (
	RouteJSON      = "json"
	RouteSparkplug = "sparkplug"
)

// SparkplugNamespace is the first level of every Sparkplug B topic.
const SparkplugNamespace = "spBv1.0"

// checkSparkplug checks a route of kind sparkplug in place of the identity
// checks of a json route: its source, sequence and epoch are implied.
func (r Route) checkSparkplug(ps *problems, f field) {
	for _, p := range []struct{ name, val string }{{"source", strings.Join(r.Source, ",")}, {"sequence", r.Sequence}, {"epoch", r.Epoch}, {"id", r.ID}} {
		if p.val != "" {
			ps.add(f.dot(p.name), "a sparkplug route must not set %s: source, sequence and epoch are implied "+
				"(source [group, edge] from the topic, sequence the payload's seq, epoch the edge's session from bdSeq); drop it", p.name)
		}
	}
	if first, rest, _ := strings.Cut(r.Topic, "/"); r.Topic != "" && (first != SparkplugNamespace || rest == "") {
		ps.add(f.dot("topic"), "topic %q: a sparkplug route's topic is under %s/, like %s/plant/+/# (%s/{group}/{type}/{edge}[/{device}])",
			r.Topic, SparkplugNamespace, SparkplugNamespace, SparkplugNamespace)
	}
}

// checkSparkplugPath reports p unless a sparkplug route can read it:
// metrics.<Name> (the name is the rest, '.', '/' and spaces included),
// timestamp, seq, or topic[N].
func checkSparkplugPath(ps *problems, f field, p, filter string) bool {
	switch {
	case strings.HasPrefix(p, "topic["):
		return checkPath(ps, f, p, filter)
	case p == "timestamp", p == "seq", strings.HasPrefix(p, "metrics.") && len(p) > len("metrics."):
		return true
	}
	ps.add(f, "%q: a sparkplug route reads metrics.<Name> (like metrics.Energy), timestamp, seq or topic[N]", p)
	return false
}
