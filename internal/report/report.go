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

// Options say what a report covers and where its records came from.
type Options struct {
	// From and To bound the period: a record counts when From <= time < To.
	// Zero: unbounded on that side.
	From, To time.Time
	// Route keeps only that route's decisions; empty: every route. Broker
	// changes are the connection's and are shown whatever the route.
	Route string
	// Heads are the chain heads the store keeps apart from the records, by
	// member ("" on a single-owner store). A chain whose last record does
	// not match its head is reported broken (a removed tail). Nil: the heads
	// are not checked, and the report says so.
	Heads map[string]engine.AuditHead
	// QuarantineBases are a shared store's members' quarantine bases
	// (engine.SharedStore.QuarantineBase), by member: a held decision's
	// quarantine id is its member's base plus its position. Nil: the report
	// learns a member's base from a resolution that names exactly one
	// member's held decision, and shows the others by member and position.
	QuarantineBases map[string]uint64
	// Bases are where chains trimmed by audit retention now start, by
	// member: the last archived record's position and hash. A chain with a
	// base is verified from it; without, from position 1.
	Bases map[string]engine.AuditHead
	// Store is the store kind (memory, embedded, redis, postgres), ReadPath
	// how the records were read (the store itself, or a running process's
	// API) and ConfigDigest the SHA-256 of the effective configuration:
	// shown as given.
	Store, ReadPath, ConfigDigest string
	// MaxBars bounds the timeline's bars: past it, a bar covers more than a
	// minute (2, 5, 10, 15, 30 or 60 minutes, then hours). Default 360.
	MaxBars int
	// Now stamps the report. Default time.Now.
	Now func() time.Time
}

// DefaultMaxBars is the timeline's default bound on bars.
const DefaultMaxBars = 360

// Report is the after-action report: every figure the HTML shows, and its
// JSON form.
type Report struct {
	Generated    time.Time  `json:"generated"`
	From         *time.Time `json:"from,omitempty"` // the period asked for
	To           *time.Time `json:"to,omitempty"`
	Route        string     `json:"route,omitempty"`
	First        *time.Time `json:"first,omitempty"` // the first and last decision in the period
	Last         *time.Time `json:"last,omitempty"`
	Store        string     `json:"store"`
	ReadPath     string     `json:"read_path"`
	ConfigDigest string     `json:"config_digest"`

	Totals        Counts           `json:"totals"`
	Timeline      Timeline         `json:"timeline"`
	BrokerChanges []BrokerChange   `json:"broker_changes"`
	Sources       []SourceFigures  `json:"sources"`
	Quarantine    []QuarantineItem `json:"quarantine"`
	Verification  Verification     `json:"verification"`
}

// Outcomes counts decisions by outcome.
type Outcomes struct {
	Applied     uint64 `json:"applied"`
	AppliedLate uint64 `json:"applied_late"`
	Duplicate   uint64 `json:"duplicate"`
	Conflict    uint64 `json:"conflict"`
	Quarantined uint64 `json:"quarantined"`
	Malformed   uint64 `json:"malformed"`
}

// Counts are the deliveries' outcomes and the operators' actions.
type Counts struct {
	Outcomes
	Released  uint64 `json:"released"`  // quarantine entries an operator released
	Discarded uint64 `json:"discarded"` // and discarded
	// Forwards are the outbox entries a downstream refused for good, and
	// what operators did with them.
	Forwards Forwards `json:"forwards"`
}

// Forwards count the forward effects' audit records.
type Forwards struct {
	Held    uint64 `json:"held"`    // refused by the downstream, held for an operator
	Retried uint64 `json:"retried"` // put back into the outbox by an operator
	Dropped uint64 `json:"dropped"` // dropped by an operator
}

// count counts a forward record; it reports false for any other.
func (f *Forwards) count(outcome string) bool {
	switch outcome {
	case engine.OutcomeForwardHeld:
		f.Held++
	case engine.OutcomeForwardRetried:
		f.Retried++
	case engine.OutcomeForwardDropped:
		f.Dropped++
	default:
		return false
	}
	return true
}

