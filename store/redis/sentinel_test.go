package redis

import (
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestParseSentinelURL(t *testing.T) {
	for _, c := range []struct {
		name, url      string
		addrs          []string
		master         string
		db             int
		user, password string
		redacted       string
	}{
		{name: "two hosts and a master", url: "redis+sentinel://h1:26379,h2:26380/mymaster",
			addrs: []string{"h1:26379", "h2:26380"}, master: "mymaster", redacted: "redis+sentinel://h1:26379,h2:26380/mymaster"},
		{name: "a database after the master", url: "redis+sentinel://h1:26379/mymaster/3",
			addrs: []string{"h1:26379"}, master: "mymaster", db: 3},
		{name: "a user and a password, redacted", url: "redis+sentinel://rg:s%40cret@h1:26379/m/0",
			addrs: []string{"h1:26379"}, master: "m", user: "rg", password: "s@cret", redacted: "redis+sentinel://rg:xxxxx@h1:26379/m/0"},
		{name: "a password alone", url: "redis+sentinel://:pw@h1/m",
			addrs: []string{"h1:26379"}, master: "m", password: "pw", redacted: "redis+sentinel://:xxxxx@h1/m"},
		{name: "a host without a port is on 26379", url: "redis+sentinel://10.0.0.1,10.0.0.2:1/m",
			addrs: []string{"10.0.0.1:26379", "10.0.0.2:1"}, master: "m"},
		{name: "IPv6 hosts in brackets", url: "redis+sentinel://[::1]:26380,[fe80::1]/m",
			addrs: []string{"[::1]:26380", "[fe80::1]:26379"}, master: "m"},
		{name: "the scheme in capitals", url: "REDIS+SENTINEL://h1/m", addrs: []string{"h1:26379"}, master: "m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, err := parseSentinelURL(c.url)
			if err != nil {
				t.Fatal(err)
			}
			o := u.opts
			if !slices.Equal(o.SentinelAddrs, c.addrs) || o.MasterName != c.master || o.DB != c.db ||
				o.Username != c.user || o.Password != c.password {
				t.Fatalf("parsed %+v", o)
			}
			if c.redacted != "" && u.redacted != c.redacted {
				t.Fatalf("redacted %q, want %q", u.redacted, c.redacted)
			}
		})
	}
	for _, c := range []struct{ name, url, want string }{
		{"no master name is refused", "redis+sentinel://h1:26379", "no master name"},
		{"an empty master name is refused", "redis+sentinel://h1:26379/", "no master name"},
		{"an empty master name before a database is refused", "redis+sentinel://h1:26379//0", "no master name"},
		{"no hosts are refused", "redis+sentinel:///m", "no Sentinel host"},
		{"no hosts after a password are refused", "redis+sentinel://:pw@/m", "no Sentinel host"},
		{"an empty host in the list is refused", "redis+sentinel://h1,,h2/m", "an empty host"},
		{"a bad port is refused", "redis+sentinel://h1:port/m", "bad port"},
		{"a port out of range is refused", "redis+sentinel://h1:70000/m", "bad port"},
		{"an IPv6 address without brackets is refused", "redis+sentinel://::1/m", "in brackets"},
		{"a database that is not a number is refused", "redis+sentinel://h1/m/zero", `database "zero"`},
		{"a negative database is refused", "redis+sentinel://h1/m/-1", `database "-1"`},
		{"a path after the database is refused", "redis+sentinel://h1/m/0/x", `database "0/x"`},
		{"query parameters are refused", "redis+sentinel://h1/m?db=1", "query parameters"},
		{"query parameters on the hosts are refused", "redis+sentinel://h1?x=1", "query parameters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, err := parseSentinelURL(c.url)
			if err == nil {
				t.Fatalf("parsed %+v", u.opts)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "MASTERNAME") {
				t.Fatalf("error %q, want one saying %q and showing the form", err, c.want)
			}
		})
	}
	t.Run("an error does not show the password", func(t *testing.T) {
		_, err := parseSentinelURL("redis+sentinel://u:s3cret@h1:x/m")
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "u:xxxxx@") {
			t.Fatalf("error %v", err)
		}
	})
}

// TestSentinel opens a member's store through a Sentinel: its connections
// reach the master the Sentinel names, and it writes there.
func TestSentinel(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	sen := srv.StartSentinel(t, "rg")
	g := newGroup(srv)
	s := g.must(t, "sen", func(o *Options) { o.URL = "redis+sentinel://" + sen.Addr() + "/rg/0" })
	if err := s.Commit(t.Context(), batchAfter(t, s, 2)); err != nil {
		t.Fatal(err)
	}
	direct := g.must(t, "")
	if got := chainOf(t, direct, "sen"); len(got) != 2 {
		t.Fatalf("the master holds %d records of the member's chain, want 2", len(got))
	}
	list, _ := g.do(t, "CLIENT", "LIST").(string)
	if !strings.Contains(list, " name=replayguard-sen ") {
		t.Fatalf("no connection of the member on the master:\n%s", list)
	}
	_, err := g.open(t, "sen2", func(o *Options) { o.URL = "redis+sentinel://" + sen.Addr() + "/nosuchmaster" })
	if err == nil || !strings.Contains(err.Error(), sen.Addr()) {
		t.Fatalf("open with an unknown master name: %v; want an error naming the Sentinel URL", err)
	}
	t.Logf("an unknown master: %v", err)
}
