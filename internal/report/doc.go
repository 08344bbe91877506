// Package report builds replayguard's after-action report from the audit
// log: decisions per minute by outcome, the broker changes, per-source
// figures, every quarantine decision with its resolution, what members did
// about a shared store that lost their commits, and the hash chains'
// verification. Build computes the figures; RenderHTML writes them as one
// self-contained page (inline CSS and SVG, nothing fetched, no script) to
// read and print, and the Report marshals to JSON with the same figures.
//
//	rep, err := report.Build(report.Records(ctx, store), report.Options{
//		Heads: map[string]engine.AuditHead{"": head}, Store: "embedded", ReadPath: "from the store"})
//	if err == nil {
//		err = report.RenderHTML(os.Stdout, rep)
//	}
//
// On a shared store, Chains merges every member's chain by time. A Report
// is plain data; Build and RenderHTML keep no state between calls and are
// safe for concurrent use.
package report
