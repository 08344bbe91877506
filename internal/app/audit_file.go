package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
)

// verifyFile verifies an exported file's chains and, with store, compares
// where each ends with the store's chain head: a file cut short between
// two records verifies as a whole one does, so a file's end is vouched
// for only by the store. Without the store, or when it cannot be read,
// the result says so and names where each chain ends in the file.
func (t *Tool) verifyFile(ctx context.Context, path string, store bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, chains, err := audit.VerifyJSONLFile(f)
	if errors.Is(err, audit.ErrNotExport) {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err != nil {
		return fmt.Errorf("%w (%s verified before it)", err, counted(n, "record", "records"))
	}
	var ends *storeEnds
	var unread error
	if store {
		if ends, unread = t.readStoreEnds(ctx); unread != nil && errors.Is(unread, context.Canceled) {
			return unread
		}
	}
	var notes []string
	switch {
	case ends != nil:
		if notes, err = ends.compare(chains); err != nil {
			return fmt.Errorf("%w (%s verified in the file)", err, counted(n, "record", "records"))
		}
	default:
		notes = fileEndsUnchecked(chains, unread)
	}
	if len(notes) == 0 {
		fmt.Fprintf(t.Out, "audit chain intact: %s\n", counted(n, "record", "records"))
	} else {
		fmt.Fprintf(t.Out, "audit chain intact as far as the file goes: %s\n", counted(n, "record", "records"))
	}
	for _, c := range chains {
		if c.First > 1 {
			fmt.Fprintf(t.Out, "%s begins at position %d in the file: positions 1..%d are not in it (archived by retention, or exported from a later position) and are not verified\n",
				chainName(c.Member), c.First, c.First-1)
		}
	}
	for _, s := range notes {
		fmt.Fprintln(t.Out, s)
	}
	return nil
}

// chainName is "the chain", or "member M's chain" on a shared store.
func chainName(member string) string {
	if member == "" {
		return "the chain"
	}
	return fmt.Sprintf("member %s's chain", member)
}

// fileEndsUnchecked says where each chain ends in the file, which nothing
// compared with a store.
func fileEndsUnchecked(chains []audit.FileChain, unread error) []string {
	why := "no configuration was given"
	if unread != nil {
		why = fmt.Sprintf("the store could not be read (%v)", unread)
	}
	notes := make([]string, 0, len(chains)+1)
	for _, c := range chains {
		notes = append(notes, fmt.Sprintf("%s ends at position %d in the file (hash %s)", chainName(c.Member), c.Last.Position, c.Last.Hash))
	}
	return append(notes, fmt.Sprintf("the end is not verified: %s, and a file cut short between two records reads as a whole one; give the configuration of the store it was exported from (--config) to compare each end with the store's chain head", why))
}

// storeEnds is the store's chain heads, by member ("" for a single-owner
// store), and how to read the hash of a chain's record at a position.
type storeEnds struct {
	heads map[string]engine.AuditHead
	order []string // the members, in the store's order
	held  func(member string, position uint64) (engine.Hash, bool, error)
	done  func()
	stray string // the records the store holds outside every chain it lists, when it holds any
}

// strayNote says which records a shared store holds outside every chain
// it lists, when it can find them (audit.StrayFinder): no export holds
// them, and audit verify reports them as a break.
func strayNote(ctx context.Context, cs engine.ChainScanner) (string, error) {
	f, ok := cs.(audit.StrayFinder)
	if !ok {
		return "", nil
	}
	member, last, head, err := f.StrayAudit(ctx)
	if err != nil || last == 0 {
		return "", err
	}
	return fmt.Sprintf("the store holds records of member %s's chain up to position %d, past the chain head it keeps (%d): no export holds them, and audit verify reports them as a break", member, last, head), nil
}

// readStoreEnds reads the configured store's chain heads: the store read
// directly, or the API of the running process that holds it.
func (t *Tool) readStoreEnds(ctx context.Context) (*storeEnds, error) {
	a, err := t.openRead(ctx)
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return nil, rerr
		}
		return remoteEnds(r)
	}
	e := &storeEnds{heads: map[string]engine.AuditHead{}, done: func() { a.Close() }}
	if cs := a.Store.Capabilities().Chains; cs != nil {
		chains, err := cs.Chains(ctx)
		if err != nil {
			a.Close()
			return nil, err
		}
		for _, c := range chains {
			e.heads[c.Member] = c.Head
			e.order = append(e.order, c.Member)
		}
		if e.stray, err = strayNote(ctx, cs); err != nil {
			a.Close()
			return nil, err
		}
		e.held = func(member string, pos uint64) (engine.Hash, bool, error) {
			return recordAt(pos, func(fn func(engine.AuditRecord) error) error { return cs.ScanChain(ctx, member, pos, fn) })
		}
		return e, nil
	}
	head, err := a.AuditHead(ctx)
	if err != nil {
		a.Close()
		return nil, err
	}
	e.heads[""], e.order = head, []string{""}
	e.held = func(_ string, pos uint64) (engine.Hash, bool, error) {
		return recordAt(pos, func(fn func(engine.AuditRecord) error) error { return a.Store.ScanAudit(ctx, pos, fn) })
	}
	return e, nil
}

