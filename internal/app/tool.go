package app

import (
	"context"
	"io"
	"log/slog"

	"github.com/replayguard/replayguard/config"
)

// Tool runs the one-shot commands on a configuration: it reads and reviews
// a store (State, Sources, AuditExport, AuditVerify, QuarantineList,
// OutboxList, Report), decides on it (QuarantineResolve, OutboxResolve,
// AcceptLoss, Ingest), and, when a running `replayguard run` holds the
// store, does the same through that process's HTTP API.
//
// Each method opens the store, does one thing, writes what it found to Out
// (notes and totals to Err) and closes the store before it returns. An
// error wrapping ErrUsage is a mistake on the command line. A Tool is used
// by one goroutine at a time.
type Tool struct {
	Config *config.Config
	Log    *slog.Logger // default: discard
	Out    io.Writer    // the command's result
	Err    io.Writer    // notes, progress and totals; default: discard

	// TokenName is the http.tokens entry whose token to send to a running
	// process's API (--token-name); Token is the token to send when no
	// entry is named ($REPLAYGUARD_TOKEN). With neither, the single
	// configured token is sent, or none when there are several.
	TokenName string
	Token     string
}

// openRead opens the store read-only.
func (t *Tool) openRead(ctx context.Context) (*App, error) {
	return Open(ctx, t.Config, Options{ReadOnly: true, Logger: t.Log})
}

// open opens the store with an engine that writes as command's member on
// a shared store (see MemberFor).
func (t *Tool) open(ctx context.Context, command string) (*App, error) {
	return Open(ctx, t.Config, Options{Logger: t.Log, Member: MemberFor(command)})
}

func (t *Tool) logger() *slog.Logger {
	if t.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Log
}

func (t *Tool) errOut() io.Writer {
	if t.Err == nil {
		return io.Discard
	}
	return t.Err
}

// ofMember names member in a message, or nothing for a single-owner store.
func ofMember(m string) string {
	if m == "" {
		return ""
	}
	return " of member " + m
}
