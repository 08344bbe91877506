package config

import (
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Audit sink kinds.
const (
	SinkOTLP   = "otlp"
	SinkSyslog = "syslog"
	SinkFile   = "file"
)

// Defaults of the audit sink settings.
const (
	DefaultSinkTimeout    = Duration(10 * time.Second)
	DefaultSyslogApp      = "replayguard"
	DefaultSyslogFacility = "user"
	DefaultSinkKeep       = 5
	// DefaultSyslogMaxMessage is the size RFC 5425 says receivers should
	// take, and rsyslog's default; MinSyslogMaxMessage the size they must.
	DefaultSyslogMaxMessage ByteSize = 8 << 10
	MinSyslogMaxMessage     ByteSize = 2 << 10
)

// SinkConfig is one audit sink: every committed audit record is streamed
// to it, at least once and in order, from a cursor the store keeps.
type SinkConfig struct {
	// Name keys the sink's cursor in the store and labels its metrics:
	// letters, digits, '.', '_' and '-'. Required, unique.
	Name string `yaml:"name"`
	// Kind is otlp, syslog or file. Required.
	Kind string `yaml:"kind"`
	// Endpoint (otlp) is the receiver's URL, http(s)://host:port/v1/logs.
	Endpoint string `yaml:"endpoint,omitempty"`
	// Headers (otlp) are sent with every request. Default none.
	Headers map[string]string `yaml:"headers,omitempty"`
	// Timeout (otlp) bounds one export request: at least 100ms. Default
	// 10s.
	Timeout Duration `yaml:"timeout,omitempty"`
	// TLS (otlp with an https:// endpoint, syslog) verifies the receiver
	// with ca_file and presents cert_file and key_file; a syslog sink with
	// tls speaks RFC 5425 (syslog over TLS, port 6514 by custom). Default:
	// the system roots for https://; plain TCP for syslog.
	TLS TLSConfig `yaml:"tls,omitempty"`
	// Address (syslog) is the receiver's host:port, over TCP.
	Address string `yaml:"address,omitempty"`
	// AppName (syslog) is the APP-NAME of each message. Default replayguard.
	AppName string `yaml:"app_name,omitempty"`
	// Facility (syslog) is a facility name: user, daemon, auth, local0 …
	// local7 and the rest of RFC 5424's but kern, the kernel's own.
	// Default user.
	Facility string `yaml:"facility,omitempty"`
	// MaxMessage (syslog) is the largest message, in octets, the receiver
	// takes whole (rsyslog's maxMessageSize, syslog-ng's log-msg-size): a
	// record whose message would be larger is sent as a stub naming it, and
	// counted in replayguard_audit_sink_oversize_total. At least 2KiB, the
	// size every RFC 5425 receiver must take. Default 8KiB.
	MaxMessage ByteSize `yaml:"max_message,omitempty"`
	// Path (file) is the JSON Lines file records are appended to.
	Path string `yaml:"path,omitempty"`
	// MaxBytes (file) rotates the file when it would grow past this size:
	// path becomes path.1, path.1 path.2, and so on. Default 0: no rotation.
	MaxBytes ByteSize `yaml:"max_bytes,omitempty"`
	// Keep (file) is how many rotated files stay. Default 5 with max_bytes.
	Keep int `yaml:"keep,omitempty"`
}

// SyslogFacilities maps the RFC 5424 facility names to their codes.
var SyslogFacilities = map[string]int{
	"kern": 0, "user": 1, "mail": 2, "daemon": 3, "auth": 4, "syslog": 5, "lpr": 6, "news": 7,
	"uucp": 8, "cron": 9, "authpriv": 10, "ftp": 11, "ntp": 12, "security": 13, "console": 14, "solaris-cron": 15,
	"local0": 16, "local1": 17, "local2": 18, "local3": 19, "local4": 20, "local5": 21, "local6": 22, "local7": 23,
}

var sinkName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (s *SinkConfig) setDefaults() {
	switch s.Kind {
	case SinkOTLP:
		setDuration(&s.Timeout, DefaultSinkTimeout)
	case SinkSyslog:
		if s.AppName == "" {
			s.AppName = DefaultSyslogApp
		}
		if s.Facility == "" {
			s.Facility = DefaultSyslogFacility
		}
		if s.MaxMessage == 0 {
			s.MaxMessage = DefaultSyslogMaxMessage
		}
	case SinkFile:
		if s.MaxBytes > 0 && s.Keep == 0 {
			s.Keep = DefaultSinkKeep
		}
	}
}

func checkSinks(ps *problems, f field, sinks []SinkConfig) {
	first := map[string]int{}
	files := map[string]int{}
	for i, s := range sinks {
		sf := f.index(i)
		switch j, dup := first[s.Name]; {
		case !sinkName.MatchString(s.Name):
			ps.add(sf.dot("name"), "name %q must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", s.Name)
		case dup:
			ps.add(sf.dot("name"), "name %q is also audit.sinks[%d]'s: each sink keeps its own cursor under its name", s.Name, j)
		default:
			first[s.Name] = i
		}
		if s.Kind == SinkFile && s.Path != "" {
			p := filepath.Clean(s.Path)
			if j, dup := files[p]; dup {
				ps.add(sf.dot("path"), "path %q is also audit.sinks[%d]'s: two sinks would write every record twice into one file, and rotate it from under each other", s.Path, j)
			} else {
				files[p] = i
			}
		}
		s.check(ps, sf)
	}
}

func (s SinkConfig) check(ps *problems, f field) {
	set := map[string]bool{
		"endpoint": s.Endpoint != "", "headers": len(s.Headers) > 0, "timeout": s.Timeout != 0,
		"address": s.Address != "", "app_name": s.AppName != "", "facility": s.Facility != "",
		"path": s.Path != "", "max_bytes": s.MaxBytes != 0, "keep": s.Keep != 0, "tls": s.TLS != (TLSConfig{}),
		"max_message": s.MaxMessage != 0,
	}
	var own []string
	switch s.Kind {
	case SinkOTLP:
		own = []string{"endpoint", "headers", "timeout", "tls"}
		s.checkOTLP(ps, f)
	case SinkSyslog:
		own = []string{"address", "app_name", "facility", "max_message", "tls"}
		s.checkSyslog(ps, f)
	case SinkFile:
		own = []string{"path", "max_bytes", "keep"}
		s.checkFile(ps, f)
	default:
		ps.add(f.dot("kind"), "kind %q is not one of otlp, syslog, file", s.Kind)
		return
	}
	for _, k := range []string{"endpoint", "headers", "timeout", "tls", "address", "app_name", "facility", "max_message", "path", "max_bytes", "keep"} {
		if set[k] && !contains(own, k) {
			ps.add(f.dot(k), "%s is not a setting of a %s sink (it takes %s)", k, s.Kind, strings.Join(own, ", "))
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (s SinkConfig) checkOTLP(ps *problems, f field) {
	u, err := url.Parse(s.Endpoint)
	shown := shownURL(s.Endpoint) // it may carry a token
	switch {
	case s.Endpoint == "":
		ps.add(f.dot("endpoint"), "endpoint is required for an otlp sink, like http://127.0.0.1:4318/v1/logs")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		ps.add(f.dot("endpoint"), "endpoint %q is not an http(s)://host:port/v1/logs URL", shown)
	case u.Port() == "" || !validPort(u.Port(), 1):
		ps.add(f.dot("endpoint"), "endpoint %q needs a port from 1 to 65535 (OTLP/HTTP listens on 4318)", shown)
	case u.Path == "" || u.Path == "/":
		ps.add(f.dot("endpoint"), "endpoint %q has no path: OTLP/HTTP receivers take logs at /v1/logs", shown)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		ps.add(f.dot("endpoint"), "endpoint %q carries credentials, a query or a fragment: put credentials in headers", shown)
	case u.Scheme == "http" && s.TLS != (TLSConfig{}):
		ps.add(f.dot("tls"), "tls is set for the plain http:// endpoint %q: write https:// to use it", shown)
	}
	s.TLS.checkPair(ps, f.dot("tls"))
	for k, v := range s.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			ps.add(f.dot("headers"), "header name %q is not a valid HTTP header name", k)
		}
		if strings.ContainsFunc(v, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
			ps.add(f.dot("headers"), "the value of header %q holds a control character (a line break?): HTTP cannot send it", k)
		}
	}
	switch {
	case s.Timeout < 0:
		ps.add(f.dot("timeout"), "timeout must be positive, got %v", s.Timeout)
	case s.Timeout > 0 && s.Timeout < MinRequestTimeout:
		ps.add(f.dot("timeout"), "timeout %v is below %v: an export would time out before its receiver could answer, and the sink deliver nothing",
			s.Timeout, MinRequestTimeout)
	}
}

func (s SinkConfig) checkSyslog(ps *problems, f field) {
	host, port, err := net.SplitHostPort(s.Address)
	switch {
	case s.Address == "":
		ps.add(f.dot("address"), "address is required for a syslog sink, like 127.0.0.1:6514")
	case err != nil || host == "":
		ps.add(f.dot("address"), "address %q is not host:port", s.Address)
	case !validPort(port, 1):
		ps.add(f.dot("address"), "address %q: port %q is not from 1 to 65535", s.Address, port)
	}
	s.TLS.checkPair(ps, f.dot("tls"))
	if n := len(s.AppName); n > 48 || strings.ContainsFunc(s.AppName, func(r rune) bool { return r <= 32 || r >= 127 }) {
		ps.add(f.dot("app_name"), "app_name %q must be at most 48 printable ASCII characters without spaces (RFC 5424 APP-NAME)", s.AppName)
	}
	if s.MaxMessage != 0 && s.MaxMessage < MinSyslogMaxMessage {
		ps.add(f.dot("max_message"), "max_message %v is below 2KiB, the size every syslog receiver must take (RFC 5425): set the receiver's limit, 2KiB or more", s.MaxMessage)
	}
	switch _, ok := SyslogFacilities[s.Facility]; {
	case s.Facility == "kern": // code 0, which the syslog sink takes for its default, user
		ps.add(f.dot("facility"), "facility %q is the kernel's own: give the audit records another one (user, daemon, local0 … local7, …)", s.Facility)
	case !ok && s.Facility != "":
		ps.add(f.dot("facility"), "facility %q is not a syslog facility name (user, daemon, local0 … local7, …)", s.Facility)
	}
}

func (s SinkConfig) checkFile(ps *problems, f field) {
	if s.Path == "" {
		ps.add(f.dot("path"), "path is required for a file sink: name the JSON Lines file")
	}
	if s.MaxBytes < 0 {
		ps.add(f.dot("max_bytes"), "max_bytes must be positive, got %d", s.MaxBytes)
	}
	if s.Keep < 0 || (s.Keep > 0 && s.MaxBytes == 0) {
		ps.add(f.dot("keep"), "keep needs a positive count and max_bytes (rotation), got %d", s.Keep)
	}
}
