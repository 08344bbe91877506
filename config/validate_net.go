package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// maxSessionExpiry is the largest MQTT session expiry interval.
const maxSessionExpiry = Duration((1<<32 - 1) * time.Second)

var brokerSchemes = map[string]bool{"tcp": true, "mqtt": true, "ssl": true, "mqtts": true, "ws": true, "wss": true}

func (m MQTTConfig) check(ps *problems, f field) {
	switch {
	case m.Feeds != nil && len(m.Feeds) == 0:
		ps.add(f.dot("feeds"), "feeds is empty: list the broker paths to consume at once, or remove it and list mqtt.brokers")
	case len(m.Feeds) > 0 && len(m.Brokers) > 0:
		ps.add(f.dot("brokers"), "brokers and feeds are both set: with feeds, each feed lists its own brokers")
	case len(m.Feeds) == 0 && len(m.Brokers) == 0:
		ps.add(f.dot("brokers"), "brokers is empty: list at least one, like tcp://127.0.0.1:1883")
	}
	m.checkFeeds(ps, f.dot("feeds"))
	for i, b := range m.Brokers {
		checkBroker(ps, f.dot("brokers").index(i), b)
	}
	if strings.ContainsAny(m.ShareGroup, "/+#") {
		ps.add(f.dot("share_group"), "share_group %q may not contain '/', '+' or '#'", m.ShareGroup)
	}
	for i, g := range m.FormerShareGroups {
		if g == "" || strings.ContainsAny(g, "/+#") {
			ps.add(f.dot("former_share_groups").index(i), "former share group %q is empty or contains '/', '+' or '#'", g)
		}
	}
	for i, t := range m.FormerFilters {
		if err := ValidateTopicFilter(t); err != nil {
			ps.add(f.dot("former_filters").index(i), "former filter %q: %v", t, err)
		}
	}
	switch m.Protocol {
	case ProtocolMQTT5, ProtocolMQTT311, ProtocolAuto:
	default:
		ps.add(f.dot("protocol"), "protocol %q is not one of 5, 3.1.1 or auto", m.Protocol)
	}
	switch se := m.SessionExpiry; {
	case se > maxSessionExpiry:
		ps.add(f.dot("session_expiry"), "session_expiry %s is above the MQTT maximum of 4294967295s", se)
	case se%Duration(time.Second) != 0:
		ps.add(f.dot("session_expiry"), "session_expiry %s is not a whole number of seconds", se)
	}
	if m.AdoptLostAfter < 0 {
		ps.add(f.dot("adopt_lost_after"), "adopt_lost_after must be a positive duration, like 45s, got %s", m.AdoptLostAfter)
	}
	switch ka := m.KeepAlive; {
	case ka <= 0 || ka > Duration(65535*time.Second):
		ps.add(f.dot("keep_alive"), "keep_alive must be from 1s to 65535s, got %s", ka)
	case ka%Duration(time.Second) != 0:
		ps.add(f.dot("keep_alive"), "keep_alive %s is not a whole number of seconds", ka)
	}
	if m.PasswordEnv != "" && m.PasswordFile != "" {
		ps.add(f, "password_env and password_file are both set: keep one")
	}
	if m.BatchSize < 1 {
		ps.add(f.dot("batch_size"), "batch_size must be at least 1, got %d", m.BatchSize)
	}
	if m.BatchLinger < 0 {
		ps.add(f.dot("batch_linger"), "batch_linger must not be negative")
	}
	if r := m.ReceiveMaximum; r < 1 || r > 65535 {
		ps.add(f.dot("receive_maximum"), "receive_maximum must be from 1 to 65535, got %d", r)
	} else if m.BatchSize > r {
		ps.add(f.dot("receive_maximum"), "receive_maximum %d is below batch_size %d: the broker stops sending before a batch can fill", r, m.BatchSize)
	}
	m.TLS.checkPair(ps, f.dot("tls"))
}

