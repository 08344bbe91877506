package redis

import (
	"context"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// durableSettings are the server settings under which an acknowledged write
// survives a crash and stays: an append-only file, synced before each
// reply (Redis 7.0 has no WAITAOF), and no eviction (an evicted key would
// let its replay through).
var durableSettings = []struct{ name, want string }{
	{"appendonly", "yes"},
	{"appendfsync", "always"},
	{"maxmemory-policy", "noeviction"},
}

// checkDurable returns "" when the server is durable, else the settings
// that are not, each with the value it wants. It reads them with CONFIG GET;
// where CONFIG is refused (renamed, or a managed service), from INFO, which
// reports appendonly and maxmemory-policy but not appendfsync: then it fails.
func checkDurable(ctx context.Context, c *goredis.Client) (string, error) {
	got, cfgErr := configGet(ctx, c)
	if cfgErr != nil {
		var err error
		if got, err = infoSettings(ctx, c); err != nil {
			return "", fmt.Errorf("redis store: cannot check that the server is durable: CONFIG GET failed (%v) and %w", cfgErr, err)
		}
	}
	var bad []string
	for _, s := range durableSettings {
		v, ok := got[s.name]
		if !ok {
			why := "the server does not report it"
			if cfgErr != nil {
				why = fmt.Sprintf("CONFIG GET failed (%v) and INFO does not report it", cfgErr)
			}
			return "", fmt.Errorf("redis store: cannot check %s: %s "+
				"(allow CONFIG GET, or set store.allow_not_durable: true if the server is known to run with %s %s)",
				s.name, why, s.name, s.want)
		}
		if !strings.EqualFold(v, s.want) {
			bad = append(bad, fmt.Sprintf("%s is %q (set %s %s)", s.name, v, s.name, s.want))
		}
	}
	return strings.Join(bad, "; "), nil
}

func configGet(ctx context.Context, c *goredis.Client) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range durableSettings {
		m, err := c.ConfigGet(ctx, s.name).Result()
		if err != nil {
			return nil, err
		}
		if v, ok := m[s.name]; ok {
			out[s.name] = v
		}
	}
	return out, nil
}

// infoSettings reads what INFO persistence and INFO memory tell of the
// settings: aof_enabled and maxmemory_policy.
func infoSettings(ctx context.Context, c *goredis.Client) (map[string]string, error) {
	text, err := c.Info(ctx, "persistence", "memory").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO failed too: %w", err)
	}
	out := map[string]string{}
	for line := range strings.Lines(text) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "aof_enabled":
			out["appendonly"] = map[string]string{"1": "yes", "0": "no"}[v]
		case "maxmemory_policy":
			out["maxmemory-policy"] = v
		}
	}
	return out, nil
}
