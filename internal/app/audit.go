package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
)

// AuditExport writes the audit log from position from on, one JSON record
// a line: every member's chain of a shared store, a single-owner store's
// log, or the log of the running process that holds the store. A shared
// store holding records outside every chain it lists is an error, after
// the chains it lists are written.
func (t *Tool) AuditExport(ctx context.Context, from uint64) error {
	a, err := t.openRead(ctx)
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		enc := json.NewEncoder(t.Out)
		return r.audit(from, func(rec engine.AuditRecord) error { return enc.Encode(rec) })
	}
	defer a.Close()
	if cs := a.Store.Capabilities().Chains; cs != nil { // a group: every member's chain
		if _, err = audit.ExportChains(ctx, cs, from, t.Out); err != nil {
			return err
		}
		// Records outside every chain the store lists are read by no
		// chain: the export says it lacks them, as audit verify does.
		if err := audit.CheckStray(ctx, cs); err != nil {
			return fmt.Errorf("%w; its records are not in the export", err)
		}
		return nil
	}
	_, err = audit.Export(ctx, a.Store, from, t.Out)
	return err
}

// AuditVerifyOptions say what AuditVerify checks besides the store.
type AuditVerifyOptions struct {
	// File is an exported JSONL file to verify instead of the store.
	File string
	// Archive is the audit archive directory, verified with the store as
	// one chain (on a shared store: each member's part of it with that
	// member's chain).
	Archive string
	// Store, with File, compares where each chain of the file ends with
	// the chain head of the configured store: only the store can tell a
	// file cut short between two records from a whole one. Without it
	// the result says what the file cannot vouch for.
	Store bool
}

// AuditVerify checks the audit log's hash chain and prints how much it
// verified; the error names the first record that breaks the chain. On a
// shared store it checks every member's chain and compares each with its
// witness, the member's journal on this machine.
func (t *Tool) AuditVerify(ctx context.Context, opts AuditVerifyOptions) error {
	if opts.File != "" {
		return t.verifyFile(ctx, opts.File, opts.Store)
	}
	if opts.Archive != "" { // named: it must be there, else every archived position reads as missing
		if _, err := os.Stat(opts.Archive); err != nil {
			return fmt.Errorf("--archive: %w", err)
		}
	}
	a, err := t.openRead(ctx)
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		return t.verifyRemote(ctx, r, opts.Archive)
	}
	defer a.Close()
	if cs := a.Store.Capabilities().Chains; cs != nil {
		return t.verifyChains(ctx, cs, chainBases(a.Store), opts.Archive)
	}
	head, err := a.AuditHead(ctx)
	if err != nil {
		return err
	}
	if opts.Archive != "" {
		return t.verifyWithArchive(ctx, a.Store, opts.Archive, head)
	}
	return t.verifyStore(ctx, a.Store, head)
}

// verifyWithArchive verifies the archive and the store up to head as one
// chain.
func (t *Tool) verifyWithArchive(ctx context.Context, st Store, archive string, head engine.AuditHead) error {
	v, err := audit.VerifyWithArchive(ctx, archive, st, head)
	if err != nil {
		return fmt.Errorf("%w (%d archived and %d stored records verified before it)", err, v.Archive.Records, v.Stored)
	}
	t.printArchived(v.Archive)
	if v.Base.Position < head.Position {
		fmt.Fprintf(t.Out, "store: positions %d..%d intact\n", v.Base.Position+1, head.Position)
	} else {
		fmt.Fprintln(t.Out, "store: nothing after the archive")
	}
	fmt.Fprintf(t.Out, "audit chain intact: %s, archive and store as one chain\n", counted(head.Position, "record", "records"))
	return nil
}

// verifyStore verifies a single-owner store's log up to head, from its
// base when retention archived the oldest records.
func (t *Tool) verifyStore(ctx context.Context, st Store, head engine.AuditHead) error {
	var base engine.AuditHead
	if tr := st.Capabilities().Trim; tr != nil {
		var err error
		if base, err = tr.AuditBase(ctx); err != nil {
			return err
		}
	}
	n, err := audit.VerifyFrom(ctx, st, base, head)
	if err != nil {
		return fmt.Errorf("%w (%s verified before it)", err, counted(n, "record", "records"))
	}
	switch {
	case base.Position > 0 && n == 0: // the same words as a shared store's chain
		fmt.Fprintf(t.Out, "audit chain intact: all its records, 1..%d, were archived by retention: add --archive DIR to verify them\n", base.Position)
		return nil
	case base.Position > 0:
		fmt.Fprintf(t.Out, "audit chain intact from the store's base: %s, positions %d..%d (1..%d were archived by retention: add --archive DIR to verify them too)\n",
			counted(n, "record", "records"), base.Position+1, head.Position, base.Position)
		return nil
	}
	fmt.Fprintf(t.Out, "audit chain intact: %s\n", counted(n, "record", "records"))
	return nil
}