// feedName is what a feed may be called: it labels metrics and audit
// records.
var feedName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (m MQTTConfig) checkFeeds(ps *problems, f field) {
	names, ids := map[string]int{}, map[string]int{}
	for i, fd := range m.Feeds {
		fi := f.index(i)
		switch j, dup := names[fd.Name]; {
		case fd.Name == "":
			ps.add(fi.dot("name"), "name is required: it names the feed in audit records and metrics, like a or site-b")
		case !feedName.MatchString(fd.Name):
			ps.add(fi.dot("name"), "name %q may hold only letters, digits, '-' and '_' (at most 64)", fd.Name)
		case dup:
			ps.add(fi.dot("name"), "name %q is also feeds[%d]'s: each feed needs its own", fd.Name, j)
		default:
			names[fd.Name] = i
		}
		if len(fd.Brokers) == 0 {
			ps.add(fi.dot("brokers"), "brokers is empty: list the feed's brokers, like tcp://site-b-1:1883")
		}
		for j, b := range fd.Brokers {
			checkBroker(ps, fi.dot("brokers").index(j), b)
		}
		if j, dup := ids[fd.ClientID]; dup && fd.ClientID != "" {
			ps.add(fi.dot("client_id"), "client_id %q is also feeds[%d]'s: each feed is its own session and needs its own id", fd.ClientID, j)
		} else {
			ids[fd.ClientID] = i
		}
		for j, other := range m.Feeds {
			if fd.ClientID != "" && other.ClientID == fd.ClientID+ProbeClientIDSuffix {
				ps.add(fi.dot("client_id"), "client_id %q with %q is feeds[%d]'s client id: the feed's version probe connects under it with a clean start, which would end that feed's session",
					fd.ClientID, ProbeClientIDSuffix, j)
			}
		}
		switch fd.Protocol {
		case ProtocolMQTT5, ProtocolMQTT311, ProtocolAuto:
		default:
			ps.add(fi.dot("protocol"), "protocol %q is not one of 5, 3.1.1 or auto", fd.Protocol)
		}
		if fd.PasswordEnv != "" && fd.PasswordFile != "" {
			ps.add(fi, "password_env and password_file are both set: keep one")
		}
		if fd.TLS != nil {
			fd.TLS.checkPair(ps, fi.dot("tls"))
		}
	}
}

// sharedBrokerWarnings warns of a broker that two feeds list: one broker
// is one path, whatever the feeds say. It sends each message to both
// feeds, and what it loses neither delivers.
func (m MQTTConfig) sharedBrokerWarnings(warn func(path, msg string)) {
	first := map[string]int{} // a broker's address: the first feed listing it
	for i, f := range m.Feeds {
		for k, b := range f.Brokers {
			addr := brokerAddr(b)
			j, seen := first[addr]
			switch {
			case !seen:
				first[addr] = i
			case j != i:
				warn(fmt.Sprintf("mqtt.feeds[%d].brokers[%d]", i, k), fmt.Sprintf("feed %s lists broker %s, as feed %s does: one broker is one path, "+
					"which sends each message to both feeds and whose losses neither delivers; list each path's own brokers", f.Name, redactBroker(b), m.Feeds[j].Name))
			}
		}
	}
}

// brokerAddr is a broker URL's host and port, the host in lower case and
// this machine's loopback one name (localhost, 127.0.0.1 and ::1 reach one
// listener bound to every address): the broker it names, whatever the
// scheme or spelling. Other names are not resolved: lint reads no DNS.
func brokerAddr(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	host := strings.ToLower(u.Hostname())
	if ip := net.ParseIP(host); host == "localhost" || ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback) {
		host = "localhost"
	}
	return net.JoinHostPort(host, u.Port())
}

func checkBroker(ps *problems, f field, s string) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		ps.add(f, "broker %q is not a URL like tcp://127.0.0.1:1883", redactBroker(s))
		return
	}
	shown := u.Redacted()
	switch {
	case !brokerSchemes[u.Scheme]:
		ps.add(f, "broker %q: scheme %q is not one of tcp, mqtt, ssl, mqtts, ws, wss", shown, u.Scheme)
	case u.User != nil:
		ps.add(f, "broker %q carries credentials: set mqtt.username and mqtt.password_env or mqtt.password_file instead", shown)
	case u.Hostname() == "":
		ps.add(f, "broker %q has no host", shown)
	case u.Port() == "":
		ps.add(f, "broker %q has no port: add one, like :1883 (:8883 for TLS)", shown)
	case !validPort(u.Port(), 1):
		ps.add(f, "broker %q: port %q is not from 1 to 65535", shown, u.Port())
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		ps.add(f, "broker %q has a query or fragment: brokers take none", shown)
	case u.Path != "" && u.Path != "/" && u.Scheme != "ws" && u.Scheme != "wss":
		ps.add(f, "broker %q has a path: only ws:// and wss:// brokers take one", shown)
	}
}

