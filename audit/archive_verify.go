package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/replayguard/replayguard/engine"
)

// ErrArchiveLevel is returned for an archive directory given at the wrong
// level: a shared store's archive root (a directory member-<id> per
// member) for a single-owner store's chain, or one that holds segments
// itself (one member's directory) for a member's chain of a shared store.
var ErrArchiveLevel = errors.New("audit archive: a directory at the wrong level")

// ArchiveResult is what VerifyArchive checked of one chain.
type ArchiveResult struct {
	Member   string
	Segments int
	Records  uint64
	Head     engine.AuditHead // the last archived record; zero for an empty archive
}

// VerifyArchive checks member's segments in archive dir as one chain from
// position 1: each segment's SHA-256 against its manifest, each record's
// hash chain, and that the segments follow each other without a hole or
// an overlap. A missing segment is named by the positions it held. It
// returns what it checked up to the first break, and a Verifier that
// continues the chain after the last archived record.
func VerifyArchive(ctx context.Context, dir, member string) (*Verifier, ArchiveResult, error) {
	return scanArchive(ctx, dir, member, false, nil)
}

// ScanArchive calls fn for each record of member's chain in archive dir, in
// position order, verifying as VerifyArchive does: a record reaches fn only
// once its hash and its place in the chain are checked. An error from fn
// stops the scan and is returned.
func ScanArchive(ctx context.Context, dir, member string, fn func(engine.AuditRecord) error) (ArchiveResult, error) {
	_, res, err := scanArchive(ctx, dir, member, false, fn)
	return res, err
}

// ScanArchiveAcrossHoles is ScanArchive but for a segment missing from the
// archive after its first: it reads on from the segment after the hole,
// verified from the link its manifest names, so fn sees positions jump
// across the hole (a first segment missing fails it as ScanArchive). It is
// for a reader that names the hole itself and goes on (the after-action
// report shows the chain broken there, and is still written); a break of
// any other kind ends the scan as it ends ScanArchive's.
func ScanArchiveAcrossHoles(ctx context.Context, dir, member string, fn func(engine.AuditRecord) error) (ArchiveResult, error) {
	_, res, err := scanArchive(ctx, dir, member, true, fn)
	return res, err
}

func scanArchive(ctx context.Context, dir, member string, acrossHoles bool, fn func(engine.AuditRecord) error) (*Verifier, ArchiveResult, error) {
	res := ArchiveResult{Member: member}
	v := NewChainVerifier(member)
	cdir := ChainDir(dir, member)
	entries, err := os.ReadDir(cdir)
	if errors.Is(err, os.ErrNotExist) {
		return v, res, checkLevel(dir, member)
	}
	if err != nil {
		return v, res, fmt.Errorf("audit archive: %w", err)
	}
	last := ""
	for _, e := range entries { // sorted by name: chain order
		if err := ctx.Err(); err != nil {
			return v, res, err
		}
		first, _, suffix, ok := parseName(e.Name())
		if !ok || suffix != manifestSuffix {
			continue
		}
		m, err := readManifest(cdir, e.Name(), first, member)
		if err == nil && acrossHoles && last != "" && m.First > v.next {
			v = NewVerifierFrom(engine.AuditHead{Position: m.First - 1, Hash: m.Prev}, member)
		}
		if err == nil {
			err = checkPlace(v, m, last)
		}
		var fnErr error // fn's own, returned as it is
		if err == nil {
			err = readSegment(filepath.Join(cdir, m.Segment), m, func(r engine.AuditRecord) error {
				if err := v.Check(r); err != nil || fn == nil {
					return err
				}
				fnErr = fn(r)
				return fnErr
			})
			if fnErr != nil {
				return v, res, fnErr
			}
			err = segmentError(err, m, v)
		}
		if err == nil {
			err = checkEnd(v, m)
		}
		if err != nil {
			return v, res, err
		}
		res.Segments++
		res.Records += m.Records
		res.Head = v.Head()
		last = m.Segment
	}
	if res.Segments == 0 {
		return v, res, checkLevel(dir, member)
	}
	return v, res, nil
}

