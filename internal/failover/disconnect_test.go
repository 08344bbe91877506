package failover

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/store/postgres"
	"github.com/replayguard/replayguard/store/redis"
)

// waitDisconnected waits until the shared store's server has no
// connection of member left. A member killed with SIGKILL may have sent a
// whole batch, COMMIT or update script included, that the server still
// runs after the process is gone: its audit chain is only final once the
// server has noticed the closed connection, after those commands.
func waitDisconnected(t testing.TB, s *setup, member string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var count func() (int, error)
	switch s.Config.Store.Kind {
	case config.StorePostgres:
		conn, err := pgx.Connect(ctx, s.Config.Store.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		count = func() (n int, err error) {
			err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
				postgres.ApplicationName(member)).Scan(&n)
			return n, err
		}
	case config.StoreRedis:
		opt, err := goredis.ParseURL(s.Config.Store.URL)
		if err != nil {
			t.Fatal(err)
		}
		c := goredis.NewClient(opt)
		defer c.Close()
		count = func() (int, error) {
			list, err := c.ClientList(ctx).Result()
			return strings.Count(list, " name="+redis.ClientName(member)+" "), err
		}
	default:
		return // a single-owner store: its process's writes end with it
	}
	for {
		n, err := count()
		if err != nil {
			t.Fatalf("member %s: counting its connections to the store: %v", member, err)
		}
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("member %s: the store server still has %d of its connections 30s after it was killed", member, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