// redactBroker hides what could be a password in an unparsable broker URL.
func redactBroker(s string) string {
	if at := strings.LastIndex(s, "@"); at >= 0 {
		if i := strings.Index(s, "://"); i >= 0 && i < at {
			return s[:i+3] + "xxxxx" + s[at:]
		}
		return "xxxxx" + s[at:]
	}
	return s
}

func validPort(p string, lowest int) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= lowest && n <= 65535 && p == strconv.Itoa(n)
}

func (t TLSConfig) checkPair(ps *problems, f field) {
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		ps.add(f.dot("key_file"), "cert_file is set without key_file: set both or neither")
	case t.KeyFile != "" && t.CertFile == "":
		ps.add(f.dot("cert_file"), "key_file is set without cert_file: set both or neither")
	}
}

func (h HTTPConfig) check(ps *problems, f field) {
	if h.Listen != ListenOff {
		host, port, err := net.SplitHostPort(h.Listen)
		if err != nil || !validPort(port, 0) || strings.ContainsAny(host, "/ ") {
			ps.add(f.dot("listen"), "listen %q is not host:port, like 127.0.0.1:9780 (or off to disable)", h.Listen)
		}
	}
	if h.TokenEnv != "" && h.TokenFile != "" {
		ps.add(f, "token_env and token_file are both set: keep one")
	}
	if h.AuthReads && !h.HasToken() {
		ps.add(f.dot("auth_reads"), "auth_reads needs a token: set token_env or token_file")
	}
	if len(h.Tokens) > 0 && (h.TokenEnv != "" || h.TokenFile != "") {
		ps.add(f.dot("tokens"), "tokens and the single token_env/token_file are both set: keep one (the single token is an operator named %q)", RoleOperator)
	}
	checkTokens(ps, f.dot("tokens"), h.Tokens)
	t, tf := h.TLS, f.dot("tls")
	t.checkPair(ps, tf)
	if t.CAFile != "" && t.CertFile == "" && t.KeyFile == "" {
		ps.add(tf.dot("ca_file"), "ca_file asks clients for certificates, which needs the server's own cert_file and key_file")
	}
	if t.InsecureSkipVerify {
		ps.add(tf.dot("insecure_skip_verify"), "insecure_skip_verify is for clients: the HTTP server has no peer to verify")
	}
}

func checkTokens(ps *problems, f field, tokens []TokenConfig) {
	seen := map[string]int{}
	for i, t := range tokens {
		tf := f.index(i)
		if t.Name != "" {
			tf.label += " (" + t.Name + ")"
		}
		switch j, dup := seen[t.Name]; {
		case strings.TrimSpace(t.Name) == "":
			ps.add(tf.dot("name"), "name is empty: every token needs a unique name, which the audit records of its releases and discards carry")
		case t.Name != strings.TrimSpace(t.Name) || strings.ContainsFunc(t.Name, unicode.IsControl) || !utf8.ValidString(t.Name):
			ps.add(tf.dot("name"), "name %q has leading or trailing spaces, control characters or invalid UTF-8", t.Name)
		case dup:
			ps.add(tf.dot("name"), "name %q is already used by tokens[%d]", t.Name, j)
		default:
			seen[t.Name] = i
		}
		switch {
		case t.TokenEnv == "" && t.TokenFile == "":
			ps.add(tf, "neither token_env nor token_file is set: name where the token is")
		case t.TokenEnv != "" && t.TokenFile != "":
			ps.add(tf, "token_env and token_file are both set: keep one")
		}
		switch t.Role {
		case RoleViewer, RoleOperator:
		case "":
			ps.add(tf.dot("role"), "role is required: viewer (reads) or operator (reads, release and discard)")
		default:
			ps.add(tf.dot("role"), "role %q is not viewer or operator", t.Role)
		}
	}
}

