package report

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
)

// Build reads records (every chain from its first record: each chain's
// records in position order, chains interleaved by time — Records and
// Chains give them so) and computes the report. An error the iterator
// yields ends Build with it; a broken chain does not: the report says
// where it breaks and still has every figure.
func Build(records iter.Seq2[engine.AuditRecord, error], opts Options) (*Report, error) {
	if opts.MaxBars <= 0 {
		opts.MaxBars = DefaultMaxBars
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b := newBuilder(opts)
	for r, err := range records {
		if err != nil {
			return nil, err
		}
		if err := b.add(&r); err != nil {
			return nil, err
		}
	}
	return b.finish(), nil
}

// builder accumulates a report, one record at a time.
type builder struct {
	opts        Options
	rep         Report
	minutes     map[int64]*Outcomes // unix minute → deliveries
	seconds     map[int64]*Outcomes // unix second → deliveries, while few enough for a short period
	sources     map[string]*sourceAcc
	chains      map[string]*chainAcc
	resolutions []*Resolution
	first, last time.Time
	replays     replays
}

type sourceAcc struct {
	fig  SourceFigures
	gaps map[string][]*openGap // by epoch
	// early are late fills read before the gap they fill, by epoch: on a
	// shared store another member's clock may run behind the one that
	// opened the gap, and the chains are merged by time.
	early map[string][]int64
}

type openGap struct {
	from, to  int64
	remaining int64
}

type chainAcc struct {
	v           *audit.Verifier
	broken      string
	brokers     map[string]string // the last delivery's, by feed (mqtt.feeds; "" with one path)
	archived    uint64            // records read at or below the store's base
	first, last *engine.AuditRecord
}

func newBuilder(opts Options) *builder {
	b := &builder{opts: opts, minutes: map[int64]*Outcomes{}, seconds: map[int64]*Outcomes{}, sources: map[string]*sourceAcc{}, chains: map[string]*chainAcc{}}
	b.rep = Report{Generated: opts.Now().UTC(), Route: opts.Route, Store: opts.Store, ReadPath: opts.ReadPath,
		Archive: opts.Archive, ConfigDigest: opts.ConfigDigest, BrokerChanges: []BrokerChange{}, Reconnects: []BrokerChange{}, StoreLosses: []StoreLoss{}, Sources: []SourceFigures{}, Quarantine: []QuarantineItem{},
		Replayed: []EntityReplays{}, Lineages: []*Lineage{}}
	if !opts.From.IsZero() {
		t := opts.From.UTC()
		b.rep.From = &t
	}
	if !opts.To.IsZero() {
		t := opts.To.UTC()
		b.rep.To = &t
	}
	return b
}

func (b *builder) inPeriod(t time.Time) bool {
	return (b.opts.From.IsZero() || !t.Before(b.opts.From)) && (b.opts.To.IsZero() || t.Before(b.opts.To))
}

func (b *builder) add(r *engine.AuditRecord) error {
	if err := b.read(r); err != nil {
		return err
	}
	b.verify(r)
	b.count(r)
	return nil
}

// read notes r as its chain's next record read. A chain whose first
// record read is not position 1 lacks the records before it: that is an
// error when the period reaches them (it may hold records with r's time).
func (b *builder) read(r *engine.AuditRecord) error {
	c := b.chain(r.Member)
	if c.first == nil {
		first := *r
		c.first = &first
		if r.Position == 1 {
			c.v = audit.NewChainVerifier(r.Member) // read from the archive, if the chain has a base
		} else if b.opts.From.IsZero() || !b.opts.From.After(r.Time) {
			return b.notCovered(r)
		}
	}
	if base := b.opts.Bases[r.Member]; c.first.Position == 1 && r.Position <= base.Position {
		c.archived++
	}
	last := *r
	c.last = &last
	return nil
}

// notCovered is the error of a period that reaches before r, its chain's
// first record read. Positions the store should hold (above its base) are
// named as missing from it, not as the archive's.
func (b *builder) notCovered(r *engine.AuditRecord) error {
	when := r.Time.UTC().Format(time.RFC3339Nano)
	if base, known := b.base(r.Member); known && base < r.Position-1 {
		return fmt.Errorf("the period reaches before the first record read of %s (position %d, %s): %s; give a --from after %s",
			chainName(r.Member), r.Position, when, audit.Missing(1, r.Position-1, base, true, b.opts.Archive, b.opts.Archive != ""), when)
	}
	if b.opts.Archive == "" {
		return fmt.Errorf("the period reaches before the first record the store holds of %s (position %d, %s): positions 1..%d are not in the store (audit retention archived them); "+
			"give their archive (--archive DIR, or audit.archive in the configuration), or a --from after %s", chainName(r.Member), r.Position, when, r.Position-1, when)
	}
	return fmt.Errorf("positions 1..%d of %s are in neither the archive %s nor the store, and the period reaches before position %d (%s); give a --from after %s",
		r.Position-1, chainName(r.Member), b.opts.Archive, r.Position, when, when)
}

// count adds r to the figures of the period.
func (b *builder) count(r *engine.AuditRecord) {
	period := b.inPeriod(r.Time)
	if forward := (&Forwards{}).count(r.Outcome); forward { // its ref is an outbox entry, no quarantine entry
		if period && (b.opts.Route == "" || r.Route == b.opts.Route) {
			b.rep.Totals.Forwards.count(r.Outcome)
		}
		return
	}
	if r.Ref != 0 {
		b.resolutions = append(b.resolutions, resolution(r))
	}
	b.broker(r, period)
	if r.Outcome == engine.OutcomeRecovered || r.Outcome == engine.OutcomeLossAccepted {
		if period { // the member's, whatever the route: no delivery's decision
			b.rep.StoreLosses = append(b.rep.StoreLosses, StoreLoss{Time: r.Time.UTC(), Member: r.Member, Position: r.Position,
				Outcome: r.Outcome, Reason: r.Reason, Operator: r.Operator})
		}
		return
	}
	if b.opts.Route != "" && r.Route != b.opts.Route {
		return
	}
	b.replays.note(r, period)
	if !period {
		return
	}
	if b.first.IsZero() || r.Time.Before(b.first) {
		b.first = r.Time
	}
	if r.Time.After(b.last) {
		b.last = r.Time
	}
	if r.Outcome == engine.OutcomeDiscarded {
		b.rep.Totals.Discarded++
		return
	}
	o, ok := engine.ParseOutcome(r.Outcome)
	if !ok {
		return // a kind of record this build does not know: verified, not counted
	}
	src := b.source(r)
	switch {
	case r.Ref != 0 && o.Held(): // the release was held again, under a new entry: listed below
		b.rep.Totals.HeldAgain++
		src.fig.HeldAgain++
	case r.Ref != 0:
		b.rep.Totals.Released++
		src.fig.Released++
	default:
		count(&b.rep.Totals.Outcomes, o)
		count(&src.fig.Outcomes, o)
		min := r.Time.Unix() / 60
		if b.minutes[min] == nil {
			b.minutes[min] = &Outcomes{}
		}
		count(b.minutes[min], o)
		if b.seconds != nil {
			sec := r.Time.Unix()
			if b.seconds[sec] == nil {
				if len(b.seconds) == shortSpan {
					b.seconds = nil // too long a period for bars shorter than a minute
				} else {
					b.seconds[sec] = &Outcomes{}
				}
			}
			if b.seconds != nil {
				count(b.seconds[sec], o)
			}
		}
	}
	src.gap(r, o)
	if o.Held() {
		b.rep.Quarantine = append(b.rep.Quarantine, QuarantineItem{Member: r.Member, Position: r.Position,
			Time: r.Time.UTC(), Route: r.Route, Topic: r.Topic, Source: slices.Clone(r.Source), Sequence: cloneSeq(r.Sequence),
			Outcome: r.Outcome, Reason: r.Reason, Broker: r.Broker, Status: "open"})
	}
}

func count(c *Outcomes, o engine.Outcome) {
	switch o {
	case engine.Applied:
		c.Applied++
	case engine.AppliedLate:
		c.AppliedLate++
	case engine.Duplicate:
		c.Duplicate++
	case engine.Conflict:
		c.Conflict++
	case engine.Quarantined:
		c.Quarantined++
	case engine.Malformed:
		c.Malformed++
	}
}

func (b *builder) source(r *engine.AuditRecord) *sourceAcc {
	id := r.Route + "\x00" + strings.Join(r.Source, "\x00")
	s := b.sources[id]
	if s == nil {
		s = &sourceAcc{fig: SourceFigures{Route: r.Route, Source: slices.Clone(r.Source)}, gaps: map[string][]*openGap{}, early: map[string][]int64{}}
		if s.fig.Source == nil {
			s.fig.Source = []string{}
		}
		b.sources[id] = s
	}
	return s
}

// gap opens a gap for a record that skipped sequences and fills one for an
// applied record whose sequence lies in a gap opened in the period, or for
// a late fill read before the gap it fills (see sourceAcc.early).
func (s *sourceAcc) gap(r *engine.AuditRecord, o engine.Outcome) {
	if r.Gap != nil {
		s.fig.GapsOpened++
		n := r.Gap.To - r.Gap.From + 1
		s.fig.MissingSequences += uint64(n)
		g := &openGap{from: r.Gap.From, to: r.Gap.To, remaining: n}
		s.early[r.Epoch] = slices.DeleteFunc(s.early[r.Epoch], func(seq int64) bool {
			in := seq >= g.from && seq <= g.to
			if in {
				g.remaining--
			}
			return in
		})
		if g.remaining == 0 {
			s.fig.GapsClosed++
			return
		}
		s.gaps[r.Epoch] = append(s.gaps[r.Epoch], g)
		return
	}
	if !o.Effective() || r.Sequence == nil {
		return
	}
	gaps := s.gaps[r.Epoch]
	for i, g := range gaps {
		if *r.Sequence < g.from || *r.Sequence > g.to {
			continue
		}
		if g.remaining--; g.remaining == 0 {
			s.fig.GapsClosed++
			s.gaps[r.Epoch] = slices.Delete(gaps, i, i+1)
		}
		return
	}
	if o == engine.AppliedLate {
		s.early[r.Epoch] = append(s.early[r.Epoch], *r.Sequence)
	}
}

// broker notes a delivery from another broker than its chain's last one
// on the same feed (redundant feeds deliver from their own brokers at
// once), and the first delivery of a new connection to the same broker.
func (b *builder) broker(r *engine.AuditRecord, period bool) {
	if r.Ref != 0 || r.Broker == "" || r.Outcome == engine.OutcomeDiscarded {
		return // an operator's action: its broker is the held message's
	}
	c := b.chain(r.Member)
	from := c.brokers[r.Feed]
	reconnect := r.Broker == from && !r.Connected.IsZero()
	if r.Broker == from && !reconnect {
		return
	}
	if period {
		change := BrokerChange{Time: r.Time.UTC(), Member: r.Member, Position: r.Position, Feed: r.Feed, From: from, To: r.Broker,
			Reconnect: reconnect, Connected: r.Connected.UTC()}
		if reconnect {
			b.rep.Reconnects = append(b.rep.Reconnects, change)
		} else {
			b.rep.BrokerChanges = append(b.rep.BrokerChanges, change)
		}
	}
	c.brokers[r.Feed] = r.Broker
}

func (b *builder) chain(member string) *chainAcc {
	c := b.chains[member]
	if c == nil {
		v := audit.NewChainVerifier(member)
		if base := b.opts.Bases[member]; base.Position > 0 {
			v = audit.NewVerifierFrom(base, member)
		}
		c = &chainAcc{v: v, brokers: map[string]string{}}
		b.chains[member] = c
	}
	return c
}

// base is where audit retention left member's chain beginning in the
// store (Options.Bases); false when the report was not told.
func (b *builder) base(member string) (uint64, bool) {
	if b.opts.Bases == nil {
		return 0, false
	}
	return b.opts.Bases[member].Position, true
}

func (b *builder) verify(r *engine.AuditRecord) {
	c := b.chain(r.Member)
	if c.broken != "" {
		return
	}
	if next := c.v.Head().Position + 1; r.Position > next {
		// Positions neither the archive nor the store gave: named where
		// they should be, as audit verify names the break.
		base, known := b.base(r.Member)
		c.broken = (&audit.BrokenError{Position: next, Member: r.Member, Reason: audit.Missing(next, r.Position-1, base, known, b.opts.Archive, b.opts.Archive != "")}).Error()
		return
	}
	if err := c.v.Check(*r); err != nil {
		c.broken = err.Error()
	}
}

func resolution(r *engine.AuditRecord) *Resolution {
	res := &Resolution{Action: "released", Outcome: r.Outcome, Time: r.Time.UTC(), Member: r.Member,
		Position: r.Position, Operator: r.Operator, ref: r.Ref, topic: r.Topic}
	if r.Outcome == engine.OutcomeDiscarded {
		res.Action, res.Outcome, res.Reason = "discarded", "", r.Reason
	} else if o, ok := engine.ParseOutcome(r.Outcome); ok && o.Held() {
		res.Action = "held_again"
	}
	return res
}

func cloneSeq(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func (b *builder) finish() *Report {
	rep := &b.rep
	if !b.first.IsZero() {
		f, l := b.first.UTC(), b.last.UTC()
		rep.First, rep.Last = &f, &l
	}
	for _, s := range b.sources {
		rep.Sources = append(rep.Sources, s.fig)
	}
	slices.SortFunc(rep.Sources, func(x, y SourceFigures) int {
		return cmp.Or(strings.Compare(x.Route, y.Route), slices.Compare(x.Source, y.Source))
	})
	slices.SortStableFunc(rep.BrokerChanges, func(x, y BrokerChange) int { return x.Time.Compare(y.Time) })
	slices.SortStableFunc(rep.Reconnects, func(x, y BrokerChange) int { return x.Time.Compare(y.Time) })
	slices.SortStableFunc(rep.StoreLosses, func(x, y StoreLoss) int { return x.Time.Compare(y.Time) })
	slices.SortStableFunc(rep.Quarantine, func(x, y QuarantineItem) int { return x.Time.Compare(y.Time) })
	b.resolve()
	rep.Replayed = b.replays.top(topReplayed)
	rep.Timeline = b.timeline()
	rep.Verification = b.verification()
	return rep
}

// memberBits is where a shared store's member number starts in its
// quarantine ids (engine.SharedStore.QuarantineBase).
const memberBits = 40

// resolve gives each held decision its quarantine id and its resolution.
// On a single-owner store the id is the record's position. A shared store
// adds the member's number, shifted, which the records do not carry:
// Options.QuarantineBases gives it, or else a resolution whose id names the
// position and topic of exactly one member's held decision tells it.
func (b *builder) resolve() {
	byRef := map[uint64]*Resolution{}
	for _, r := range b.resolutions {
		byRef[r.ref] = r
	}
	numbers := map[string]uint64{"": 0}
	for m, base := range b.opts.QuarantineBases {
		numbers[m] = base >> memberBits
	}
	for _, r := range b.resolutions {
		if b.opts.QuarantineBases != nil {
			break
		}
		n, pos := r.ref>>memberBits, r.ref&(1<<memberBits-1)
		if n == 0 {
			continue
		}
		var member string
		matches := 0
		for _, q := range b.rep.Quarantine {
			if q.Member != "" && q.Position == pos && q.Topic == r.topic && !q.Time.After(r.Time) {
				if matches == 0 || q.Member != member {
					matches++
				}
				member = q.Member
			}
		}
		if matches == 1 {
			numbers[member] = n
		}
	}
	for i := range b.rep.Quarantine {
		q := &b.rep.Quarantine[i]
		n, ok := numbers[q.Member]
		if !ok {
			continue
		}
		q.ID = n<<memberBits | q.Position
		if r := byRef[q.ID]; r != nil {
			q.Status, q.Resolved = r.Action, r
		}
	}
	// A release held again wrote its new entry at its own position.
	for _, r := range b.resolutions {
		if n, ok := numbers[r.Member]; ok && r.Action == "held_again" {
			r.Held = n<<memberBits | r.Position
		}
	}
}

func (b *builder) verification() Verification {
	v := Verification{Intact: true, HeadChecked: b.opts.Heads != nil, Chains: []ChainStatus{}}
	members := map[string]bool{}
	for m := range b.chains {
		members[m] = true
	}
	for m := range b.opts.Heads {
		members[m] = true
	}
	for m := range b.opts.StoreBroken {
		members[m] = true
	}
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range members {
			if !yield(m) {
				return
			}
		}
	}) {
		c := b.chain(m)
		h := c.v.Head()
		st := ChainStatus{Member: m, Records: c.v.Count(), HeadPosition: h.Position, HeadHash: h.Hash.String(), Broken: c.broken, Archived: c.archived}
		if c.first != nil {
			f, l := c.first.Time.UTC(), c.last.Time.UTC()
			st.FirstPosition, st.First, st.LastPosition, st.Last = c.first.Position, &f, c.last.Position, &l
		}
		if want, ok := b.opts.Heads[m]; ok && st.Broken == "" && want != h {
			st.Broken = fmt.Sprintf("log ends at position %d but the chain head is at %d", h.Position, want.Position)
			if want.Position == h.Position {
				st.Broken = fmt.Sprintf("the last record's hash does not match the chain head at position %d", h.Position)
			}
		}
		if why, ok := b.opts.StoreBroken[m]; ok && st.Broken == "" {
			st.Broken = why
		}
		if st.Broken != "" {
			v.Intact = false
		}
		v.Chains = append(v.Chains, st)
	}
	return v
}
