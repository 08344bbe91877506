package app

import (
	"context"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/config"
)

// A shared store's URL that the driver cannot read, or with a setting the
// store refuses, stops run at start whatever the server: lint reads it as
// run does and says so, rather than "ok" beside a note that the store
// could not be reached. The problem never shows the password.
func TestLintRefusesAStoreURLRunCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name, kind, url string
		want            []string // what the problem at store.url says, nil for none
		refusedAtOpen   bool     // run's open refuses it before it connects
	}{
		{"a postgres port out of range", "postgres", "postgres://u:s3cret@db:99999/rg",
			[]string{"store.url: cannot parse `postgres://u:xxxxx@db:99999/rg`", "invalid port"}, true},
		{"a postgres connection string that is not one", "postgres", "host=db port=x password=s3cret",
			[]string{"store.url: cannot parse"}, true},
		{"a postgres query mode the store cannot work with", "postgres", "postgres://db/rg?default_query_exec_mode=exec",
			[]string{"store.url: default_query_exec_mode=exec types every argument as text"}, true},
		{"a redis database that is not a number", "redis", "redis://:s3cret@cache:6379/abc",
			[]string{"store.url: redis://:xxxxx@cache:6379/abc: redis: invalid database number"}, true},
		{"a redis port out of range", "redis", "redis://:s3cret@cache:99999/0",
			[]string{"store.url: redis://:xxxxx@cache:99999/0: port \"99999\" is not from 1 to 65535"}, false},
		{"a postgres URL", "postgres", "postgres://u:s3cret@db:5432/rg", nil, false},
		{"a redis URL", "redis", "redis://:s3cret@cache:6379/0", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("store: {kind: "+tc.kind+", url: '"+tc.url+"'}\n"), "rg.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.refusedAtOpen {
				st, err := openStore(context.Background(), cfg.Store, cfg.Window, false, nil)
				if err == nil {
					st.Close()
					t.Fatal("run's open of the store took the URL")
				}
				t.Logf("run refuses: %v", err)
			}
			ps := CheckLocal(cfg)
			if tc.want == nil {
				if len(ps) > 0 {
					t.Errorf("CheckLocal = %v, want no problem", ps)
				}
				return
			}
			if len(ps) != 1 {
				t.Fatalf("CheckLocal = %v, want one problem at store.url", ps)
			}
			got := ps[0].Path + ": " + ps[0].Message
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("problem %q does not say %q", got, w)
				}
			}
			if !strings.HasPrefix(got, tc.want[0]) || strings.Contains(got, "s3cret") {
				t.Errorf("problem %q: want it to start %q, without the password", got, tc.want[0])
			}
		})
	}
}
