// Package web serves replayguard's operations surface: the HTTP API, the
// Prometheus /metrics endpoint, a server-sent-events stream and the
// dashboard (the common operating picture), all from assets embedded in the
// binary.
//
// Endpoints:
//
//	GET  /healthz                          the process is alive
//	GET  /readyz                           200 when Deps.Ready says so, else 503
//	GET  /metrics                          Deps.Gatherer in the Prometheus format
//	GET  /api/v1/state                     exactly `replayguard state --json`
//	GET  /api/v1/sources                   []engine.SourceReport
//	GET  /api/v1/stats                     window sizes, audit position, counts
//	GET  /api/v1/rates                     Rates: deliveries per second by outcome;
//	                                       window (default 5m, 1s to 15m)
//	GET  /api/v1/audit                     {records, next}; key, source, outcome,
//	                                       route, since, until, from, limit; a page
//	                                       examines 100,000 records at most: follow
//	                                       next until null
//	GET  /api/v1/explain/{entity...}       an entity's lineage (replayguard explain
//	                                       --json); field, at; 404 when nothing changed it
//	GET  /api/v1/quarantine                {entries, total, next}; from, limit
//	GET  /api/v1/quarantine/{id}           one held message
//	POST /api/v1/quarantine/{id}/release   body {} or empty
//	POST /api/v1/quarantine/{id}/discard   body {"reason": "..."}
//	GET  /api/v1/outbox                    {held, total_held, pending, next}: the
//	                                       entries a downstream refused; member,
//	                                       from, limit
//	POST /api/v1/outbox/{id}/retry         body {} or {"member": "...", "reason": "..."}
//	POST /api/v1/outbox/{id}/drop          body {"reason": "...", "member": "..."}
//	GET  /api/v1/feeds                     {feeds}: Deps.Feeds, the redundant broker
//	                                       paths; none with one path
//	GET  /api/v1/forward                   ForwardStatus: Deps.Forward, the drainer's
//	                                       depth, bound and outputs
//	GET  /api/v1/events                    hello, decision, state, resync events
//	GET  /                                 the dashboard
//
// Security: Config.Listen defaults to loopback. Release, discard, retry
// and drop need "Authorization: Bearer <token>" of a token with role
// operator when any token is set (Config.Tokens, or the single
// Config.Token, an operator named "operator"): a missing or unknown token
// is 401, a viewer's 403. Without a token they are allowed only on a
// loopback listener, and refused with 403 otherwise. Config.AuthReads
// makes reads need a token (of either role) too. The audit record of a
// release, discard, retry or drop names the token's holder; names never
// become metric labels. Writes must send Content-Type: application/json,
// and on a loopback listener a Host that is not a loopback name is
// refused, so that no web page the operator
// opens can drive the API. Every error is a JSON {"error": "..."} with a
// 4xx status for a bad request.
//
// Wiring, with hub and metrics both observing the engine:
//
//	hub := web.NewHub()
//	eng, _ := engine.New(ctx, store, engine.Options{Routes: routes, Observer: both(hub, m)})
//	srv := web.New(web.Config{Listen: "127.0.0.1:9780", Token: token},
//		web.Deps{Engine: eng, Audit: store, Quarantine: store, Gatherer: reg, Ready: ready, Hub: hub})
//	err := srv.Run(ctx) // until ctx is done
//
// A Server and a Hub are safe for concurrent use. Run and Serve own the
// serving goroutines and return after they have stopped; the Hub owns none
// and never blocks the engine: a stream client that falls behind loses
// events and receives a resync event telling it to refetch.
package web
