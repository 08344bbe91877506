package redis

import (
	"context"
	"fmt"
	"strconv"
)

// QuarantineBases returns every member's quarantine base (its number
// shifted left by 40 bits, QuarantineBase of its handle), by member id: what
// an after-action report needs to name a quarantine entry from the audit
// record that held it. A read-only handle answers it.
func (s *Store) QuarantineBases(ctx context.Context) (map[string]uint64, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	m, err := s.c.HGetAll(ctx, s.k.members).Result()
	if err != nil {
		return nil, s.fail("read the members' numbers", err)
	}
	out := make(map[string]uint64, len(m))
	for member, v := range m {
		n, err := strconv.ParseUint(v, 10, 23)
		if err != nil {
			return nil, fmt.Errorf("redis store: member %q has number %q: %v", member, v, err)
		}
		out[member] = n << 40
	}
	return out, nil
}
