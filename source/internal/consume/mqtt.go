package consume

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Filter is one MQTT subscription of a consumer.
type Filter struct {
	Topic string // MQTT topic filter, without any $share prefix
	QoS   byte   // 1 or 2; QoS 0 is refused: it cannot be redelivered
	// Unshared subscribes to the filter without the share group, in one:
	// every member receives each of its messages, in its publisher's
	// order. A Sparkplug route's are: an edge's data is placed in the
	// session its last birth opened, so a member must see the birth
	// first; the group's store makes each message applied once.
	Unshared bool
	// Route names the route that asked for the filter, in the errors that
	// concern it (a refused subscription). Default "": none named.
	Route string
}

// Refused says which routes asked for topic, the filter as subscribed in
// share group group, for an error about it: ` (route a)`, ` (routes a, b)`,
// or "" when filters name none.
func Refused(filters []Filter, group, topic string) string {
	routes := Routes(filters, group, topic)
	switch len(routes) {
	case 0:
		return ""
	case 1:
		return " (route " + routes[0] + ")"
	}
	return " (routes " + strings.Join(routes, ", ") + ")"
}

// Routes lists the routes that asked for topic, the filter as subscribed
// in share group group, in the order of filters.
func Routes(filters []Filter, group, topic string) []string {
	var routes []string
	for _, f := range filters {
		if f.Route != "" && SubscriptionTopic(f, group) == topic && !slices.Contains(routes, f.Route) {
			routes = append(routes, f.Route)
		}
	}
	return routes
}

// SubackReason names an MQTT 5 SUBACK reason code of a refusal (MQTT 5
// §3.9.3).
func SubackReason(code byte) string {
	switch code {
	case 0x80:
		return "unspecified error"
	case 0x83:
		return "implementation specific error"
	case 0x87:
		return "not authorized"
	case 0x8F:
		return "topic filter invalid"
	case 0x91:
		return "packet identifier in use"
	case 0x97:
		return "quota exceeded"
	case 0x9E:
		return "shared subscriptions not supported"
	case 0xA1:
		return "subscription identifiers not supported"
	case 0xA2:
		return "wildcard subscriptions not supported"
	}
	return "refused"
}

// SubscriptionTopic is f as subscribed by a consumer in share group group
// ("" for none): with the $share prefix unless f is Unshared.
func SubscriptionTopic(f Filter, group string) string {
	if group == "" || f.Unshared {
		return f.Topic
	}
	return "$share/" + group + "/" + f.Topic
}

// MatchTopic reports whether topic matches the MQTT topic filter (a
// filter starting with a wildcard does not match a topic starting with
// '$').
func MatchTopic(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	for {
		f, frest, fmore := strings.Cut(filter, "/")
		if f == "#" {
			return true
		}
		level, rest, more := strings.Cut(topic, "/")
		if f != "+" && f != level {
			return false
		}
		if !more {
			return !fmore || frest == "#"
		}
		if !fmore {
			return false
		}
		filter, topic = frest, rest
	}
}

// StaleForms returns the subscriptions a session resumed under the same
// client id may still hold although the configuration no longer asks for
// them: each shared filter's plain form in a share group (the consumer
// joined the group), and its $share/<g>/ form for each group g of former
// but the current one (it left g). Without them removed, the session gets
// each message once per form. An UNSUBSCRIBE names the exact filter, so a
// group left can only be removed when named in former. So can a filter no
// route subscribes to any more (formerFilters): in each of those forms and
// plain, unless a route still asks for it; its messages would otherwise
// come to a configuration with no route for them, each one held.
func StaleForms(filters []Filter, group string, former, formerFilters []string) []string {
	want := map[string]bool{}
	for _, f := range filters {
		want[SubscriptionTopic(f, group)] = true
	}
	var stale []string
	add := func(topic string) {
		if !want[topic] && !slices.Contains(stale, topic) {
			stale = append(stale, topic)
		}
	}
	for _, f := range filters {
		if f.Unshared {
			continue // never subscribed in a group
		}
		add(f.Topic)
		for _, g := range former {
			add(SubscriptionTopic(f, g))
		}
	}
	for _, topic := range formerFilters {
		add(topic)
		for _, g := range append([]string{group}, former...) {
			if g != "" {
				add(SubscriptionTopic(Filter{Topic: topic}, g))
			}
		}
	}
	return stale
}

