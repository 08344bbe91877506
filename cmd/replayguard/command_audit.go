package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/journal"
)

func auditFlags(fs *flag.FlagSet) {
	fs.String("from", "1", "export: first position")
	fs.String("file", "", "verify: an exported JSONL file instead of the store")
	fs.String("archive", "", "verify: the audit archive directory too, with the store as one chain")
}

func cmdAudit(e *env) error {
	if len(e.args) != 1 {
		return fmt.Errorf("%w: audit takes export or verify", errUsage)
	}
	switch e.args[0] {
	case "export":
		from, err := strconv.ParseUint(e.flagString("from"), 10, 64)
		if err != nil || from == 0 {
			return fmt.Errorf("%w: --from wants a position >= 1", errUsage)
		}
		a, err := openRead(e)
		if err != nil {
			r, rerr := e.remoteFor(err)
			if rerr != nil {
				return rerr
			}
			enc := json.NewEncoder(e.stdout)
			return r.audit(from, func(rec engine.AuditRecord) error { return enc.Encode(rec) })
		}
		defer a.Close()
		if cs := a.Store.Capabilities().Chains; cs != nil { // a group: every member's chain
			_, err = audit.ExportChains(e.ctx, cs, from, e.stdout)
			return err
		}
		_, err = audit.Export(e.ctx, a.Store, from, e.stdout)
		return err
	case "verify":
		return auditVerify(e)
	default:
		return fmt.Errorf("%w: unknown audit action %q", errUsage, e.args[0])
	}
}

func auditVerify(e *env) error {
	if path := e.flagString("file"); path != "" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := audit.VerifyJSONL(f)
		if err != nil {
			return fmt.Errorf("%w (%d records verified before it)", err, n)
		}
		fmt.Fprintf(e.stdout, "audit chain intact: %d records\n", n)
		return nil
	}
	archive := e.flagString("archive")
	a, err := openRead(e)
	if err != nil {
		r, rerr := e.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		return verifyRemote(e, r, archive)
	}
	defer a.Close()
	if cs := a.Store.Capabilities().Chains; cs != nil {
		if archive != "" {
			return fmt.Errorf("%w: --archive is for a single-owner store (embedded, memory); the %s store keeps no archive yet", errUsage, e.cfg.Store.Kind)
		}
		return verifyChains(e, cs)
	}
	snap, err := a.Snapshot(e.ctx)
	if err != nil {
		return err
	}
	if archive != "" {
		v, err := audit.VerifyWithArchive(e.ctx, archive, a.Store, snap.AuditHead)
		if err != nil {
			return fmt.Errorf("%w (%d archived and %d stored records verified before it)", err, v.Archive.Records, v.Stored)
		}
		printArchived(e, v.Archive)
		fmt.Fprintf(e.stdout, "store: positions %d..%d intact\n", v.Base.Position+1, snap.AuditHead.Position)
		fmt.Fprintf(e.stdout, "audit chain intact: %d records, archive and store as one chain\n", snap.AuditHead.Position)
		return nil
	}
	var base engine.AuditHead
	if t := a.Store.Capabilities().Trim; t != nil {
		if base, err = t.AuditBase(e.ctx); err != nil {
			return err
		}
	}
	n, err := audit.VerifyFrom(e.ctx, a.Store, base, snap.AuditHead)
	if err != nil {
		return fmt.Errorf("%w (%d records verified before it)", err, n)
	}
	if base.Position > 0 {
		fmt.Fprintf(e.stdout, "audit chain intact from the store's base: %d records, positions %d..%d (1..%d were archived by retention: add --archive DIR to verify them too)\n",
			n, base.Position+1, snap.AuditHead.Position, base.Position)
		return nil
	}
	fmt.Fprintf(e.stdout, "audit chain intact: %d records\n", n)
	return nil
}

func printArchived(e *env, ar audit.ArchiveResult) {
	if ar.Segments == 0 {
		fmt.Fprintln(e.stdout, "archive: no segments")
		return
	}
	fmt.Fprintf(e.stdout, "archive: %d segments, positions 1..%d intact\n", ar.Segments, ar.Head.Position)
}

