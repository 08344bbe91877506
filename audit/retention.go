package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// DefaultSegmentRecords bounds the records of one archived segment, and so
// what one trim drops in one transaction.
const DefaultSegmentRecords = 100_000

// ErrRetention is returned by NewRetention for options it cannot work with.
var ErrRetention = errors.New("audit retention: invalid options")

// RetainStore is a store whose audit log retention trims.
type RetainStore interface {
	engine.AuditScanner
	engine.AuditTrimmer
	engine.QuarantineScanner
}

// RetentionOptions configure NewRetention and NewChainRetention.
type RetentionOptions struct {
	// Archive is the directory that receives the sealed segments. Required:
	// records never leave the store unarchived.
	Archive string
	// Member is the member whose chain of a shared store NewChainRetention
	// trims: its segments go to ChainDir(Archive, Member) and their
	// manifests name it. Required by NewChainRetention; NewRetention (a
	// single-owner store, whose records name no member) refuses it.
	// Default "".
	Member string
	// MaxAge drops records older than this. Default 0: no age limit.
	MaxAge time.Duration
	// MaxRecords keeps at most this many records in the store. Default 0:
	// no count limit. At least one of MaxAge and MaxRecords is required.
	MaxRecords uint64
	// SegmentRecords bounds a segment. Default DefaultSegmentRecords.
	SegmentRecords int
	// Head returns the chain's committed head (the engine's
	// Stats().Position; a shared store's chain head as the store keeps
	// it): no record above it leaves, and MaxRecords counts back from it.
	// Required.
	Head func(ctx context.Context) (uint64, error)
	// Cursors returns, by audit sink, the position up to which the sink
	// delivered the chain, whose head Head just returned: no record above
	// the lowest leaves the store, whatever the limits, and a sink whose
	// cursor is below the newest MaxRecords holds the records between
	// them in the store (TrimResult.Held). Default: no sink.
	Cursors func(ctx context.Context, head uint64) (map[string]uint64, error)
	// Owned reports whether this process still owns the chain's archive
	// and trim, as a claim of a shared store's chain says. Once asks it
	// before it clears what an interrupted pass left, before each segment
	// and before each trim, and stops without error once it answers
	// false: another process may be archiving the chain by then. Default:
	// always owned.
	Owned func() bool
	// Now is the wall clock: the time of a sealed segment's manifest and
	// of the directory of a lost chain's segments. Default time.Now.
	Now func() time.Time
	// Ages is the clock MaxAge is measured on, read at each pass: a
	// record leaves once MaxAge has elapsed since it was stamped, by it
	// (see AgeClock). Default: an AgeClock over Now, first read at the
	// first pass; a process gives its Retentions one AgeClock first read
	// at its start.
	Ages *AgeClock
	// Logger receives a line per archived segment and the errors of Run.
	// Default: discard.
	Logger *slog.Logger
}

// Retention moves the oldest audit records of one chain — a single-owner
// store's log, or one member's chain of a shared store — into sealed
// segments of an archive and then drops them from the store, so the store
// stays bounded and archive plus store verify as one chain
// (VerifyWithArchive, VerifyChainsWithArchive). A record leaves when it is
// older than MaxAge (measured on Ages, which a step of the wall clock does
// not move) or beyond the newest MaxRecords (counted back from Head),
// never above Head or an audit sink's cursor (Cursors), and never while an
// open quarantine entry of its chain is at or below it: a held message and
// the records up to it stay until it is released or discarded. A sink
// that lags keeps what it has yet to deliver in the store, beyond
// MaxRecords: each pass says so (TrimResult.Held).
//
// Once and Run must not run concurrently with each other, nor with another
// Retention of the same chain and archive (one task owns a chain's
// archive); both run alongside the engine's commits.
type Retention struct {
	store trimLog
	dir   string // the chain's directory of the archive
	opts  RetentionOptions
	log   *slog.Logger
	marks ageMarks // how far behind opts.Ages the records were stamped, at most
}

// trimLog is the one chain a Retention trims.
type trimLog interface {
	engine.AuditScanner
	engine.AuditTrimmer
	// quarantineFloor is the position of the chain's oldest record that
	// an open quarantine entry holds; math.MaxUint64 when none is open.
	quarantineFloor(ctx context.Context) (uint64, error)
}

