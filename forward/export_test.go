package forward

import "context"

// Refresh is refresh: a count of Member's pending entries, for a test that
// orders one against a mark.
func (d *Drainer) Refresh(ctx context.Context) error { return d.refresh(ctx) }
