package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
)

// newSinks builds the audit sinks audit.sinks configures over st; nil when
// there are none. On a shared store they stream the members' chains that
// member's process claims (see chains), with a cursor per chain in the
// store.
func newSinks(ctx context.Context, cfg *config.Config, st Store, member string, a *App) (*sink.Set, error) {
	if len(cfg.Audit.Sinks) == 0 {
		return nil, nil
	}
	g, shared := groupOf(st)
	ss, single := st.(sink.Store)
	if !shared && (!single || st.Capabilities().Shared != nil) {
		return nil, fmt.Errorf("audit.sinks: the %s store cannot keep the sinks' cursors", cfg.Store.Kind)
	}
	opts := sink.Options{Logger: a.Log}
	for i, sc := range cfg.Audit.Sinks {
		exp, err := newExporter(ctx, sc, a.Log)
		if err == nil && sc.Kind == config.SinkFile {
			// Refused at start, like a TLS file it cannot read: a sink
			// that could never write would leave every record behind its
			// cursor while run reports ready.
			if err = sink.CheckFile(sc.Path); err != nil {
				exp.Close(ctx)
				for _, k := range opts.Sinks {
					k.Exporter.Close(ctx)
				}
				return nil, fmt.Errorf("audit.sinks[%d] (%s).path: %w", i, sc.Name, err)
			}
		}
		if err != nil {
			for _, k := range opts.Sinks {
				k.Exporter.Close(ctx)
			}
			return nil, fmt.Errorf("audit.sinks[%d] (%s): %w", i, sc.Name, err)
		}
		opts.Sinks = append(opts.Sinks, sink.Sink{Name: sc.Name, Exporter: exp})
	}
	if shared {
		opts.Member = member
		return sink.NewChains(g, opts)
	}
	return sink.New(ss, opts)
}

func newExporter(ctx context.Context, sc config.SinkConfig, log *slog.Logger) (sink.Exporter, error) {
	tlsCfg, err := clientTLS(sc.TLS)
	if err != nil {
		return nil, err
	}
	switch sc.Kind {
	case config.SinkOTLP:
		return sink.NewOTLP(ctx, sink.OTLPOptions{Endpoint: sc.Endpoint, Headers: sc.Headers, Timeout: time.Duration(sc.Timeout),
			TLS: tlsCfg, Logger: log.With("sink", sc.Name)})
	case config.SinkSyslog:
		return sink.NewSyslog(sink.SyslogOptions{Address: sc.Address, AppName: sc.AppName,
			Facility: config.SyslogFacilities[sc.Facility], TLS: tlsCfg, MaxMessage: int(sc.MaxMessage),
			Logger: log.With("sink", sc.Name)}), nil
	case config.SinkFile:
		return sink.NewFile(sink.FileOptions{Path: sc.Path, MaxBytes: int64(sc.MaxBytes), Keep: sc.Keep}), nil
	}
	return nil, fmt.Errorf("kind %q is not one of otlp, syslog, file", sc.Kind)
}

// retainHead is the head audit retention counts a single-owner store's
// log back from (audit.retention.max_records): the committed head.
func (a *App) retainHead(context.Context) (uint64, error) { return a.Engine.Stats().Position, nil }

// retainCursors are the cursors audit retention holds a single-owner
// store's log back to, by sink: each configured sink's, and every cursor
// the store keeps (sinkCursorsOf), so a record leaves the store only once
// every sink delivered it, those the configuration no longer names
// included, until an operator forgets them. (A shared store's chains:
// chains.trimCursors.)
func (a *App) retainCursors(ctx context.Context, head uint64) (map[string]uint64, error) {
	cursors := map[string]uint64{}
	var configured []string
	if a.Sinks != nil {
		for _, st := range a.Sinks.Status() {
			// Until the sink read its cursor (its first delivery), the
			// store's says how far it delivered: 0 only if it keeps none.
			if st.CursorRead {
				cursors[st.Name] = st.Cursor
			}
			configured = append(configured, st.Name)
		}
	}
	cs := a.Store.Capabilities().Cursors
	if cs == nil { // it keeps none: no sink is configured (newSinks)
		return cursors, nil
	}
	stored, err := cs.Cursors(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the audit sinks' cursors: %w", err)
	}
	cursors = sinkCursorsOf(a.Log, head, "", cursors, stored, configured)
	for _, name := range configured {
		if _, ok := cursors[name]; !ok {
			cursors[name] = 0 // neither read nor stored: it delivered nothing yet
		}
	}
	return cursors, nil
}

// sinkCursorsOf returns cursors, the configured sinks' cursors on chain
// ("" for a single-owner store's log), each held back to the cursor the
// store keeps of it, with the stored cursors of the sinks not configured,
// and warns for each of those below head: a sink removed from this
// configuration (or, on a shared store, configured on other members only)
// keeps the records it has not delivered until it is configured again and
// catches up, or an operator forgets it (`replayguard audit forget-sink`).
func sinkCursorsOf(log *slog.Logger, head uint64, chain string, cursors, stored map[string]uint64, configured []string) map[string]uint64 {
	for _, name := range slices.Sorted(maps.Keys(stored)) {
		c := stored[name]
		if have, ok := cursors[name]; ok && have <= c {
			continue
		}
		cursors[name] = c
		if c >= head || slices.Contains(configured, name) {
			continue
		}
		attrs := []any{"sink", name, "cursor", c}
		if chain != "" {
			attrs = append(attrs, "chain", chain)
		}
		log.Warn("audit retention: held back by the stored cursor of a sink this configuration does not name; "+
			"configure the sink, or, gone for good, remove it from every member's audit.sinks and run "+
			"`replayguard audit forget-sink "+name+" --reason TEXT`", attrs...)
	}
	return cursors
}

// FlushSinksUntilIdle delivers what the audit sinks can for as long as
// they make progress: it gives up once none delivered a record for idle,
// and says what is left to their cursors.
func (a *App) FlushSinksUntilIdle(ctx context.Context, idle time.Duration) error {
	if a.Sinks == nil {
		return nil
	}
	return a.Sinks.FlushUntilIdle(ctx, idle)
}

var _ engine.Observer = (*sink.Set)(nil)
