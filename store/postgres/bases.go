package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// QuarantineBases returns every member's quarantine base (its number
// shifted left by 40 bits, QuarantineBase of its handle), by member id: what
// an after-action report needs to name a quarantine entry from the audit
// record that held it. A read-only handle answers it.
func (s *Store) QuarantineBases(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := s.query(ctx, func(c *pgx.Conn) error {
		rs, err := c.Query(ctx, "SELECT member, number FROM "+pgx.Identifier{s.schema}.Sanitize()+".members")
		if err != nil {
			return dbErr(err)
		}
		for rs.Next() {
			var m string
			var n int64
			if err := rs.Scan(&m, &n); err != nil {
				return dbErr(err)
			}
			out[m] = uint64(n) << 40
		}
		return dbErr(rs.Err())
	})
	return out, err
}
