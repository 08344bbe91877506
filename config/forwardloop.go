package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// forwardLoopWarnings warns of a forward whose copies come back: its output
// is a broker the consumer reads (for input jetstream, the server of
// jetstream.url) and a route's topic filter can match the topics its
// template renders, so each copy is delivered again as a new message; or,
// for input jetstream, jetstream.subjects takes its subjects and no route's
// filter can match them, so each copy comes back malformed.
func (c *Config) forwardLoopWarnings(warn func(path, msg string)) {
	js := c.Input == InputJetStream && c.JetStream != nil
	server, setting, sep := "", "topic", "/"
	switch o := c.Outputs; {
	case !js && o.MQTT != nil: // its brokers default to the consumer's
		read := slices.Clone(c.MQTT.Brokers)
		for _, f := range c.MQTT.Feeds {
			read = append(read, f.Brokers...)
		}
		server = redactBroker(sameServer(o.MQTT.Brokers, read))
	case js && o.NATS != nil:
		server = redactNATSURL(sameServer(strings.Split(o.NATS.URL, ","), strings.Split(c.JetStream.URL, ",")))
		setting, sep = "nats", "."
	}
	if server == "" {
		return
	}
	filters := make([][]string, len(c.Routes)) // nil for an invalid one
	for k, r := range c.Routes {
		if ValidateTopicFilter(r.Topic) == nil {
			filters[k] = cutFilter(strings.Split(r.Topic, "/"))
		}
	}
	for i, r := range c.Routes {
		for j, e := range r.Effects {
			var tmpl, stream string
			switch {
			case e.Forward == nil:
				continue
			case js:
				tmpl = e.Forward.NATS
			default:
				tmpl = e.Forward.Topic
			}
			if tmpl == "" {
				continue
			}
			p := templateLevels(tmpl, sep)
			if js {
				if stream = c.JetStream.subjectsTaking(p); stream == "" {
					continue
				}
			}
			var names []string
			more := 0
			for k, f := range filters {
				switch {
				case f == nil || !mayMatch(p, f):
				case len(names) < 3:
					names = append(names, fmt.Sprintf("routes[%d] (%s) %q", k, c.Routes[k].Name, c.Routes[k].Topic))
				default:
					more++
				}
			}
			if len(names) == 0 {
				if js && len(c.JetStream.Subjects) > 0 {
					warn(fmt.Sprintf("routes[%d] (%s).effects[%d].forward.%s", i, r.Name, j, setting), unroutedCopies(tmpl, server, stream, c.JetStream.Stream))
				}
				continue
			}
			if more > 0 {
				names = append(names, fmt.Sprintf("%d more", more))
			}
			msg := fmt.Sprintf("forward topic %q publishes to %s, a broker replayguard consumes, and %s can match its topics: ", tmpl, server, strings.Join(names, ", "))
			fix := "forward to a topic outside every route's filter, or to another broker (outputs.mqtt.brokers)"
			if js {
				msg = fmt.Sprintf("forward nats %q publishes to %s, the server replayguard consumes %s from, and %s can match its subjects (tokens read as topic levels): ",
					tmpl, server, stream, strings.Join(names, ", "))
				fix = "forward to subjects outside the stream, or to another server (outputs.nats.url)"
			}
			warn(fmt.Sprintf("routes[%d] (%s).effects[%d].forward.%s", i, r.Name, j, setting),
				msg+"each copy comes back as a new message and is decided again: a duplicate at best, a conflict held in quarantine when its content differs, "+
					"applied and forwarded again when its key does; "+fix)
		}
	}
}

// unroutedCopies is the warning of a forward whose subjects the consumed
// stream takes (a filter of jetstream.subjects can match them, and NATS
// lets no other stream take a subject the stream holds) and no route's
// filter can match. Without jetstream.subjects the stream's own subjects
// decide, which the configuration does not hold, so nothing is said.
func unroutedCopies(tmpl, server, filter, stream string) string {
	return fmt.Sprintf("forward nats %q publishes to %s, the server replayguard consumes stream %q from, and %s takes its subjects, "+
		"but no route's filter matches them (tokens read as topic levels): each copy comes back as a message no route takes and is held in quarantine as malformed, "+
		"one a forwarded message; forward to subjects outside jetstream.subjects, or to another server (outputs.nats.url)", tmpl, server, stream, filter)
}

