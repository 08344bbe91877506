package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// ExplainOptions say whose lineage Explain prints and how.
type ExplainOptions struct {
	Entity string
	// Field keeps only that field's changes; empty: every field.
	Field string
	// At shows the entity as the picture showed it then; zero: now.
	At time.Time
	// JSON prints the lineage as JSON instead of text.
	JSON bool
	// Archive is the audit archive to read what retention moved out of the
	// store from; empty: audit.archive of the configuration, if any.
	Archive string
}

// Explain prints an entity's lineage, read-only from the store and the
// archive (on a shared store, every member's chain), or through the API of
// the running process that holds the embedded store. An entity no record
// changed is an error.
func (t *Tool) Explain(ctx context.Context, opts ExplainOptions) error {
	if opts.Archive != "" { // named: it must be there (audit.archive is made by the first trim)
		if _, err := os.Stat(opts.Archive); err != nil {
			return fmt.Errorf("--archive: %w", err)
		}
	}
	ls, err := t.Lineages(ctx, report.LineageOptions{Entities: []string{opts.Entity}, Field: opts.Field, At: opts.At}, cmp.Or(opts.Archive, t.Config.Audit.Archive))
	if err != nil {
		return err
	}
	l := ls[0]
	if len(l.Changes) == 0 {
		return explainNone(l)
	}
	if opts.JSON {
		enc := json.NewEncoder(t.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	return WriteLineage(t.Out, l)
}

// explainNone says why a lineage is empty.
func explainNone(l *report.Lineage) error {
	what := fmt.Sprintf("entity %q", l.Entity)
	if l.Field != "" {
		what += fmt.Sprintf(" (field %q)", l.Field)
	}
	when := ""
	if l.At != nil {
		when = " up to " + l.At.Format(time.RFC3339Nano)
	}
	msg := fmt.Sprintf("no decision changed %s in the %s read%s", what, counted(l.Read.Records, "audit record", "audit records"), when)
	if n := l.Read.WithoutEffects; n > 0 {
		msg += fmt.Sprintf("; %s (written before records did, or of a route that changes no entity)", counted(n, "applied record says nothing of what it changed", "applied records say nothing of what they changed"))
	}
	return fmt.Errorf("%s", msg)
}

// Lineages reads the lineages of opts.Entities from the audit log and the
// archive dir ("": none), as Report reads the log. While a running process
// holds the store, that process reads each (GET /api/v1/explain), from its
// own store and audit.archive, rather than sending its whole log to be
// read here: only an archive it does not read, or a process that serves no
// lineage, makes the log come through the API. An entity no decision
// changed is then an error saying so (errUnchanged), not an empty lineage.
func (t *Tool) Lineages(ctx context.Context, opts report.LineageOptions, archive string) ([]*report.Lineage, error) {
	a, err := t.openRead(ctx)
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return nil, rerr
		}
		if archive == t.Config.Audit.Archive {
			if ls, err := r.lineages(opts); !errors.Is(err, errNoExplain) {
				return ls, err
			}
		}
		return report.Lineages(r.records(ctx, archive), opts)
	}
	defer a.Close()
	return StoreLineages(ctx, a.Store, archive, opts)
}

