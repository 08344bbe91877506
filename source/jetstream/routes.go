package jetstream

import (
	"slices"
	"strings"
)

// Route is one of the engine's routes as the consumer checks the stream's
// subjects against them: its name and its MQTT topic filter, matched
// against a subject's topic (SubjectToTopic).
type Route struct {
	Name  string
	Topic string
}

// noteRoutes logs, for each of subjects the consumer takes, the routes
// that take its messages, and warns when no route takes all of them: a
// message no route matches is decided malformed ("no route matches
// topic"), kept in quarantine and acknowledged. It does nothing when the
// consumer was given no routes.
func (c *Consumer) noteRoutes(subjects []string, when string) {
	if len(c.cfg.Routes) == 0 {
		return
	}
	for _, s := range c.taken(subjects) {
		full, some := routesOf(s, c.cfg.Routes)
		switch {
		case len(some) == 0:
			c.log.Warn("jetstream: no route matches the stream subject "+s+" the consumer takes: each of its messages is quarantined as malformed (no route matches); add a route, or narrow jetstream.subjects or the stream",
				"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "subject", s, "when", when)
		case len(full) == 0:
			c.log.Warn("jetstream: the routes match only some subjects of the stream subject "+s+" the consumer takes: a message no route matches is quarantined as malformed (no route matches)",
				"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "subject", s, "routes", some, "when", when)
		default:
			c.log.Info("jetstream: stream subject taken", "stream", c.cfg.Stream, "subject", s, "routes", some, "when", when)
		}
	}
}

// noteIdle warns of each route that matches none of subjects the
// consumer takes (Cover's Idle) and of none of before: it decides
// nothing. At the bind before is nil; at a change of the stream's
// subjects it is the subjects seen until then, so a route is named when
// the change leaves it without any. It does nothing when the consumer
// was given no routes.
func (c *Consumer) noteIdle(before, subjects []string, when string) {
	if len(c.cfg.Routes) == 0 {
		return
	}
	idle := Cover(subjects, c.cfg.Subjects, c.cfg.Routes).Idle
	if before != nil {
		idle = diff(Cover(before, c.cfg.Subjects, c.cfg.Routes).Idle, idle)
	}
	for _, r := range c.cfg.Routes {
		if slices.Contains(idle, r.Name) {
			c.log.Warn("jetstream: route "+r.Name+" ("+r.Topic+") matches none of the stream subjects the consumer takes: the route decides nothing",
				"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "route", r.Name, "topic", r.Topic, "taken", c.taken(subjects), "when", when)
		}
	}
}

// taken is the part of each of the stream's subjects that the consumer's
// filter takes (takenOf).
func (c *Consumer) taken(stream []string) []string { return takenOf(stream, c.cfg.Subjects) }

// diff is what b holds that a does not.
func diff(a, b []string) []string {
	var out []string
	for _, s := range b {
		if !slices.Contains(a, s) {
			out = append(out, s)
		}
	}
	return out
}

// routesOf names the routes whose topic filter matches every subject that
// subject filter s matches (full), and those that match at least one
// (some, full among them), in the routes' order.
func routesOf(s string, routes []Route) (full, some []string) {
	for _, r := range routes {
		if topicMeets(r.Topic, s) {
			some = append(some, r.Name)
		}
		if topicCovers(r.Topic, s) {
			full = append(full, r.Name)
		}
	}
	return full, some
}

// topicCovers reports whether MQTT topic filter r matches the topic of
// every subject that subject filter s matches.
func topicCovers(r, s string) bool {
	rt, st := strings.Split(r, "/"), strings.Split(s, ".")
	for i, want := range rt {
		switch {
		case want == "#":
			return true
		case i >= len(st), st[i] == ">":
			return false
		case want == "+":
			continue
		case st[i] == "*":
			return false
		}
		if level, err := tokenLevel(st[i]); err != nil || level != want {
			return false
		}
	}
	return len(st) == len(rt)
}

// topicMeets reports whether MQTT topic filter r matches the topic of at
// least one subject that subject filter s matches.
func topicMeets(r, s string) bool {
	rt, st := strings.Split(r, "/"), strings.Split(s, ".")
	for i, want := range rt {
		switch {
		case want == "#":
			return true
		case i >= len(st):
			return false
		case st[i] == ">":
			return true
		case want == "+", st[i] == "*":
			continue
		}
		if level, err := tokenLevel(st[i]); err != nil || level != want {
			return false
		}
	}
	return len(st) == len(rt)
}

// intersect is the subject filter matching exactly the subjects both a
// and b match, or "" when none.
func intersect(a, b string) string {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	var out []string
	for i := 0; ; i++ {
		switch {
		case i < len(at) && at[i] == ">": // one token or more
			if i == len(bt) {
				return ""
			}
			return strings.Join(append(out, bt[i:]...), ".")
		case i < len(bt) && bt[i] == ">":
			if i == len(at) {
				return ""
			}
			return strings.Join(append(out, at[i:]...), ".")
		case i == len(at) || i == len(bt):
			if len(at) != len(bt) {
				return ""
			}
			return strings.Join(out, ".")
		case at[i] == "*":
			out = append(out, bt[i])
		case bt[i] == "*" || at[i] == bt[i]:
			out = append(out, at[i])
		default:
			return ""
		}
	}
}