// TrimResult is what one pass of retention moved.
type TrimResult struct {
	Segments int
	Records  uint64
	Base     engine.AuditHead // the store's audit base after the pass
	// Held are the audit sinks that keep records beyond the newest
	// MaxRecords in the store, because they have yet to deliver them
	// (RetentionOptions.Cursors), lowest cursor first, as the pass found
	// them before it trimmed; none without MaxRecords, and none for a sink
	// within it.
	Held []SinkHeld
	// SinksRead: the pass read the sinks' cursors, and Held is what it
	// found; false when it failed before (Held then says nothing).
	SinksRead bool
}

// SinkHeld is an audit sink that holds records beyond the newest
// MaxRecords in the store: Records of them, those after its Cursor (and
// after the store's base) up to where the count limit cuts.
type SinkHeld struct {
	Sink    string
	Cursor  uint64
	Records uint64
}

// NewRetention returns retention for the log of s, a single-owner store,
// under opts.
func NewRetention(s RetainStore, opts RetentionOptions) (*Retention, error) {
	if opts.Member != "" {
		return nil, fmt.Errorf("%w: member %q: a member's chain of a shared store is NewChainRetention's", ErrRetention, opts.Member)
	}
	return newRetention(ownerLog{s}, opts)
}

func newRetention(s trimLog, opts RetentionOptions) (*Retention, error) {
	switch {
	case opts.Archive == "":
		return nil, fmt.Errorf("%w: no archive directory", ErrRetention)
	case opts.MaxAge <= 0 && opts.MaxRecords == 0:
		return nil, fmt.Errorf("%w: neither a maximum age nor a maximum record count", ErrRetention)
	case opts.Head == nil:
		return nil, fmt.Errorf("%w: no chain head", ErrRetention)
	}
	if opts.SegmentRecords <= 0 {
		opts.SegmentRecords = DefaultSegmentRecords
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Ages == nil {
		opts.Ages = NewAgeClock(opts.Now, nil)
	}
	if opts.Owned == nil {
		opts.Owned = func() bool { return true }
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Member != "" {
		log = log.With("member", opts.Member)
	}
	return &Retention{store: s, dir: ChainDir(opts.Archive, opts.Member), opts: opts, log: log}, nil
}

// Once archives and drops every record the limits let go, a segment at a
// time: each segment is sealed in the archive before the store drops its
// records. It stops, with what it did so far, once opts.Owned says the
// chain is no longer this process's.
func (r *Retention) Once(ctx context.Context) (TrimResult, error) {
	var res TrimResult
	base, err := r.store.AuditBase(ctx)
	res.Base = base
	if err != nil {
		return res, err
	}
	head, err := r.opts.Head(ctx)
	if err != nil {
		return res, err
	}
	limit, err := r.heldBack(ctx, head, base.Position, &res)
	if err != nil {
		return res, err
	}
	floor, err := r.store.quarantineFloor(ctx)
	if err != nil {
		return res, err
	}
	if !r.opts.Owned() {
		return res, nil
	}
	if err := r.checkLeftovers(ctx, base); err != nil {
		return res, err
	}
	if err := clearFrom(r.dir, base.Position+1); err != nil {
		return res, err
	}
	// Read after the head: the records up to it were stamped by then.
	now, behind := r.opts.Ages.Read()
	r.marks = r.marks.since(base.Position).note(head, behind)
	p := pass{limit: min(limit, floor-1), countCut: r.countCut(head), aged: now.Add(-r.opts.MaxAge), marks: r.marks}
	for base.Position < p.limit && r.opts.Owned() {
		n, next, err := r.segment(ctx, base, p)
		if err != nil || n == 0 {
			return res, err
		}
		if !r.opts.Owned() { // its records stay; the chain's owner clears the segment and writes it again
			return res, nil
		}
		if err := r.store.TrimAudit(ctx, next.Position+1, next); errors.Is(err, engine.ErrChainClaimed) {
			// The claim ran out and another process holds it now: it stops
			// here as above, the store keeping the segment's records.
			r.log.Warn("audit retention: another process claimed the chain; its trim was refused", "err", err)
			return res, nil
		} else if err != nil {
			return res, err
		}
		base = next
		res.Segments++
		res.Records += n
		res.Base = base
	}
	return res, nil
}

// countCut is the last position the count limit lets go with the chain's
// head at head: 0 without MaxRecords, or while the chain is within it.
func (r *Retention) countCut(head uint64) uint64 {
	if n := r.opts.MaxRecords; n > 0 && head > n {
		return head - n
	}
	return 0
}

// heldBack returns head held back to the lowest cursor of the audit sinks,
// and notes in res.Held the sinks that keep records the count limit lets
// go, of those the store holds (after its base).
func (r *Retention) heldBack(ctx context.Context, head, base uint64, res *TrimResult) (uint64, error) {
	if r.opts.Cursors == nil {
		return head, nil
	}
	cursors, err := r.opts.Cursors(ctx, head)
	if err != nil {
		return 0, err
	}
	res.SinksRead = true
	cut := r.countCut(head)
	for _, name := range slices.Sorted(maps.Keys(cursors)) {
		c := cursors[name]
		head = min(head, c)
		if from := max(c, base); from < cut {
			res.Held = append(res.Held, SinkHeld{Sink: name, Cursor: c, Records: cut - from})
		}
	}
	slices.SortStableFunc(res.Held, func(a, b SinkHeld) int { return cmp.Compare(a.Cursor, b.Cursor) })
	return head, nil
}

// checkLeftovers refuses a sealed segment after base that the store's
// chain does not hold: clearFrom removes the segments an interrupted pass
// sealed before its trim, whose records the store still holds, and would
// otherwise delete the archived history of a chain the store lost (a
// server that keeps nothing on disk restarted, a store restored from an
// older copy), whose chain begins again below them. Such a segment stays,
// and retention of the chain stops until an operator moves it aside;
// unless the member itself found the loss and decided again what it lost
// (a failover to a standby that lacked its last commits, recovered from
// its journal or accepted by an operator): the chain then holds a
// recovered or loss_accepted record at or after the segment's first
// position, and the segments the store lost are moved aside (setAside),
// kept, and retention goes on.
func (r *Retention) checkLeftovers(ctx context.Context, base engine.AuditHead) error {
	entries, err := os.ReadDir(r.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit archive: %w", err)
	}
	var lost []Manifest
	for _, e := range entries {
		first, _, kind, ok := parseName(e.Name())
		if !ok || kind != manifestSuffix || first <= base.Position {
			continue
		}
		m, err := readManifest(r.dir, e.Name(), first, r.opts.Member)
		if err != nil {
			return err
		}
		held := false
		err = r.store.ScanAudit(ctx, m.Last, func(rec engine.AuditRecord) error {
			held = rec.Position == m.Last && rec.Hash == m.Hash
			return errStop
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		if !held {
			lost = append(lost, m)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	recovered, err := r.recoveredSince(ctx, lost[0].First)
	if err != nil {
		return err
	}
	if !recovered {
		m := lost[0]
		return fmt.Errorf("%w: %s holds sealed segment %s (positions %d..%d), which the store's chain does not hold: "+
			"the store lost the chain it was archived from (its base is now %d); retention will not archive over it: move the segment and its manifest aside",
			ErrArchiveAhead, r.dir, m.Segment, m.First, m.Last, base.Position)
	}
	return r.setAside(lost, base)
}

// recoveredSince reports whether the store's chain holds, at or after
// position from, the record of a recovery from the member's journal or of
// an operator's acceptance of a loss: the member found that the store had
// lost its commits and decided again what it had lost.
func (r *Retention) recoveredSince(ctx context.Context, from uint64) (bool, error) {
	found := false
	err := r.store.ScanAudit(ctx, from, func(rec engine.AuditRecord) error {
		if rec.Outcome == engine.OutcomeRecovered || rec.Outcome == engine.OutcomeLossAccepted {
			found = true
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return false, err
	}
	return found, nil
}

// lostDirPrefix begins the name of the directory, beside a chain's
// segments, that setAside moves the segments of a lost chain into.
const lostDirPrefix = "lost-"

// setAside moves the sealed segments the store lost, after the member
// decided their deliveries again, out of the chain's way into a directory
// of the chain's own, lost-<base>-<time>: verification reads the chain's
// segments only, and these stay, the decisions as first made. Each
// segment moves before its manifest, so that a crash in between leaves
// the manifest, which the next pass moves, and never an unsealed segment
// clearFrom would take for a leftover.
func (r *Retention) setAside(lost []Manifest, base engine.AuditHead) error {
	dest := filepath.Join(r.dir, fmt.Sprintf("%s%020d-%s", lostDirPrefix, base.Position, r.opts.Now().UTC().Format("20060102T150405.000000000Z")))
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("audit archive: %w", err)
	}
	for _, m := range lost {
		for _, name := range []string{m.Segment, ManifestName(m.First, m.Last)} {
			if err := os.Rename(filepath.Join(r.dir, name), filepath.Join(dest, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("audit archive: %w", err)
			}
		}
	}
	for _, d := range []string{dest, r.dir} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	r.log.Warn("audit retention: the store lost these archived records, and the member decided their deliveries again; their segments are moved aside and kept",
		"segments", len(lost), "first", lost[0].First, "last", lost[len(lost)-1].Last, "base", base.Position, "dir", dest)
	return nil
}

// ErrArchiveAhead is returned by Retention.Once when the archive holds a
// sealed segment beyond the store's base that the store's chain does not
// hold: archiving the chain again would delete it. Its words name no
// task: those that run retention say "audit retention" before them, as
// they do before every error of a pass.
var ErrArchiveAhead = errors.New("the archive holds records the store lost")

// pass is what one Once lets go: positions up to limit that are at or
// below countCut, or stamped before aged (MaxAge before the AgeClock's
// time) by more than the wall clock that stamped them can have read behind
// the AgeClock (marks).
type pass struct {
	limit    uint64
	countCut uint64
	aged     time.Time
	marks    ageMarks
}

// old reports whether rec is older than MaxAge.
func (p pass) old(rec *engine.AuditRecord) bool {
	return rec.Time.Before(p.aged.Add(p.marks.behind(rec.Position)))
}

// ownerLog is a single-owner store's log, whose quarantine ids are its
// records' positions.
type ownerLog struct{ RetainStore }

// quarantineFloor is the position of the oldest open quarantine entry's
// record (math.MaxUint64 when none is open): nothing at or above it leaves.
func (s ownerLog) quarantineFloor(ctx context.Context) (uint64, error) {
	floor := uint64(math.MaxUint64)
	err := s.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error {
		floor = q.ID // in ID order: the first is the oldest
		return errStop
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return floor, err
}

var errStop = errors.New("stop")

// segment archives the records after base that p lets go, up to a
// segment's worth, and returns how many and the last one's link: none when
// there are none or the chain is no longer this process's to archive. It
// checks the chain as it goes: a broken chain is never archived as if
// whole.
func (r *Retention) segment(ctx context.Context, base engine.AuditHead, p pass) (uint64, engine.AuditHead, error) {
	upto := min(p.limit, base.Position+uint64(r.opts.SegmentRecords))
	// The segment's file is made for its first record: a pass with none to
	// let go, every pass of a store within its bounds, writes nothing in
	// the archive.
	var w *segmentWriter
	abort := func() {
		if w != nil {
			w.abort()
		}
	}
	v := NewVerifierFrom(base, r.opts.Member)
	err := r.store.ScanAudit(ctx, base.Position+1, func(rec engine.AuditRecord) error {
		if v.Count() == 0 && rec.Position != base.Position+1 {
			// The store's chain does not go on from the base it names: it
			// lost records, or another process trimmed them unarchived.
			// Said, not passed over as nothing to archive.
			return v.Check(rec)
		}
		if rec.Position > upto || (rec.Position > p.countCut && (r.opts.MaxAge <= 0 || !p.old(&rec))) {
			return errStop
		}
		if err := v.Check(rec); err != nil {
			return err
		}
		if w == nil {
			var err error
			if w, err = newSegment(r.dir, r.opts.Member, base); err != nil {
				return err
			}
		}
		return w.add(&rec)
	})
	if err != nil && !errors.Is(err, errStop) {
		abort()
		return 0, base, err
	}
	if v.Count() == 0 || !r.opts.Owned() {
		abort()
		return 0, base, nil
	}
	m, err := w.seal(r.opts.Now())
	if err != nil {
		return 0, base, err
	}
	r.log.Info("audit segment archived", "first", m.First, "last", m.Last, "records", m.Records, "bytes", m.Bytes, "segment", m.Segment)
	return m.Records, engine.AuditHead{Position: m.Last, Hash: m.Hash}, nil
}
