package jetstream

import (
	"fmt"
	"strings"
)

// SubjectToTopic returns the MQTT topic a message's subject is matched as
// against the routes' topic filters: each '.'-separated token becomes a
// topic level, so plant.m1.energy is plant/m1/energy and the filter
// plant/+/energy and topic[1] work on it unchanged.
//
// It is the reverse of the mapping NATS's own MQTT bridge uses (nats-server
// 2.10 and later) to publish MQTT topics as subjects, including that
// bridge's two escapes, so a topic that went through it comes back as it
// was published: a token "/" is an empty level (the bridge publishes /a as
// "/.a" and a//b as "a./.b") and "//" inside a token is a '.' in the level
// (the bridge publishes spBv1.0/g as "spBv1//0.g").
//
// Every other '/' is refused: a token "a/b" would read as two levels, and
// the subject a/b.c would then match the same filters and give the same
// topic[N] values as a.b.c. So are the MQTT wildcards '+' and '#' (a topic
// name never holds them), empty tokens, and NUL. The error wraps ErrSubject
// and says which token and why; the message is then malformed, with that
// reason, never matched by a guess.
func SubjectToTopic(subject string) (string, error) {
	if subject == "" {
		return "", fmt.Errorf("%w: the subject is empty", ErrSubject)
	}
	if !strings.ContainsAny(subject, "/+#\x00") && !strings.Contains(subject, "..") &&
		subject[0] != '.' && subject[len(subject)-1] != '.' {
		return strings.ReplaceAll(subject, ".", "/"), nil // the common case, one allocation
	}
	tokens := strings.Split(subject, ".")
	levels := make([]string, len(tokens))
	for i, t := range tokens {
		level, err := tokenLevel(t)
		if err != nil {
			return "", fmt.Errorf("%w: %q: token %d %q %s", ErrSubject, subject, i, t, err)
		}
		levels[i] = level
	}
	if len(levels) == 1 && levels[0] == "" {
		return "", fmt.Errorf("%w: %q is one empty level, and no MQTT topic is empty", ErrSubject, subject)
	}
	return strings.Join(levels, "/"), nil
}

// tokenLevel is the topic level of one subject token.
func tokenLevel(t string) (string, error) {
	switch {
	case t == "":
		return "", fmt.Errorf("is empty (a leading, trailing or doubled '.')")
	case t == "/":
		return "", nil // the bridge's empty level
	case strings.ContainsAny(t, "+#"):
		return "", fmt.Errorf("holds an MQTT wildcard ('+' or '#'), which no topic name may hold")
	case strings.ContainsRune(t, 0):
		return "", fmt.Errorf("holds NUL, which no topic may hold")
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		if t[i] != '/' {
			b.WriteByte(t[i])
			continue
		}
		if i+1 < len(t) && t[i+1] == '/' {
			b.WriteByte('.') // the bridge's escape of '.'
			i++
			continue
		}
		return "", fmt.Errorf("holds a '/' that is not NATS's MQTT escape (\"//\" for '.', a lone \"/\" token for an empty level): it would read as a topic level separator, and the subject would match the topic of another one")
	}
	return b.String(), nil
}
