// Package sptopic checks the topic filter of a Sparkplug B route, for the
// configuration and for the route kind's Compile alike, so a library user
// and a configuration file are refused the same filters with the same words.
package sptopic

import (
	"fmt"
	"slices"
	"strings"
)

// Namespace is the first level of every Sparkplug B topic.
const Namespace = "spBv1.0"

// Types are the message types a sparkplug route decides, in the order of
// their names in the route kind.
var Types = []string{"NBIRTH", "NDATA", "NDEATH", "DBIRTH", "DDATA", "DDEATH"}

// CheckFilter returns why a sparkplug route cannot have the topic filter
// topic, or nil: it must be under Namespace, name a group rather than the
// host applications' STATE topics, and leave its type level a wildcard or
// name a type the route decides. A filter naming NCMD or DCMD would take
// the host applications' commands to the edges, none of them an edge's
// message: each would be held as malformed.
func CheckFilter(topic string) error {
	types := strings.Join(Types, ", ")
	if first, rest, _ := strings.Cut(topic, "/"); first != Namespace || rest == "" {
		return fmt.Errorf("topic %q: a sparkplug route's topic is under %s/, like %s/plant/+/# (%s/{group}/{type}/{edge}[/{device}])",
			topic, Namespace, Namespace, Namespace)
	}
	levels := strings.Split(topic, "/")
	switch {
	case levels[1] == "STATE":
		return fmt.Errorf("topic %q: %s/STATE/ holds the host applications' STATE messages, not an edge's: "+
			"a sparkplug route decides %s; name a group, like %s/plant/#", topic, Namespace, types, Namespace)
	case len(levels) > 2 && levels[2] != "+" && levels[2] != "#" && !slices.Contains(Types, levels[2]):
		return fmt.Errorf("topic %q: message type %q is not one a sparkplug route decides (%s; NCMD and DCMD are a host application's commands, "+
			"not an edge's messages); write + for the type level, like %s/plant/+/#, and the route subscribes to the types it decides alone",
			topic, levels[2], types, Namespace)
	}
	return nil
}