// remoteEnds is storeEnds through the API of the process holding a
// single-owner store.
func remoteEnds(r *remote) (*storeEnds, error) {
	head, _, _, err := r.head()
	if err != nil {
		return nil, err
	}
	held := func(_ string, pos uint64) (engine.Hash, bool, error) {
		var page struct {
			Records []engine.AuditRecord `json:"records"`
		}
		if err := r.do("GET", fmt.Sprintf("/api/v1/audit?from=%s&limit=1", url.QueryEscape(fmt.Sprint(pos))), nil, &page); err != nil {
			return engine.Hash{}, false, fmt.Errorf("read the audit record at position %d: %w", pos, err)
		}
		if len(page.Records) == 0 || page.Records[0].Position != pos {
			return engine.Hash{}, false, nil
		}
		return page.Records[0].Hash, true, nil
	}
	return &storeEnds{heads: map[string]engine.AuditHead{"": head}, order: []string{""}, held: held, done: func() {}}, nil
}

// errFound stops a scan at the record it looked for.
var errFound = errors.New("found")

// recordAt is the hash of the record at pos that scan (from pos) meets
// first; false when the store no longer holds it.
func recordAt(pos uint64, scan func(func(engine.AuditRecord) error) error) (engine.Hash, bool, error) {
	var h engine.Hash
	ok := false
	err := scan(func(r engine.AuditRecord) error {
		h, ok = r.Hash, r.Position == pos
		return errFound
	})
	if err != nil && !errors.Is(err, errFound) {
		return h, false, err
	}
	return h, ok, nil
}

// compare checks each chain's end in the file against the store's head
// and returns what the file lacks of the store: the records after a
// chain's end (cut short, or exported before they were written), and the
// chains it does not hold at all. A chain the store does not hold, or
// whose record at the file's end is another, is a break.
func (e *storeEnds) compare(chains []audit.FileChain) ([]string, error) {
	defer e.done()
	var notes []string
	inFile := map[string]bool{}
	for _, c := range chains {
		inFile[c.Member] = true
		head, ok := e.heads[c.Member]
		if !ok {
			return nil, &audit.BrokenError{Position: c.First, Member: c.Member,
				Reason: "the store holds no such chain: the file is of another store, or the chain was removed from this one"}
		}
		compared, err := audit.FileEnd(c, head, func(pos uint64) (engine.Hash, bool, error) { return e.held(c.Member, pos) })
		if err != nil {
			return nil, err
		}
		if head.Position == c.Last.Position {
			continue
		}
		note := fmt.Sprintf("%s ends at position %d in the file, but the store's chain head is at %d: positions %d..%d are not in the file (it was cut short, or exported before they were written) and are not verified",
			chainName(c.Member), c.Last.Position, head.Position, c.Last.Position+1, head.Position)
		if !compared {
			note += fmt.Sprintf("; the store no longer holds position %d (archived by retention), so the file's last record is not compared with it", c.Last.Position)
		}
		notes = append(notes, note)
	}
	for _, m := range e.order {
		if h := e.heads[m]; !inFile[m] && h.Position > 0 {
			notes = append(notes, fmt.Sprintf("%s, positions up to %d in the store, is not in the file and is not verified", chainName(m), h.Position))
		}
	}
	if e.stray != "" {
		notes = append(notes, e.stray)
	}
	return notes, nil
}