// sameServer returns the first of out that in lists too, or "". It compares
// host and port (NATS's 4222 when a URL has none), so it misses two names
// of one server, or two servers of one cluster.
func sameServer(out, in []string) string {
	addr := func(s string) string {
		a := brokerAddr(strings.TrimSpace(s))
		if strings.HasSuffix(a, ":") {
			a += "4222"
		}
		return a
	}
	for _, o := range out {
		for _, i := range in {
			if addr(o) == addr(i) {
				return strings.TrimSpace(o)
			}
		}
	}
	return ""
}

// subjectsTaking names the jetstream.subjects filter that may take a
// subject p renders, or says the stream may when none is set; "" when
// none may.
func (j *JetStreamConfig) subjectsTaking(p []tlevel) string {
	if len(j.Subjects) == 0 {
		return "the stream"
	}
	for k, s := range j.Subjects {
		// '>' takes one token or more, '#' none or more: one more match.
		s = strings.NewReplacer("*", "+", ">", "#").Replace(s)
		if mayMatch(p, cutFilter(strings.Split(s, "."))) {
			return fmt.Sprintf("jetstream.subjects[%d] %q", k, j.Subjects[k])
		}
	}
	return ""
}

// tlevel is a level of the topics a template renders: the literal lit, or
// any one level (lit then holds the text before its first placeholder),
// then maybe more levels.
type tlevel struct {
	lit       string
	any, more bool
}

// fits reports whether filter level f can match the first level l renders.
func (l tlevel) fits(f string) bool { return l.any || f == "+" || l.lit == f }

// placeholder is a {…} of a template.
var placeholder = regexp.MustCompile(`\{[^}]*\}`)

// templateLevels splits template t into the levels of the topics (or the
// tokens of the subjects) it renders, sep separating them. It
// over-approximates: a level holding a placeholder is any level, whatever
// literal text it has; {topic[N]} in a topic stays in its level, but {topic}
// and a payload field, whose text may hold sep, may go on over any number
// of levels, as may every placeholder of a subject (a topic level may hold
// a '.').
func templateLevels(t, sep string) []tlevel {
	t = placeholder.ReplaceAllStringFunc(t, func(name string) string {
		if sep == "/" && strings.HasPrefix(name, "{topic[") {
			return "\x00" // one level
		}
		return "\x01" // one level or more
	})
	var p []tlevel
	for _, l := range strings.Split(t, sep) {
		i := strings.IndexAny(l, "\x00\x01")
		if i < 0 {
			i = len(l)
		}
		p = append(p, tlevel{lit: l[:i], any: i < len(l), more: strings.Contains(l, "\x01")})
	}
	if len(p) > comparedLevels {
		p = append(p[:comparedLevels-1], tlevel{any: true, more: true})
	}
	return p
}

// comparedLevels bounds the levels of a template or filter compared, so
// that a file of many long ones is checked as fast as one of short ones:
// past it, a template may render anything and a filter matches anything.
const comparedLevels = 64

func cutFilter(f []string) []string {
	if len(f) > comparedLevels {
		return append(f[:comparedLevels-1:comparedLevels-1], "#")
	}
	return f
}

// mayMatch reports whether topic filter f (split at '/') can match a topic
// p renders. A greedy match that goes back only to the last level that may
// go on: as with '*' in a file name pattern, the earliest fit of each stretch
// after it is never worse. It answers true rather than take more than two
// steps a level, which only stretches of many levels that nearly fit, again
// and again, would need. Filters starting with a wildcard do not match a
// topic starting with '$', which a forward renders only from a template
// starting with one.
func mayMatch(p []tlevel, f []string) bool {
	if (f[0] == "+" || f[0] == "#") && strings.HasPrefix(p[0].lit, "$") {
		return false
	}
	i, j := 0, 0
	back, backJ := -1, 0 // after the last level that may go on, and f's level it takes next
	for steps := 0; j < len(f) && f[j] != "#"; steps++ {
		switch {
		case steps > 2*(len(p)+len(f))+16:
			return true // long stretches that nearly fit, again and again: not worth a start's time
		case i < len(p) && p[i].fits(f[j]):
			if p[i].more {
				back, backJ = i+1, j+1
			}
			i, j = i+1, j+1
		case back >= 0:
			backJ++
			i, j = back, backJ
		default:
			return false
		}
	}
	return j < len(f) || i == len(p) // '#' takes whatever p renders after
}
