package sparkplug

import (
	"slices"
	"strings"
)

// Subscriptions returns the MQTT topic filters a sparkplug route whose
// topic filter is topic subscribes to: topic narrowed to the message types
// a route decides (NBIRTH, NDATA, NDEATH, DBIRTH, DDATA, DDEATH), one
// filter each, so that the host applications' commands (NCMD, DCMD) and
// states (spBv1.0/STATE/{host}) it also covers never come. A topic whose
// type level is written out already, or that reaches no type level, is
// returned as it is. spBv1.0/plant/# gives spBv1.0/plant/NBIRTH/#, …;
// spBv1.0/# gives spBv1.0/+/NBIRTH/#, …; spBv1.0/+/+/line-1 gives
// spBv1.0/+/NBIRTH/line-1, ….
func Subscriptions(topic string) []string {
	levels := strings.Split(topic, "/")
	if len(levels) < 2 || levels[0] != Namespace {
		return []string{topic}
	}
	var head, tail []string
	switch {
	case levels[1] == "#":
		head, tail = []string{Namespace, "+"}, []string{"#"}
	case len(levels) == 2:
		return []string{topic}
	case levels[2] == "#":
		head, tail = levels[:2], []string{"#"}
	case levels[2] == "+":
		head, tail = levels[:2], levels[3:]
	default:
		return []string{topic}
	}
	out := make([]string, 0, len(spTypeNames))
	for _, n := range spTypeNames {
		out = append(out, strings.Join(slices.Concat(head, []string{n}, tail), "/"))
	}
	return out
}
