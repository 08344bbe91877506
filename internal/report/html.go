package report

import (
	_ "embed"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var pageText string

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"when":   when,
	"whenp":  func(t *time.Time) string { return whenPtr(t) },
	"join":   func(s []string) string { return strings.Join(s, "/") },
	"seq":    func(p *int64) string { return seqText(p) },
	"member": func(s string) string { return memberText(s) },
	"anchor": anchor,
	"total":  func(l *Lineage) int { return l.Omitted + len(l.Changes) }, // a trimmed lineage's changes, every one
	"count":  func(n int) string { return itoa(int64(n)) },
}).Parse(pageText))

// RenderHTML writes the report as one self-contained HTML page: inline
// CSS, the timeline as inline SVG, no script and no reference outside the
// page, laid out to print.
func RenderHTML(w io.Writer, r *Report) error {
	return page.Execute(w, struct {
		*Report
		Timeline template.HTML
		Legend   []legendItem
		Shared   bool
		Twins    bool
		Rows     sourceRows
	}{r, timelineSVG(r), legend(r), shared(r), twins(r), sourceTable(r.Sources, MaxSourceRows)})
}

// twins reports whether any entity of r.Replayed had twins: copies of
// another redundant path, shown apart from the replays.
func twins(r *Report) bool {
	for _, e := range r.Replayed {
		if e.Twins > 0 {
			return true
		}
	}
	return false
}

// anchor is the id of entity's lineage section in r, or "" when it has
// none.
func anchor(r *Report, entity string) string {
	for i, l := range r.Lineages {
		if l.Entity == entity {
			return "lineage-" + strconv.Itoa(i)
		}
	}
	return ""
}

func shared(r *Report) bool {
	for _, c := range r.Verification.Chains {
		if c.Member != "" {
			return true
		}
	}
	return false
}

type legendItem struct {
	Outcome string
	Total   uint64
}

func legend(r *Report) []legendItem {
	var out []legendItem
	for i, name := range outcomeOrder {
		out = append(out, legendItem{Outcome: name, Total: field(&r.Totals.Outcomes, i)})
	}
	return out
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func whenPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return when(*t)
}

func seqText(p *int64) string {
	if p == nil {
		return "—"
	}
	return itoa(*p)
}

func memberText(s string) string {
	if s == "" {
		return "(single owner)"
	}
	return s
}