// verifyRemote verifies through the HTTP API of the process that holds
// the store: after the archive when one is named, else from the first
// record the store still holds.
func verifyRemote(e *env, r *remote, archive string) error {
	var v *audit.Verifier
	from := uint64(1)
	if archive != "" {
		av, ar, err := audit.VerifyArchive(e.ctx, archive, "")
		if err != nil {
			return fmt.Errorf("%w (%d archived records verified before it)", err, ar.Records)
		}
		printArchived(e, ar)
		v, from = av, ar.Head.Position+1
	}
	first := uint64(0)
	err := r.audit(from, func(rec engine.AuditRecord) error {
		if v == nil { // the store's first record: its prev is the base
			v = audit.NewVerifierFrom(engine.AuditHead{Position: rec.Position - 1, Hash: rec.Prev}, "")
		}
		if first == 0 {
			first = rec.Position
		}
		return v.Check(rec)
	})
	n := uint64(0)
	if v != nil {
		n = v.Count()
	}
	if err != nil {
		return fmt.Errorf("%w (%d records verified before it)", err, n)
	}
	switch {
	case archive != "":
		fmt.Fprintf(e.stdout, "audit chain intact: %d records, archive and store as one chain\n", n)
	case first > 1:
		fmt.Fprintf(e.stdout, "audit chain intact from position %d: %d records (the records before it are not in the store: add --archive DIR to verify them)\n", first, n)
	default:
		fmt.Fprintf(e.stdout, "audit chain intact: %d records\n", n)
	}
	return nil
}

// verifyChains checks every member's chain of a shared store, printing one
// line per chain.
func verifyChains(e *env, cs engine.ChainScanner) error {
	res, err := audit.VerifyChains(e.ctx, cs)
	total := uint64(0)
	for i, r := range res {
		total += r.Records
		if err == nil || i < len(res)-1 {
			fmt.Fprintf(e.stdout, "member %s: audit chain intact: %d records\n", r.Member, r.Records)
		}
	}
	if err != nil {
		return fmt.Errorf("%w (%d records verified before it)", err, total)
	}
	behind, err := chainsBehind(e, cs)
	if err != nil {
		return err
	}
	for _, b := range behind {
		fmt.Fprintf(e.stdout, "member %s: %s\n", b.member, b.what)
	}
	if len(behind) > 0 {
		return fmt.Errorf("%d of %d member chains are behind their witness: the store lost commits the members made and acknowledged", len(behind), len(res))
	}
	fmt.Fprintf(e.stdout, "audit chains intact: %d members, %d records\n", len(res), total)
	return nil
}

type behindChain struct{ member, what string }

// chainsBehind compares each member's chain head in the store with its
// witness, the journal this machine keeps for it under store.journal.path
// (members without one here are not checked): a store behind it, or
// holding another record at the witness's position, lost what the member
// committed and acknowledged.
func chainsBehind(e *env, cs engine.ChainScanner) ([]behindChain, error) {
	sc := e.cfg.Store
	if sc.Journal.Path == "" || sc.Journal.Path == config.JournalOff {
		return nil, nil
	}
	chains, err := cs.Chains(e.ctx)
	if err != nil {
		return nil, err
	}
	// The witnesses first, the store's heads after them: a running member
	// commits before it journals, so a head read after its witness is
	// never behind it unless the store lost commits.
	type witness struct {
		dir        string
		head       engine.AuditHead
		recovering bool
	}
	witnesses := map[string]witness{}
	for _, c := range chains {
		dir := app.JournalDir(sc, c.Member)
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			continue // no journal of this member on this machine
		}
		j, err := journal.Open(dir, journal.Options{ReadOnly: true})
		if errors.Is(err, fs.ErrNotExist) { // the member deleted an expired segment while it was listed: list again
			j, err = journal.Open(dir, journal.Options{ReadOnly: true})
		}
		if err != nil {
			return nil, fmt.Errorf("member %s: read its journal: %w", c.Member, err)
		}
		last, pending := j.Last()
		j.Close()
		witnesses[c.Member] = witness{dir, last.Head, pending != nil}
	}
	if chains, err = cs.Chains(e.ctx); err != nil {
		return nil, err
	}
	var out []behindChain
	for _, c := range chains {
		w, ok := witnesses[c.Member]
		switch {
		case !ok || w.head.Position == 0:
		case w.recovering:
			out = append(out, behindChain{c.Member, fmt.Sprintf("audit chain RECOVERING: the member's journal (%s) holds a recovery of what the store lost that has not finished; start the member (it resumes the recovery), or see `replayguard store loss`", w.dir)})
		case c.Head.Position < w.head.Position:
			out = append(out, behindChain{c.Member, fmt.Sprintf("audit chain BEHIND its witness: the store holds it up to position %d, the member's journal (%s) up to %d: positions %d..%d were committed, acknowledged and lost",
				c.Head.Position, w.dir, w.head.Position, c.Head.Position+1, w.head.Position)})
		default:
			rec, err := engine.ChainRecord(e.ctx, cs, c.Member, w.head.Position)
			if err != nil && !errors.Is(err, engine.ErrNoRecord) {
				return nil, err
			}
			if rec.Hash != w.head.Hash {
				out = append(out, behindChain{c.Member, fmt.Sprintf("audit chain FORKED from its witness: the store holds another record at position %d than the member's journal (%s) says it committed",
					w.head.Position, w.dir)})
			}
		}
	}
	return out, nil
}