// storeRecords is the whole audit log of s: a shared store's every chain
// merged by time, or a single-owner store's log; each from the archive dir
// ("": none) where retention moved its oldest records; where retention
// left each chain beginning in the store (nil: none trimmed); and the
// chain heads the store keeps, read before the records (nil: none read),
// which each chain must reach.
// A shared store holding records outside every chain it lists
// (audit.CheckStray) is an error matching audit.ErrBroken: what is read
// without them would be a part of the log.
func storeRecords(ctx context.Context, s engine.Store, archive string) (iter.Seq2[engine.AuditRecord, error], map[string]engine.AuditHead, map[string]engine.AuditHead, error) {
	if cs := s.Capabilities().Chains; cs != nil {
		if err := audit.CheckStray(ctx, cs); err != nil {
			return nil, nil, nil, fmt.Errorf("%w; a lineage read without them would be a part of one", err)
		}
		bases, err := trimmedChains(ctx, s) // before the chains: a base only moves up
		if err != nil {
			return nil, nil, nil, err
		}
		recs, heads, err := report.Chains(ctx, cs, archiveReader(archive))
		return recs, bases, heads, err
	}
	var bases map[string]engine.AuditHead
	if tr := s.Capabilities().Trim; tr != nil {
		base, err := tr.AuditBase(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		bases = map[string]engine.AuditHead{"": base} // 0: never trimmed, a hole is the store's
	}
	head, err := auditHead(ctx, s)
	if err != nil {
		return nil, nil, nil, err
	}
	return report.Records(ctx, s, archiveReader(archive)), bases, map[string]engine.AuditHead{"": head}, nil
}

// StoreLineages reads the lineages of opts.Entities from s and the
// archive dir ("": none): what the daemon's API serves.
func StoreLineages(ctx context.Context, s engine.Store, archive string, opts report.LineageOptions) ([]*report.Lineage, error) {
	recs, bases, heads, err := storeRecords(ctx, s, archive)
	if err != nil {
		return nil, err
	}
	opts.Bases, opts.Heads = bases, heads
	return report.Lineages(recs, opts)
}

// WriteLineage prints a lineage as text: each change with its effects and
// the deliveries of its key beside it, then the entity's state.
func WriteLineage(w io.Writer, l *report.Lineage) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", shown(l.Entity), counted(len(l.Changes), "change", "changes"))
	if l.Field != "" {
		fmt.Fprintf(&b, " to %s", shown(l.Field))
	}
	fmt.Fprintf(&b, ", %s suppressed", counted(l.Suppressed, "replay", "replays"))
	if l.Twins > 0 {
		fmt.Fprintf(&b, ", %s from the other path", counted(l.Twins, "twin", "twins"))
	}
	if l.At != nil {
		fmt.Fprintf(&b, ", up to %s", l.At.Format(time.RFC3339Nano))
	}
	b.WriteString("\n")
	for _, c := range l.Changes {
		fmt.Fprintf(&b, "\n%s  %s  %s", c.Where(), c.Time.UTC().Format(time.RFC3339Nano), c.Outcome)
		if c.Reason != "" {
			fmt.Fprintf(&b, " (%s)", shown(c.Reason))
		}
		if c.Operator != "" {
			fmt.Fprintf(&b, " by %s", shown(c.Operator))
		}
		fmt.Fprintf(&b, "\n    route %s  topic %s", c.Route, shown(c.Topic))
		if len(c.Source) > 0 {
			fmt.Fprintf(&b, "  source %s", shownAll(c.Source, "/"))
		}
		if c.Epoch != "" {
			fmt.Fprintf(&b, "  epoch %s", shown(c.Epoch))
		}
		if c.Sequence != nil {
			fmt.Fprintf(&b, "  sequence %d", *c.Sequence)
		}
		if c.ID != "" {
			fmt.Fprintf(&b, "  id %s", shown(c.ID))
		}
		if c.Broker != "" {
			fmt.Fprintf(&b, "  broker %s", c.Broker)
		}
		if c.Feed != "" {
			fmt.Fprintf(&b, "  feed %s", c.Feed)
		}
		if c.Key != "" {
			fmt.Fprintf(&b, "\n    key %s", c.Key)
		}
		for _, e := range c.Effects {
			fmt.Fprintf(&b, "\n    %s %s %s -> %s", shown(e.Field), e.Op, shownJSON(e.Value), shownJSON(e.After))
			if e.Lost {
				b.WriteString("  (older than the field's value: it stays)")
			}
			if e.Historical {
				b.WriteString("  (historical, not the current value: the field stays)")
			}
		}
		for _, d := range c.Suppressed {
			fmt.Fprintf(&b, "\n    suppressed %s  %s  %s%s%s", d.Where(), d.Time.UTC().Format(time.RFC3339Nano), brokerText(d.Broker), feedText(d.Feed), dupText(d.Dup))
		}
		for _, d := range c.Held {
			fmt.Fprintf(&b, "\n    %s %s  %s", d.Outcome, d.Where(), d.Time.UTC().Format(time.RFC3339Nano))
			if d.Ref == 0 { // a delivery: which path brought it (an operator's decision has the held message's)
				fmt.Fprintf(&b, "  %s%s%s", brokerText(d.Broker), feedText(d.Feed), dupText(d.Dup))
			}
			if d.Reason != "" {
				fmt.Fprintf(&b, "  (%s)", shown(d.Reason))
			}
			if d.Operator != "" {
				fmt.Fprintf(&b, " by %s", shown(d.Operator))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\nstate")
	if l.At != nil {
		b.WriteString(" at " + l.At.Format(time.RFC3339Nano))
	}
	b.WriteString(":")
	for _, f := range slices.Sorted(maps.Keys(l.State)) {
		fmt.Fprintf(&b, " %s %s", shown(f), shownJSON(l.State[f]))
	}
	b.WriteString("\n")
	if n := l.Read.WithoutEffects; n > 0 {
		fmt.Fprintf(&b, "note: %d of the %s read %s nothing of what %s changed (written before records did, or of a route that changes no entity); any change of %s is not listed\n",
			n, counted(l.Read.Records, "record", "records"), plural(n, "is an applied decision that says", "are applied decisions that say"), plural(n, "it", "they"), plural(n, "its", "theirs"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func brokerText(b string) string {
	if b == "" {
		return "broker -"
	}
	return "broker " + b
}

func feedText(feed string) string {
	if feed == "" {
		return ""
	}
	return "  feed " + feed
}

func dupText(dup bool) string {
	if dup {
		return "  DUP"
	}
	return ""
}