// checkLevel refuses archive dir, which holds none of member's segments,
// when it is at the wrong level for member's chain (see ErrArchiveLevel):
// the chain would read as one whose segments are all missing.
func checkLevel(dir, member string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // nothing there: an archive retention has not written yet
	}
	for _, e := range entries {
		switch _, _, suffix, ok := parseName(e.Name()); {
		case member == "" && e.IsDir() && strings.HasPrefix(e.Name(), "member-"):
			return fmt.Errorf("%w: %s holds the chains of a shared store's members (%s), not the chain of a single-owner store",
				ErrArchiveLevel, dir, e.Name())
		case member != "" && ok && suffix == manifestSuffix:
			return fmt.Errorf("%w: %s holds segments itself (%s), where a shared store's archive holds a directory member-<id> per member: give the directory that holds those (audit.archive), not one of them",
				ErrArchiveLevel, dir, e.Name())
		}
	}
	return nil
}

// readManifest reads and checks the manifest name, whose name says it
// starts at first.
func readManifest(dir, name string, first uint64, member string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	broken := func(format string, args ...any) error {
		return &BrokenError{Position: first, Member: member, Reason: fmt.Sprintf("manifest %s: ", name) + fmt.Sprintf(format, args...)}
	}
	switch {
	case err != nil:
		return m, broken("%v", err)
	case m.Format != manifestFormat:
		return m, broken("format %d, want %d", m.Format, manifestFormat)
	case m.Member != member:
		return m, broken("names member %q, in the archive of %q", m.Member, member)
	case name != ManifestName(m.First, m.Last) || m.Segment != SegmentName(m.First, m.Last):
		return m, broken("describes positions %d..%d (segment %s), which its name does not: renamed or reordered", m.First, m.Last, m.Segment)
	case m.Last < m.First || m.Records != m.Last-m.First+1:
		return m, broken("%d %s for positions %d..%d", m.Records, records(m.Records), m.First, m.Last)
	}
	return m, nil
}

// checkPlace checks that segment m follows the chain v has verified (the
// last segment being after).
func checkPlace(v *Verifier, m Manifest, after string) error {
	where := "at the start of the archive"
	if after != "" {
		where = "after " + after
	}
	switch {
	case m.First > v.next:
		return &BrokenError{Position: v.next, Member: m.Member,
			Reason: fmt.Sprintf("positions %d..%d are in no segment %s, before %s: a segment is missing", v.next, m.First-1, where, m.Segment)}
	case m.First < v.next:
		return &BrokenError{Position: m.First, Member: m.Member,
			Reason: fmt.Sprintf("segment %s starts at position %d, %s ending at %d: segments overlap or were reordered", m.Segment, m.First, where, v.next-1)}
	case m.Prev != v.prev:
		return &BrokenError{Position: m.First, Member: m.Member,
			Reason: fmt.Sprintf("segment %s does not link to the chain %s (its prev is not the hash of position %d)", m.Segment, where, v.next-1)}
	}
	return nil
}

// checkEnd checks that the segment v just verified ends where its
// manifest says, with the hash it says.
func checkEnd(v *Verifier, m Manifest) error {
	switch h := v.Head(); {
	case h.Position != m.Last:
		return &BrokenError{Position: v.next, Member: m.Member,
			Reason: fmt.Sprintf("segment %s ends at position %d, its manifest says %d", m.Segment, h.Position, m.Last)}
	case h.Hash != m.Hash:
		return &BrokenError{Position: m.Last, Member: m.Member,
			Reason: fmt.Sprintf("the last record of segment %s has hash %s, its manifest says %s", m.Segment, h.Hash, m.Hash)}
	}
	return nil
}