// Identifiers generated per start, which lose the persistent session.
var (
	uuidLike = regexp.MustCompile(`(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}`)
	longHex  = regexp.MustCompile(`(?i)(^|[^0-9a-z])[0-9a-f]{16,}($|[^0-9a-z])`)
	// A Kubernetes Deployment pod name: replica set hash and pod suffix,
	// drawn from an alphabet without vowels.
	podName = regexp.MustCompile(`-[bcdfghjklmnpqrstvwxz2456789]{6,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
)

func (c *Config) checkRun(ps *problems) {
	if len(c.Routes) == 0 {
		ps.add(field{}.dot("routes"), "no routes: run needs at least one route to subscribe to")
	}
	c.checkOutboxBound(ps)
	if c.Input == InputJetStream && c.JetStream != nil {
		c.checkRunJetStream(ps)
		return
	}
	idf := field{}.dot("mqtt").dot("client_id")
	if len(c.MQTT.Feeds) > 0 {
		for i, fd := range c.MQTT.Feeds {
			checkClientID(ps, field{}.dot("mqtt").dot("feeds").index(i).dot("client_id"), fd.ClientID)
		}
		if c.MQTT.ClientID == "" {
			idf = field{}.dot("mqtt").dot("feeds").index(0).dot("client_id")
		}
	} else {
		checkClientID(ps, idf, c.MQTT.ClientID)
	}
	// run's member id on a shared store, store.member or else this client
	// id, names its directory of the archive (store.member itself is
	// checked by Validate).
	if id := c.RunMember(); c.Store.Shared() && c.Store.Member == "" && c.Audit.Archive != "" && strings.ContainsAny(id, `/\`) {
		ps.add(idf, "client_id %q, run's member id while store.member is unset, holds a path separator: the archive keeps each member's segments in a directory named after its id; set store.member to an id without / or \\", id)
	}
}

// RunMember is the member id run writes a shared store's chain under when
// store.member is not set: mqtt.client_id (with mqtt.feeds and no
// mqtt.client_id, the first feed's), or the JetStream consumer.
func (c *Config) RunMember() string {
	if c.Input == InputJetStream && c.JetStream != nil {
		return c.JetStream.Consumer
	}
	if c.MQTT.ClientID == "" && len(c.MQTT.Feeds) > 0 {
		return c.MQTT.Feeds[0].ClientID
	}
	return c.MQTT.ClientID
}

// RunMemberSetting names the setting RunMember reads.
func (c *Config) RunMemberSetting() string {
	if c.Input == InputJetStream && c.JetStream != nil {
		return "jetstream.consumer"
	}
	if c.MQTT.ClientID == "" && len(c.MQTT.Feeds) > 0 {
		return "mqtt.feeds[0].client_id"
	}
	return "mqtt.client_id"
}

// checkClientID refuses an id a persistent session cannot keep.
func checkClientID(ps *problems, f field, id string) {
	switch {
	case strings.TrimSpace(id) == "":
		ps.add(f, "client_id is empty: a persistent session needs a fixed client id, like replayguard-1 (or set REPLAYGUARD_MQTT_CLIENT_ID)")
	case len(id) > 65535 || !utf8.ValidString(id) || strings.ContainsRune(id, 0):
		ps.add(f, "client_id must be valid UTF-8 without NUL, at most 65535 bytes")
	case strings.ContainsAny(id, "$%{}"):
		ps.add(f, "client_id %q holds an unexpanded placeholder: write ${VAR} to take it from the environment", id)
	case uuidLike.MatchString(id) || longHex.MatchString(id):
		ps.add(f, "client_id %q looks generated: a persistent session needs the same id at every start", id)
	case podName.MatchString(id):
		ps.add(f, "client_id %q looks like a Kubernetes Deployment pod name, which changes at every restart: use a StatefulSet name (replayguard-0) or a fixed id", id)
	}
}

// nameLabel is the name a warning's path shows beside an index, like
// " (m)" in "routes[1] (m).topic": not a part of the setting's key.
var nameLabel = regexp.MustCompile(` \([^()]*\)`)

// Warnings lists settings that are valid but likely to lose or double
// messages; run and lint print them without failing.
func (c *Config) Warnings() []Problem {
	var ws []Problem
	warn := func(path, msg string) {
		ws = append(ws, c.Place(nameLabel.ReplaceAllString(path, ""), Problem{Path: path, Message: msg}))
	}
	idRoutes := false
	for _, r := range c.Routes {
		idRoutes = idRoutes || (r.ID != "" && r.Sequence == "")
	}
	c.jetStreamWarnings(warn)
	if idRoutes && c.Window.TTL <= c.MQTT.SessionExpiry && c.Input != InputJetStream {
		warn("window.ttl", "ttl "+c.Window.TTL.String()+" is not above mqtt.session_expiry "+c.MQTT.SessionExpiry.String()+
			": a replay after a long outage may arrive after its key is evicted and be applied again")
	}
	if c.MQTT.CleanStart && c.Input != InputJetStream {
		warn("mqtt.clean_start", "clean_start discards the broker session at every connect: messages queued while replayguard was away are lost")
	}
	if c.MQTT.TLS.InsecureSkipVerify {
		warn("mqtt.tls.insecure_skip_verify", "the broker's certificate is not verified")
	}
	for i, f := range c.MQTT.Feeds {
		if c.MQTT.ShareGroup != "" && c.MQTT.ClientID != "" && f.ClientID != c.MQTT.ClientID+"-"+f.Name {
			warn(fmt.Sprintf("mqtt.feeds[%d].client_id", i), "feed "+f.Name+" has a client id of its own in a share group: members given the same file or environment share its session and take it from each other; leave it unset to derive it from mqtt.client_id")
		}
		if f.TLS != nil && f.TLS.InsecureSkipVerify && !c.MQTT.TLS.InsecureSkipVerify {
			warn(fmt.Sprintf("mqtt.feeds[%d].tls.insecure_skip_verify", i), "feed "+f.Name+": its broker's certificate is not verified")
		}
	}
	if o := c.Outputs.MQTT; o != nil && c.MQTT.ShareGroup != "" && c.MQTT.ClientID != "" && o.ClientID != c.MQTT.ClientID+OutputClientIDSuffix {
		warn("outputs.mqtt.client_id", "the forward output has a client id of its own in a share group: members given the same file or environment share its session and take it from each other; leave it unset to derive it from mqtt.client_id")
	}
	c.MQTT.sharedBrokerWarnings(warn)
	c.routeWarnings(warn)
	c.sparkplugWarnings(warn)
	c.forwardLoopWarnings(warn)
	if h := c.HTTP; h.Enabled() && !h.HasToken() && !loopback(h.Listen) {
		warn("http.listen", "listening on "+h.Listen+" without a token: anyone who can reach it reads the API, and release, discard, retry and drop are refused; give it http.tokens")
	}
	c.ignoredWarnings(warn)
	return ws
}

// ignoredWarnings lists settings the chosen store or input does not read,
// which a reader of the file would take for in force.
func (c *Config) ignoredWarnings(warn func(path, msg string)) {
	switch st := c.Store; {
	case st.Kind == StoreEmbedded && st.URL != "":
		warn("store.url", "the embedded store keeps its data in store.path and reads no url: set kind postgres or redis to use it, or remove it")
	case st.Kind == StoreMemory && st.Path != "":
		warn("store.path", "the memory store keeps nothing on disk and reads no path: set kind embedded to use it, or remove it")
	}
	if c.Input == InputJetStream && c.MQTT.ShareGroup != "" {
		warn("mqtt.share_group", "input jetstream reads no mqtt settings: members of a group share the durable consumer jetstream.consumer instead")
	}
}

func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// routeWarnings lists each route whose topic filter matches only topics an
// earlier route's matches: a message goes to the first route that matches,
// so it never gets one.
func (c *Config) routeWarnings(warn func(path, msg string)) {
	for i, r := range c.Routes {
		if len(c.MQTT.Feeds) > 1 && r.ID != "" && r.Sequence == "" {
			warn(fmt.Sprintf("routes[%d] (%s).id", i, r.Name), fmt.Sprintf("over redundant feeds, an id route finds a path's copies duplicate only while their keys are in the key window "+
				"(window.max_entries %d, window.ttl %s): a path back with a backlog of more messages than that applies the rest again; "+
				"give the route a sequence (a copy behind the window is then quarantined, never applied), or keep max_entries above the largest backlog a path can bring back",
				c.Window.MaxEntries, c.Window.TTL))
		}
		if ValidateTopicFilter(r.Topic) != nil {
			continue
		}
		for j, prev := range c.Routes[:i] {
			if ValidateTopicFilter(prev.Topic) == nil && filterCovers(prev.Topic, r.Topic) {
				warn(fmt.Sprintf("routes[%d] (%s).topic", i, r.Name), fmt.Sprintf("every topic %q matches also matches routes[%d] (%s)'s %q: "+
					"a message goes to the first route in the file whose topic matches, so this route never gets one; move it before routes[%d] or narrow that topic",
					r.Topic, j, prev.Name, prev.Topic, j))
				break
			}
		}
	}
}