// Timeline is decisions per bucket (a minute, unless the period needs
// wider ones, or is under two minutes and gets seconds) by outcome, every
// bucket of the period present.
type Timeline struct {
	BucketSeconds int64    `json:"bucket_seconds"`
	Buckets       []Bucket `json:"buckets"`
}

// Bucket is one bar of the timeline: the deliveries decided in
// [Start, Start+BucketSeconds).
type Bucket struct {
	Start time.Time `json:"start"`
	Outcomes
}

// Total is the bucket's number of decisions.
func (o Outcomes) Total() uint64 {
	return o.Applied + o.AppliedLate + o.Duplicate + o.Conflict + o.Quarantined + o.Malformed
}

// BrokerChange is a delivery from another broker than the one before it
// on the same chain (member): a failover, or the first broker seen (From
// empty).
type BrokerChange struct {
	Time     time.Time `json:"time"`
	Member   string    `json:"member,omitempty"`
	Position uint64    `json:"position"` // the first record from the new broker
	From     string    `json:"from"`
	To       string    `json:"to"`
}

// SourceFigures are one (route, source)'s decisions in the period.
type SourceFigures struct {
	Route  string   `json:"route"`
	Source []string `json:"source"`
	Counts
	// GapsOpened counts decisions that skipped sequences (their audit
	// record's gap); MissingSequences is how many they skipped; GapsClosed
	// is how many of those gaps late fills in the period filled entirely.
	GapsOpened       uint64 `json:"gaps_opened"`
	MissingSequences uint64 `json:"missing_sequences"`
	GapsClosed       uint64 `json:"gaps_closed"`
}

// QuarantineItem is a decision that held a message (conflict, quarantined,
// malformed) and what became of it.
type QuarantineItem struct {
	// ID is the quarantine entry's id (what release and discard take); 0
	// when the report cannot tell it (a shared store's member whose number
	// no resolution revealed).
	ID       uint64      `json:"id,omitempty"`
	Member   string      `json:"member,omitempty"`
	Position uint64      `json:"position"`
	Time     time.Time   `json:"time"`
	Route    string      `json:"route,omitempty"`
	Topic    string      `json:"topic"`
	Source   []string    `json:"source,omitempty"`
	Sequence *int64      `json:"sequence,omitempty"`
	Outcome  string      `json:"outcome"`
	Reason   string      `json:"reason"`
	Broker   string      `json:"broker,omitempty"`
	Status   string      `json:"status"` // open, released or discarded
	Resolved *Resolution `json:"resolution,omitempty"`
}

// Resolution is an operator's release or discard of a quarantine entry.
type Resolution struct {
	Action   string    `json:"action"` // released or discarded
	Outcome  string    `json:"outcome"`
	Time     time.Time `json:"time"`
	Member   string    `json:"member,omitempty"`
	Position uint64    `json:"position"`
	Operator string    `json:"operator"`
	Reason   string    `json:"reason,omitempty"`
	ref      uint64
	topic    string
}

// Verification is the hash chains' check: every record of every chain,
// from position 1 or, where retention archived the oldest, from the base
// the store keeps.
type Verification struct {
	Intact      bool          `json:"intact"`
	HeadChecked bool          `json:"head_checked"` // against the heads the store keeps
	Chains      []ChainStatus `json:"chains"`
}

// ChainStatus is one chain's check.
type ChainStatus struct {
	Member       string `json:"member,omitempty"`
	Records      uint64 `json:"records"` // verified
	HeadPosition uint64 `json:"head_position"`
	HeadHash     string `json:"head_hash"`
	Broken       string `json:"broken,omitempty"` // why and where, when not intact
}

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
		b.add(&r)
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
}

type sourceAcc struct {
	fig  SourceFigures
	gaps map[string][]*openGap // by epoch
}

