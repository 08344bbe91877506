package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// DropPrefix deletes every key under prefix on the server at url (redis://
// or rediss://): what `replayguard bench --store` made for one run. No
// member may still use it. It returns how many keys it deleted.
func DropPrefix(ctx context.Context, url, prefix string) (int, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return 0, fmt.Errorf("redis store: drop prefix %s: %w", prefix, err)
	}
	c := goredis.NewClient(opt)
	defer c.Close()
	pattern := globEscaper.Replace(prefix) + "*"
	n := 0
	var keys []string
	unlink := func() error {
		if len(keys) == 0 {
			return nil
		}
		d, err := c.Unlink(ctx, keys...).Result()
		n += int(d)
		keys = keys[:0]
		return err
	}
	it := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for it.Next(ctx) {
		if keys = append(keys, it.Val()); len(keys) == 1000 {
			if err := unlink(); err != nil {
				return n, fmt.Errorf("redis store: drop prefix %s: %w", prefix, err)
			}
		}
	}
	if err := it.Err(); err != nil {
		return n, fmt.Errorf("redis store: drop prefix %s: %w", prefix, err)
	}
	if err := unlink(); err != nil {
		return n, fmt.Errorf("redis store: drop prefix %s: %w", prefix, err)
	}
	return n, nil
}

// globEscaper escapes what SCAN's MATCH pattern would read as a glob.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)

// PrefixSize returns the bytes the server at url spends on the keys under
// prefix (MEMORY USAGE of each, every element counted).
func PrefixSize(ctx context.Context, url, prefix string) (int64, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return 0, fmt.Errorf("redis store: size of prefix %s: %w", prefix, err)
	}
	c := goredis.NewClient(opt)
	defer c.Close()
	var n int64
	it := c.Scan(ctx, 0, globEscaper.Replace(prefix)+"*", 1000).Iterator()
	for it.Next(ctx) {
		m, err := c.MemoryUsage(ctx, it.Val(), 0).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return n, fmt.Errorf("redis store: size of prefix %s: %w", prefix, err)
		}
		n += m
	}
	if err := it.Err(); err != nil {
		return n, fmt.Errorf("redis store: size of prefix %s: %w", prefix, err)
	}
	return n, nil
}