func (t *Tool) printArchived(ar audit.ArchiveResult) { printArchived(t.Out, ar) }

func printArchived(out io.Writer, ar audit.ArchiveResult) {
	if ar.Segments == 0 {
		fmt.Fprintln(out, "archive: no segments")
		return
	}
	fmt.Fprintf(out, "archive: %s, positions 1..%d intact\n", counted(ar.Segments, "segment", "segments"), ar.Head.Position)
}

// verifyRemote verifies through the HTTP API of the process that holds
// the store: after the archive when one is named, else from the first
// record the store still holds. The process's audit retention may move
// records to the archive while the log is read page by page: a break
// found while the store's first record moved is read again (twice at
// most), as audit.VerifyChains does a running group's chain.
func (t *Tool) verifyRemote(ctx context.Context, r *remote, archive string) error {
	for again := 0; ; again++ {
		first, err := r.firstStored()
		if err != nil {
			return err
		}
		var out bytes.Buffer
		err = t.verifyRemoteOnce(ctx, r, archive, &out)
		if err == nil || again == 2 {
			io.Copy(t.Out, &out)
			return err
		}
		if now, ferr := r.firstStored(); ferr != nil || now == first {
			io.Copy(t.Out, &out)
			return err
		}
	}
}

// verifyRemoteOnce is one reading of verifyRemote, printed to out.
func (t *Tool) verifyRemoteOnce(ctx context.Context, r *remote, archive string, out io.Writer) error {
	var v *audit.Verifier
	from := uint64(1)
	if archive != "" {
		av, ar, err := audit.VerifyArchive(ctx, archive, "")
		if err != nil {
			return fmt.Errorf("%w (%s verified before it)", err, counted(ar.Records, "archived record", "archived records"))
		}
		printArchived(out, ar)
		v, from = av, ar.Head.Position+1
	}
	// The head the process committed, read first: the log must reach it
	// (a removed tail is caught), and records it commits meanwhile are
	// past it.
	h, hashed, base, err := r.head()
	if err != nil {
		return err
	}
	if v == nil && base != nil { // the store says where its log begins: the first record must link to it
		v = audit.NewStoreVerifier(*base, "")
	}
	head := h.Position
	pastHead := errors.New("past the head")
	first := uint64(0)
	err = r.audit(from, func(rec engine.AuditRecord) error {
		if rec.Position > head {
			return pastHead
		}
		if v == nil { // the store's first record, from a build that does not say its base: its prev is the base
			base := engine.AuditHead{Position: rec.Position - 1, Hash: rec.Prev}
			if rec.Position == 1 {
				base.Hash = engine.Hash{} // the chain's first record follows nothing
			}
			v = audit.NewVerifierFrom(base, "")
		}
		if first == 0 {
			first = rec.Position
		}
		return v.Check(rec)
	})
	if errors.Is(err, pastHead) {
		err = nil
	}
	n, last := uint64(0), from-1
	if v != nil {
		n, last = v.Count(), v.Head().Position
	}
	switch {
	case err != nil:
	case hashed && v != nil:
		err = v.CheckHead(h)
	case last != head:
		err = &audit.BrokenError{Position: last + 1, Reason: fmt.Sprintf("log ends at position %d but the chain head is at %d", last, head)}
	}
	if err != nil {
		return fmt.Errorf("%w (%s verified before it)", err, counted(n, "record", "records"))
	}
	// The same words as a store read directly (verifyStore, verifyWithArchive).
	switch {
	case archive != "":
		if first > 0 {
			fmt.Fprintf(out, "store: positions %d..%d intact\n", first, last)
		} else {
			fmt.Fprintln(out, "store: nothing after the archive")
		}
		fmt.Fprintf(out, "audit chain intact: %s, archive and store as one chain\n", counted(last, "record", "records"))
	case first == 0 && last > 0: // the same words as a shared store's chain read directly
		fmt.Fprintf(out, "audit chain intact: all its records, 1..%d, were archived by retention: add --archive DIR to verify them\n", last)
	case first > 1:
		fmt.Fprintf(out, "audit chain intact from the store's base: %s, positions %d..%d (1..%d were archived by retention: add --archive DIR to verify them too)\n",
			counted(n, "record", "records"), first, last, first-1)
	default:
		fmt.Fprintf(out, "audit chain intact: %s\n", counted(n, "record", "records"))
	}
	return nil
}

