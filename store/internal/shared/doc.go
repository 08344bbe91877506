// Package shared holds what the shared stores (store/postgres,
// store/redis) have in common outside their servers: how a process names
// itself as a member's lease holder, how a holder on this host is known to
// be dead, and the counters their SharedStats report.
package shared
