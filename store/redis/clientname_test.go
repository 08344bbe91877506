package redis

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestConnectionsCarryTheMemberID opens a member's store, a read-only one
// and one whose URL names its own client: CLIENT LIST shows which
// connection is whose, a space in a member id read as '_'.
func TestConnectionsCarryTheMemberID(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	g := newGroup(srv)
	g.must(t, "rg 7")
	g.must(t, "")
	g.must(t, "rg-8", func(o *Options) { o.URL += "?client_name=ops-cop" })
	list, ok := g.do(t, "CLIENT", "LIST").(string)
	if !ok {
		t.Fatalf("CLIENT LIST answered %v", list)
	}
	for _, want := range []string{"replayguard-rg_7", "replayguard", "ops-cop"} {
		if !strings.Contains(list, " name="+want+" ") {
			t.Fatalf("no connection named %q in\n%s", want, list)
		}
	}
	if strings.Contains(list, " name=replayguard-rg-8 ") {
		t.Fatalf("the URL's client_name was overridden:\n%s", list)
	}
}