type openGap struct {
	from, to  int64
	remaining int64
}

type chainAcc struct {
	v      *audit.Verifier
	broken string
	broker string // the last delivery's
}

func newBuilder(opts Options) *builder {
	b := &builder{opts: opts, minutes: map[int64]*Outcomes{}, seconds: map[int64]*Outcomes{}, sources: map[string]*sourceAcc{}, chains: map[string]*chainAcc{}}
	b.rep = Report{Generated: opts.Now().UTC(), Route: opts.Route, Store: opts.Store, ReadPath: opts.ReadPath,
		ConfigDigest: opts.ConfigDigest, BrokerChanges: []BrokerChange{}, Sources: []SourceFigures{}, Quarantine: []QuarantineItem{}}
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

func (b *builder) add(r *engine.AuditRecord) {
	b.verify(r)
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
	if !period || (b.opts.Route != "" && r.Route != b.opts.Route) {
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
	if r.Ref != 0 {
		b.rep.Totals.Released++
		src.fig.Released++
	} else {
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
		s = &sourceAcc{fig: SourceFigures{Route: r.Route, Source: slices.Clone(r.Source)}, gaps: map[string][]*openGap{}}
		if s.fig.Source == nil {
			s.fig.Source = []string{}
		}
		b.sources[id] = s
	}
	return s
}

// gap opens a gap for a record that skipped sequences and fills one for an
// applied record whose sequence lies in a gap opened in the period.
func (s *sourceAcc) gap(r *engine.AuditRecord, o engine.Outcome) {
	if r.Gap != nil {
		s.fig.GapsOpened++
		n := r.Gap.To - r.Gap.From + 1
		s.fig.MissingSequences += uint64(n)
		s.gaps[r.Epoch] = append(s.gaps[r.Epoch], &openGap{from: r.Gap.From, to: r.Gap.To, remaining: n})
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
}

// broker notes a delivery from another broker than its chain's last one.
func (b *builder) broker(r *engine.AuditRecord, period bool) {
	if r.Ref != 0 || r.Broker == "" || r.Outcome == engine.OutcomeDiscarded {
		return // an operator's action: its broker is the held message's
	}
	c := b.chain(r.Member)
	if r.Broker == c.broker {
		return
	}
	if period {
		b.rep.BrokerChanges = append(b.rep.BrokerChanges, BrokerChange{Time: r.Time.UTC(), Member: r.Member,
			Position: r.Position, From: c.broker, To: r.Broker})
	}
	c.broker = r.Broker
}

func (b *builder) chain(member string) *chainAcc {
	c := b.chains[member]
	if c == nil {
		v := audit.NewChainVerifier(member)
		if base := b.opts.Bases[member]; base.Position > 0 {
			v = audit.NewVerifierFrom(base, member)
		}
		c = &chainAcc{v: v}
		b.chains[member] = c
	}
	return c
}

func (b *builder) verify(r *engine.AuditRecord) {
	c := b.chain(r.Member)
	if c.broken != "" {
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
	slices.SortStableFunc(rep.Quarantine, func(x, y QuarantineItem) int { return x.Time.Compare(y.Time) })
	b.resolve()
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
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range members {
			if !yield(m) {
				return
			}
		}
	}) {
		c := b.chain(m)
		h := c.v.Head()
		st := ChainStatus{Member: m, Records: c.v.Count(), HeadPosition: h.Position, HeadHash: h.Hash.String(), Broken: c.broken}
		if want, ok := b.opts.Heads[m]; ok && st.Broken == "" && want != h {
			st.Broken = fmt.Sprintf("log ends at position %d but the chain head is at %d", h.Position, want.Position)
			if want.Position == h.Position {
				st.Broken = fmt.Sprintf("the last record's hash does not match the chain head at position %d", h.Position)
			}
		}
		if st.Broken != "" {
			v.Intact = false
		}
		v.Chains = append(v.Chains, st)
	}
	return v
}