// verifyChains checks every member's chain of a shared store, each from
// its base, or with archive each member's archive and stored chain as one
// chain, printing one line per chain; then each chain against its witness.
func (t *Tool) verifyChains(ctx context.Context, cs engine.ChainScanner, bases audit.ChainBases, archive string) error {
	var members int
	var total uint64
	var err error
	if archive != "" {
		members, total, err = t.verifyChainArchives(ctx, cs, bases, archive)
	} else {
		members, total, err = t.verifyStoredChains(ctx, cs, bases)
	}
	if err != nil {
		return err
	}
	behind, err := chainsBehind(ctx, t.Config.Store, cs, bases)
	if err != nil {
		return err
	}
	for _, b := range behind {
		fmt.Fprintf(t.Out, "member %s: %s\n", b.member, b.what)
	}
	if len(behind) > 0 {
		return fmt.Errorf("%d of %s behind their witness: the store lost commits the members made and acknowledged", len(behind), counted(members, "member chain is", "member chains are"))
	}
	if archive != "" {
		fmt.Fprintf(t.Out, "audit chains intact: %s, %s, archive and store as one chain each\n", counted(members, "member", "members"), counted(total, "record", "records"))
		return nil
	}
	fmt.Fprintf(t.Out, "audit chains intact: %s, %s\n", counted(members, "member", "members"), counted(total, "record", "records"))
	return nil
}

// verifyStoredChains verifies what the store holds of every member's
// chain, printing a line per chain, and returns how many chains and
// records it verified.
func (t *Tool) verifyStoredChains(ctx context.Context, cs engine.ChainScanner, bases audit.ChainBases) (int, uint64, error) {
	res, err := audit.VerifyChains(ctx, cs, bases)
	total := uint64(0)
	for i, r := range res {
		total += r.Records
		switch {
		case err != nil && i == len(res)-1:
		case r.Base.Position > 0 && r.Records == 0:
			fmt.Fprintf(t.Out, "member %s: audit chain intact: all its records, 1..%d, were archived by retention: add --archive DIR to verify them\n",
				r.Member, r.Base.Position)
		case r.Base.Position > 0:
			fmt.Fprintf(t.Out, "member %s: audit chain intact from the store's base: %s, positions %d..%d (1..%d were archived by retention: add --archive DIR to verify them too)\n",
				r.Member, counted(r.Records, "record", "records"), r.Base.Position+1, r.Head.Position, r.Base.Position)
		default:
			fmt.Fprintf(t.Out, "member %s: audit chain intact: %s\n", r.Member, counted(r.Records, "record", "records"))
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%w (%s verified before it)", err, counted(total, "record", "records"))
	}
	return len(res), total, nil
}

// verifyChainArchives verifies each member's archive and stored chain as
// one chain, printing a line per chain, and returns how many chains and
// records (archived and stored) it verified.
func (t *Tool) verifyChainArchives(ctx context.Context, cs engine.ChainScanner, bases audit.ChainBases, archive string) (int, uint64, error) {
	res, err := audit.VerifyChainsWithArchive(ctx, archive, cs, bases)
	total := uint64(0)
	for i, r := range res {
		if err != nil && i == len(res)-1 {
			return 0, 0, fmt.Errorf("%w (%d archived and %d stored records of member %s verified before it)", err, r.Archive.Records, r.Stored, r.Member)
		}
		segments := "no segments"
		if r.Archive.Segments > 0 {
			segments = fmt.Sprintf("%s, positions 1..%d intact", counted(r.Archive.Segments, "segment", "segments"), r.Archive.Head.Position)
		}
		stored := fmt.Sprintf("positions %d..%d intact", r.Base.Position+1, r.Head.Position)
		if r.Stored == 0 {
			stored = "nothing after the archive"
		}
		fmt.Fprintf(t.Out, "member %s: archive: %s; store: %s; %s as one chain\n", r.Member, segments, stored, counted(r.Head.Position, "record", "records"))
		total += r.Head.Position
	}
	if err != nil {
		return 0, 0, err
	}
	return len(res), total, nil
}