// segmentError names the segment in a break found inside it.
func segmentError(err error, m Manifest, v *Verifier) error {
	var b *BrokenError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &b):
		if b.Position == 0 {
			b.Position = v.next
		}
		if b.Reason != "" && b.Position >= m.First && b.Position <= m.Last && !strings.Contains(b.Reason, m.Segment) {
			b.Reason = fmt.Sprintf("in segment %s: %s", m.Segment, b.Reason)
		}
		return b
	case errors.Is(err, os.ErrNotExist):
		return &BrokenError{Position: m.First, Member: m.Member,
			Reason: fmt.Sprintf("segment %s of positions %d..%d is missing (its manifest is there)", m.Segment, m.First, m.Last)}
	default:
		return &BrokenError{Position: v.next, Member: m.Member, Reason: fmt.Sprintf("segment %s: %v", m.Segment, err)}
	}
}

// Verified is what VerifyWithArchive checked.
type Verified struct {
	Archive ArchiveResult
	Base    engine.AuditHead // the store's audit base
	Stored  uint64           // records verified in the store
}

// VerifyWithArchive verifies archive dir and the store s (a single-owner
// store's chain, head its chain head) as one chain: the archive from
// position 1, then the store from its base, which must be the archive's
// last record. A store trimmed past the archive's end is a missing segment,
// named by its positions.
func VerifyWithArchive(ctx context.Context, dir string, s engine.Store, head engine.AuditHead) (Verified, error) {
	var base engine.AuditHead
	if t := s.Capabilities().Trim; t != nil {
		var err error
		if base, err = t.AuditBase(ctx); err != nil {
			return Verified{Base: base}, err
		}
	}
	return verifyJoined(ctx, dir, "", base, head, s)
}

// verifyJoined verifies member's archive in dir and its stored chain
// (scanned by s, from base, up to head) as one chain.
func verifyJoined(ctx context.Context, dir, member string, base, head engine.AuditHead, s engine.AuditScanner) (Verified, error) {
	out := Verified{Base: base}
	av, ar, err := VerifyArchive(ctx, dir, member)
	out.Archive = ar
	if err != nil {
		return out, err
	}
	sv, err := joinStore(av, base, member)
	if err != nil {
		return out, err
	}
	err = s.ScanAudit(ctx, base.Position+1, sv.Check)
	out.Stored = sv.Count()
	if err != nil {
		return out, err
	}
	if err := sv.CheckHead(head); err != nil {
		return out, err
	}
	return out, sv.checkArchived(ar.Head, head)
}

// joinStore returns the verifier of a stored chain whose base is base,
// after the archive av verified: the archive must reach the base.
func joinStore(av *Verifier, base engine.AuditHead, member string) (*Verifier, error) {
	ah := av.Head()
	switch {
	case base.Position > ah.Position:
		return nil, &BrokenError{Position: ah.Position + 1, Member: member,
			Reason: fmt.Sprintf("positions %d..%d are in no archived segment and no longer in the store (it starts after %d): a segment is missing",
				ah.Position+1, base.Position, base.Position)}
	case base.Position == ah.Position && base.Hash != ah.Hash:
		return nil, &BrokenError{Position: base.Position + 1, Member: member,
			Reason: fmt.Sprintf("the store's base (position %d) is not the archive's last record", base.Position)}
	}
	sv := NewStoreVerifier(base, member)
	if ah.Position > base.Position {
		sv.archived = ah // sealed but not yet trimmed: the store must agree
	}
	return sv, nil
}

// checkArchived reports an archive that holds records beyond the stored
// chain's head.
func (v *Verifier) checkArchived(archived, head engine.AuditHead) error {
	if archived.Position > v.Head().Position {
		return &BrokenError{Position: v.Head().Position + 1, Member: v.member,
			Reason: fmt.Sprintf("the archive holds positions up to %d, beyond the store's chain head %d", archived.Position, head.Position)}
	}
	return nil
}

// records is the noun for n records: "record" for one.
func records(n uint64) string {
	if n == 1 {
		return "record"
	}
	return "records"
}
