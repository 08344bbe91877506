package engine

import (
	"fmt"
	"strings"
)

// malformedSource is the source of d, a message found malformed, when
// every part of it can be read: for a JSON route, topic levels and payload
// fields the scanner read before it found the message malformed; for a
// kind whose topic names the source (TopicSourcer), the topic. Else nil,
// with why the source is unknown ("" when the route reads none, or its
// kind cannot tell). Its parts are copies: a record must not keep the
// payload alive.
func (d *Delivery) malformedSource(topic string) (src []string, why string) {
	if ts, ok := d.route.reader.(TopicSourcer); ok {
		src, why = ts.TopicSource(topic)
		for i := range src {
			src[i] = strings.Clone(src[i])
		}
		return src, why
	}
	jr, ok := d.route.reader.(*jsonReader)
	if !ok || len(jr.source) == 0 || len(d.vals) != len(d.route.paths) {
		return nil, ""
	}
	var levels []string
	total := 0
	src = make([]string, len(jr.source))
	for n, i := range jr.source {
		p, v := d.route.paths[i], d.vals[i]
		if p.topic >= 0 {
			if levels == nil {
				levels = strings.Split(topic, "/")
			}
			if p.topic >= len(levels) {
				return nil, fmt.Sprintf("the topic has no level %s", p.text)
			}
			v = value{kind: vString, text: levels[p.topic]}
		}
		switch v.kind {
		case vString, vNumber, vBool:
		case vAbsent, vUnread:
			return nil, fmt.Sprintf("field %s was not read", p.text)
		default:
			return nil, fmt.Sprintf("field %s is %s", p.text, kindNames[v.kind])
		}
		if len(v.text) > maxIdentityBytes {
			return nil, fmt.Sprintf("field %s is %d bytes, over %d", p.text, len(v.text), maxIdentityBytes)
		}
		total += len(v.text)
		src[n] = strings.Clone(v.text)
	}
	if total > maxSourceBytes {
		return nil, fmt.Sprintf("its fields are %d bytes together, over %d", total, maxSourceBytes)
	}
	return src, ""
}

// sourceReason is reason, a malformed message's, saying why its source is
// unknown when reason does not already: the source is read first, so a
// reason that names no source field came before it was read.
func sourceReason(reason, why string) string {
	if why == "" || strings.HasPrefix(reason, "source field ") || strings.HasPrefix(reason, "the source fields ") || strings.Contains(reason, why) {
		return reason
	}
	return reason + "; source not read: " + why
}
