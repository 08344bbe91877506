package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestBenchKeepsAJournalOnASharedStore runs bench with --journal on each
// shared store: every member must leave a journal directory with a segment
// that holds the batches it committed, and the run's schema or prefix is
// gone from the server afterwards.
func TestBenchKeepsAJournalOnASharedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and Redis")
	}
	for _, tt := range []struct {
		name    string
		url     func(t *testing.T) string
		dropped *regexp.Regexp
		left    func(t *testing.T, url string) int // the run's rows or keys on the server
	}{
		{"on PostgreSQL", func(t *testing.T) string { return testbroker.StartPostgres(t, testbroker.PostgresOptions{}).URL() },
			regexp.MustCompile(`schema bench_\d+ dropped\n`), benchSchemasLeft},
		{"on Redis", func(t *testing.T) string { return testbroker.StartRedis(t, testbroker.RedisOptions{}).URL() },
			regexp.MustCompile(`prefix \{bench_\d+\}: deleted: [1-9]\d* keys\n`), redisKeysLeft},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "journal")
			url := tt.url(t)
			out := mustRun(t, "", "bench", "--store", url, "--members", "2", "--messages", "3000", "--journal", dir)
			if !strings.Contains(out, "msg/s durable, 2 members") || !strings.Contains(out, "journal under "+dir) || !tt.dropped.MatchString(out) {
				t.Fatalf("bench output %q", out)
			}
			if n := tt.left(t, url); n != 0 {
				t.Fatalf("%d of the run's schemas or keys left on the server", n)
			}
			for _, member := range []string{"bench-1", "bench-2"} {
				segs, err := filepath.Glob(filepath.Join(dir, member+"@*", "*.seg"))
				if err != nil || len(segs) == 0 {
					t.Fatalf("no segment in %s's journal under %s: %v", member, dir, err)
				}
				if fi, err := os.Stat(segs[0]); err != nil || fi.Size() < 1500*200 {
					t.Fatalf("%s's segment %s: %v, want ~1,500 messages of ~280 bytes", member, segs[0], err)
				}
			}
		})
	}
}

func TestBenchRefusesAJournalOnTheEmbeddedStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	_, errs, code := cli(t, "", "bench", "--messages", "100", "--dir", filepath.Join(t.TempDir(), "d"), "--journal", dir)
	if code != exitUsage || !strings.Contains(errs, "--journal needs --store") {
		t.Fatalf("exit %d, stderr %q; want exit %d and --journal refused", code, errs, exitUsage)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("journal directory %s: %v, want none", dir, err)
	}
}

func TestBenchRefusesABatchOutOfRange(t *testing.T) {
	for _, n := range []string{"0", "-5", "65536"} {
		_, errs, code := cli(t, "", "bench", "--messages", "100", "--batch", n)
		if code != exitUsage || !strings.Contains(errs, "--batch must be from 1 to 65535, got "+n) {
			t.Fatalf("--batch %s: exit %d, stderr %q; want exit %d and --batch refused", n, code, errs, exitUsage)
		}
	}
}

// benchSchemasLeft counts the bench_ schemas on the PostgreSQL server at url.
func benchSchemasLeft(t *testing.T, url string) int {
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	var n int
	if err := c.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bench\_%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// redisKeysLeft counts the keys on the Redis server at url.
func redisKeysLeft(t *testing.T, url string) int {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opt)
	defer c.Close()
	n, err := c.DBSize(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}
