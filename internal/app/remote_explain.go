package app

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/web"
)

// explainTimeout bounds each request for a lineage the running process
// reads: it reads its whole log, which takes longer than a page of it.
const explainTimeout = 10 * time.Minute

// errNoExplain is a running process that serves no lineage (a build
// before GET /api/v1/explain).
var errNoExplain = errors.New("the API serves no lineage")

// errUnchanged is an entity no decision changed, in the running process's
// words (those of explainNone).
type errUnchanged struct{ entity, msg string }

func (e *errUnchanged) Error() string { return e.msg }

// lineages asks the running process for the lineage of each entity opts
// names, at opts.At and of opts.Field, read from its store and its
// audit.archive; each trimmed to opts.Keep changes when that is set.
func (r *remote) lineages(opts report.LineageOptions) ([]*report.Lineage, error) {
	q := url.Values{}
	if opts.Field != "" {
		q.Set("field", opts.Field)
	}
	if !opts.At.IsZero() {
		q.Set("at", opts.At.UTC().Format(time.RFC3339Nano))
	}
	long := *r
	client := *r.client
	client.Timeout = explainTimeout
	long.client = &client
	var ls []*report.Lineage
	for _, entity := range opts.Entities {
		path := "/api/v1/explain/" + url.PathEscape(entity) // its slashes too: never cleaned into another entity's path
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		var l report.Lineage
		if err := long.do("GET", path, nil, &l); err != nil {
			return nil, explainError(entity, err)
		}
		if opts.Keep > 0 {
			l.Trim(opts.Keep)
		}
		ls = append(ls, &l)
	}
	return ls, nil
}

// explainError is what an error of GET /api/v1/explain means here.
func explainError(entity string, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err
	}
	none := web.ErrNoLineage.Error() + ": "
	switch {
	case ae.status == http.StatusNotFound && strings.HasPrefix(ae.msg, none):
		return &errUnchanged{entity, strings.TrimPrefix(ae.msg, none)}
	case ae.status == http.StatusNotFound:
		return errNoExplain
	}
	for _, sentinel := range []error{report.ErrChainTrimmed, report.ErrChainBroken} {
		if strings.Contains(ae.msg, sentinel.Error()) {
			return fmt.Errorf("%w (%v)", sentinel, err)
		}
	}
	return err
}

// records is the running process's whole audit log, read page by page
// through its API, after what the archive dir ("": none) holds.
func (r *remote) records(ctx context.Context, archive string) iter.Seq2[engine.AuditRecord, error] {
	return report.Scanned(report.WithArchive(ctx, "", archiveReader(archive),
		func(fn func(engine.AuditRecord) error) error { return r.audit(1, fn) }))
}
