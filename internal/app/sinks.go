package app

import (
	"context"
	"fmt"
	"log/slog"
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

// auditHead is the position audit retention may trim a single-owner
// store's log up to: the committed head, held back to the lowest sink
// cursor, so a record leaves the store only once every sink delivered it.
// (A shared store's chains: chains.trimHead.)
func (a *App) auditHead() uint64 {
	pos := a.Engine.Stats().Position
	if a.Sinks != nil {
		for _, st := range a.Sinks.Status() {
			pos = min(pos, st.Cursor)
		}
	}
	return pos
}

// FlushSinks delivers what the audit sinks can within timeout, and says
// what is left to their cursors (the next run or ingest delivers it).
func (a *App) FlushSinks(ctx context.Context, timeout time.Duration) error {
	if a.Sinks == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return a.Sinks.Flush(ctx)
}

var _ engine.Observer = (*sink.Set)(nil)
