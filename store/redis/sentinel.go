package redis

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// sentinelScheme names a store.url that lists Redis Sentinels instead of the
// server: the client asks them for the master's address, and again after a
// failover.
const sentinelScheme = "redis+sentinel://"

// defaultSentinelPort is the port of a Sentinel host given without one.
const defaultSentinelPort = "26379"

const sentinelForm = "redis+sentinel://[user:password@]host1:26379,host2:26379/MASTERNAME[/DB]"

func isSentinelURL(u string) bool {
	return len(u) >= len(sentinelScheme) && strings.EqualFold(u[:len(sentinelScheme)], sentinelScheme)
}

// sentinelURL is a parsed redis+sentinel URL: the failover client's options
// (the user and password are the master's and its replicas', not the
// Sentinels') and the URL without its password, for errors.
type sentinelURL struct {
	opts     *goredis.FailoverOptions
	redacted string
}

// parseSentinelURL parses sentinelForm. A host without a port is on
// defaultSentinelPort; an IPv6 address is in brackets.
func parseSentinelURL(raw string) (*sentinelURL, error) {
	rest := raw[len(sentinelScheme):]
	authority, path, _ := strings.Cut(rest, "/")
	userinfo, hosts, hasUser := "", authority, false
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hosts, hasUser = authority[:i], authority[i+1:], true
	}
	u := &sentinelURL{opts: &goredis.FailoverOptions{}, redacted: sentinelScheme + rest}
	if hasUser {
		user, password, hasPassword := strings.Cut(userinfo, ":")
		redactedUser := user
		if hasPassword {
			redactedUser += ":xxxxx"
		}
		u.redacted = sentinelScheme + redactedUser + rest[len(userinfo):]
		var err error
		if u.opts.Username, err = url.PathUnescape(user); err != nil {
			return nil, u.bad("the user name: %v", err)
		}
		if u.opts.Password, err = url.PathUnescape(password); err != nil {
			return nil, u.bad("the password is not properly escaped")
		}
	}
	if strings.ContainsAny(hosts, "?#") || strings.ContainsAny(path, "?#") {
		return nil, u.bad("query parameters and fragments are not supported here")
	}
	if hosts == "" {
		return nil, u.bad("no Sentinel host")
	}
	for h := range strings.SplitSeq(hosts, ",") {
		addr, err := sentinelAddr(h)
		if err != nil {
			return nil, u.bad("%v", err)
		}
		u.opts.SentinelAddrs = append(u.opts.SentinelAddrs, addr)
	}
	master, db, hasDB := strings.Cut(path, "/")
	var err error
	if u.opts.MasterName, err = url.PathUnescape(master); err != nil || u.opts.MasterName == "" {
		return nil, u.bad("no master name after the hosts")
	}
	if hasDB {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return nil, u.bad("the database %q is not a number 0 or more", db)
		}
		u.opts.DB = n
	}
	return u, nil
}

// sentinelAddr returns h as host:port, with the default port if it has none.
func sentinelAddr(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("an empty host in the Sentinel list")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port: a name, an IPv4 address or a bracketed IPv6 one.
		host, port = h, defaultSentinelPort
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			host = h[1 : len(h)-1]
		}
		if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && !strings.HasPrefix(h, "[")) {
			return "", fmt.Errorf("the Sentinel host %q is not host:port (an IPv6 address goes in brackets)", h)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("the Sentinel host %q has a bad port", h)
	}
	if host == "" {
		return "", fmt.Errorf("the Sentinel host %q has no host name", h)
	}
	return net.JoinHostPort(host, port), nil
}

func (u *sentinelURL) bad(format string, args ...any) error {
	return fmt.Errorf("redis store: store.url %s: %s (the form is %s)", u.redacted, fmt.Sprintf(format, args...), sentinelForm)
}