// ValidFormerFilters checks the filters a consumer subscribed to before.
// Its errors wrap errConfig.
func ValidFormerFilters(former []string, errConfig error) error {
	for _, topic := range former {
		if err := ValidFilter(topic, 1, errConfig); err != nil {
			return fmt.Errorf("former filter: %w", err)
		}
	}
	return nil
}

// ValidFormerGroups checks the former share groups of a consumer: each
// one topic level. Its errors wrap errConfig.
func ValidFormerGroups(former []string, errConfig error) error {
	for _, g := range former {
		if g == "" || strings.ContainsAny(g, "/+#") {
			return fmt.Errorf("%w: former share group %q is empty or contains /, + or #", errConfig, g)
		}
	}
	return nil
}

// ValidSession checks what both MQTT consumers need of a persistent
// session: brokers, a fixed client id, a share group that is one topic
// level, and valid filters. Its errors wrap errConfig.
func ValidSession(brokers []string, clientID, shareGroup string, filters []Filter, errConfig error) error {
	if len(brokers) == 0 {
		return fmt.Errorf("%w: no broker", errConfig)
	}
	for _, b := range brokers {
		if _, err := ParseBroker(b, errConfig); err != nil {
			return err
		}
	}
	if strings.TrimSpace(clientID) == "" {
		return fmt.Errorf("%w: empty client id: a persistent session needs a fixed one", errConfig)
	}
	if strings.ContainsAny(shareGroup, "/+#") {
		return fmt.Errorf("%w: share group %q contains /, + or #", errConfig, shareGroup)
	}
	if len(filters) == 0 {
		return fmt.Errorf("%w: no topic filter", errConfig)
	}
	for _, f := range filters {
		if err := ValidFilter(f.Topic, f.QoS, errConfig); err != nil {
			return err
		}
	}
	return nil
}

// ParseBroker parses the URL of an MQTT broker, as both MQTT consumers
// (5 and 3.1.1) take it. Its errors wrap errConfig, the caller's sentinel.
func ParseBroker(s string, errConfig error) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: broker url: %v", errConfig, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "tcp", "mqtt", "ssl", "tls", "mqtts", "ws", "wss":
	default:
		return nil, fmt.Errorf("%w: broker %q: scheme must be tcp, mqtt, ssl, tls, mqtts, ws or wss", errConfig, u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: broker %q has no host", errConfig, u.Redacted())
	}
	if u.User != nil {
		// paho puts the URL in its connection errors, which are logged, and
		// the 3.1.1 paho takes credentials from it over the configured ones.
		return nil, fmt.Errorf("%w: broker %q: credentials belong in username and password, not the URL", errConfig, u.Redacted())
	}
	return u, nil
}

// ValidFilter checks an MQTT topic filter by the MQTT rules ('#' only as
// the whole last level, '+' only as a whole level, no $share prefix: the
// share group is set apart) and its QoS (1 or 2: a QoS 0 message lost in
// transit cannot be redelivered). Its errors wrap errConfig.
func ValidFilter(topic string, qos byte, errConfig error) error {
	switch {
	case qos == 0:
		return fmt.Errorf("%w: filter %q at QoS 0: messages lost in transit could not be redelivered", errConfig, topic)
	case qos > 2:
		return fmt.Errorf("%w: filter %q: QoS %d", errConfig, topic, qos)
	case topic == "":
		return fmt.Errorf("%w: empty topic filter", errConfig)
	case strings.HasPrefix(topic, "$share/"):
		return fmt.Errorf("%w: filter %q: set the share group instead of a $share prefix", errConfig, topic)
	}
	levels := strings.Split(topic, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return fmt.Errorf("%w: filter %q: '#' must be the whole last level", errConfig, topic)
		}
		if strings.Contains(l, "+") && l != "+" {
			return fmt.Errorf("%w: filter %q: '+' must be a whole level", errConfig, topic)
		}
	}
	return nil
}
