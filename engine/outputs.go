package engine

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/replayguard/replayguard/internal/sqltext"
)

// ForwardSpec is a forward effect: where an applied message's original
// bytes go after its commit, through the outbox. Exactly one field is set.
type ForwardSpec struct {
	// Topic is an MQTT topic template: "{topic}" is the message's own
	// topic, other placeholders are paths, like an entity template.
	Topic string
	// Webhook is a URL the payload is POSTed to.
	Webhook string
	// NATS is a JetStream subject template, like Topic.
	NATS string
}

// Output kinds of an outbox entry.
const (
	OutputMQTT    = "mqtt"
	OutputWebhook = "webhook"
	OutputNATS    = "nats"
)

// SQLStatement is one sql effect of an applied message. The store runs
// the batch's statements in the batch's own transaction, in order; a store
// that cannot run them refuses a route that has any (see Capabilities.SQL).
type SQLStatement struct {
	Key    Hash   // the message's idempotency key: a refusal names it
	Route  string // the route and the index of the effect, for messages
	Effect int
	SQL    string
	Args   []SQLArg
	// Run is which of the effect's runs for its message this is, from 1,
	// of Runs: a message that carries several values of a path the
	// statement reads (SetReadings) runs it once for each, in the
	// message's order. Both are 0 for a statement run once.
	Run, Runs int
}

// SQLArg is one argument of a statement, with its JSON meaning kept.
type SQLArg struct {
	Kind ArgKind
	Text string // exact decimal text of a number, the string, "true"/"false"
}

// ArgKind says what an SQLArg holds.
type ArgKind uint8

// The argument kinds.
const (
	ArgNull   ArgKind = iota // JSON null, or a path absent in the message
	ArgNumber                // a JSON number, as exact decimal text
	ArgString
	ArgBool
)

// SQLRefusals is what a store passes back through Rows when a statement
// failed because of its message (SQLSTATE class 22 or 23): the message's
// key and the reason, naming the SQLSTATE and the database's words. The
// batch is decided again and a message whose key is refused is quarantined
// instead of applied; the rest of the batch commits.
type SQLRefusals map[Hash]string

// OutboxEntry is one forward effect of an applied message, written in the
// decision's commit and delivered after it by a drainer, at least once, in
// ID order. Every copy carries Key.
type OutboxEntry struct {
	ID       uint64    `json:"id"`     // audit position << 8 | the forward's index in its route
	Output   string    `json:"output"` // OutputMQTT, OutputWebhook or OutputNATS
	Target   string    `json:"target"` // topic, URL or subject
	Route    string    `json:"route"`
	Topic    string    `json:"topic"` // the message's own topic
	Source   []string  `json:"source"`
	Key      Hash      `json:"key"`
	Epoch    string    `json:"epoch,omitempty"`
	Sequence int64     `json:"sequence"` // -1 on an unsequenced route
	Time     time.Time `json:"time"`     // when it was decided
	Payload  []byte    `json:"payload"`
}

// OutboxID is the ID of the outbox entry of forward index i of the
// decision at audit position pos.
func OutboxID(pos uint64, i int) uint64 { return pos<<8 | uint64(i) }

// maxForwards caps a route's forward effects: OutboxID keeps 8 bits for
// the index.
const maxForwards = 256

// OutboxHold moves an entry its downstream refused for good (a webhook's
// 4xx) out of the pending outbox, keeping it with the reason for an
// operator. Member is the outbox's member ("" on a single-owner store).
type OutboxHold struct {
	Member string `json:"member,omitempty"`
	ID     uint64 `json:"id"`
	Reason string `json:"reason"`
	// Output is the entry's output kind (OutputMQTT, …), for the
	// observers' counts; the stores need it not.
	Output string `json:"output,omitempty"`
	// Pending is set on an operator's hold of an entry it read pending
	// (Engine.HoldPending): an entry no longer pending when the batch is
	// written (the drainer delivered it meanwhile) fails the whole batch
	// with ErrNotFound, nothing of it written. Unset (the drainer's own
	// hold), such an entry is left alone.
	Pending bool `json:"pending,omitempty"`
}

// OutboxResolve is an operator's resolution of a held entry of member's
// outbox ("" on a single-owner store): Requeue puts it back into the
// pending outbox, with its ID and bytes unchanged, for the drainer to
// deliver again; otherwise it is dropped for good.
type OutboxResolve struct {
	Member  string `json:"member,omitempty"`
	ID      uint64 `json:"id"`
	Requeue bool   `json:"requeue"`
}

// OutboxStore keeps the outbox. On a single-owner store member is always
// "". Each member's entries are delivered by one drainer at a time.
type OutboxStore interface {
	// Outbox returns up to limit pending entries of member's outbox with
	// ID > after, in ID order.
	Outbox(ctx context.Context, member string, after uint64, limit int) ([]OutboxEntry, error)
	// OutboxDone removes delivered entries; IDs no longer pending are
	// ignored.
	OutboxDone(ctx context.Context, member string, ids []uint64) error
	// OutboxDepth counts member's pending entries.
	OutboxDepth(ctx context.Context, member string) (int, error)
	// OutboxHeld returns the held entries of every member, with why.
	OutboxHeld(ctx context.Context) ([]HeldEntry, error)
}

// OutboxClaimer is implemented by the shared stores (and the members of
// the group store in memory): it says whose outboxes this handle's
// drainer may drain now, so that each member's outbox is drained by one
// process at a time, and a dead member's by another.
//
// A claim is one member's outbox, held by one handle for ClaimTTL unless
// renewed. ClaimOutboxes takes or renews, and returns sorted by member id:
//   - the claim of the handle's own member, unless another live handle
//     holds it (one that took it over while this member was dead);
//   - the claim of every other member that has pending entries and whose
//     member lease is expired or free, when that claim is free, expired or
//     already this handle's. Once such a member holds its lease again
//     (it restarted) its claim is no longer renewed or returned here: its
//     own drainer gets it back when this handle releases it, or within
//     ClaimTTL. A restarted member is never refused start for it.
//
// A handle whose member's lease another process has taken (it stalled past
// the lease) claims nothing, its own member's outbox included: it answers
// none, and its drainer stops and releases what it drained, for the
// lease's holder to take.
//
// The drainer calls ClaimOutboxes at least every ClaimTTL/3, drains only
// the members of its last answer, stops draining a member missing from it
// and, once those lanes stopped, calls ReleaseOutbox, which gives up the
// claim at once (also when a member's outbox is drained empty). When its
// claims cannot be renewed it stops draining with a third of ClaimTTL
// left since the last renewal. Close releases the handle's claims;
// those of a killed process expire. The claim spares duplicate deliveries;
// it does not fence Outbox, OutboxDone or holds: a drainer stalled beyond
// ClaimTTL may overlap the next claimant, which delivery at least once, each
// copy keyed, tolerates. A read-only handle claims nothing: ClaimOutboxes
// and ReleaseOutbox fail. Safe for concurrent use.
type OutboxClaimer interface {
	// ClaimOutboxes takes or renews this handle's claims and returns the
	// members whose outboxes it may drain now.
	ClaimOutboxes(ctx context.Context) ([]string, error)
	// ReleaseOutbox gives up this handle's claim of member's outbox; a
	// claim it does not hold is left alone.
	ReleaseOutbox(ctx context.Context, member string) error
	// ClaimTTL is how long a claim holds without renewal.
	ClaimTTL() time.Duration
}

// CheckOutbox checks the outbox entries of a batch, as every store does
// before writing anything: their IDs ascend and each names one of the
// batch's own audit records (OutboxID of its position), so an entry is
// never written twice; and that no held entry is resolved twice. A bad
// entry is an error wrapping ErrOutboxID.
func CheckOutbox(b *Batch) error {
	if err := checkResolved(b.OutboxResolved); err != nil {
		return err
	}
	if len(b.Outbox) == 0 {
		return nil
	}
	var first, last uint64
	if n := len(b.Audit); n > 0 {
		first, last = b.Audit[0].Position, b.Audit[n-1].Position
	}
	prev := uint64(0)
	for i := range b.Outbox {
		id := b.Outbox[i].ID
		if pos := id >> 8; pos == 0 || pos < first || pos > last {
			return fmt.Errorf("%w: entry %d names position %d, outside the batch's records %d..%d", ErrOutboxID, id, pos, first, last)
		}
		if i > 0 && id <= prev {
			return fmt.Errorf("%w: entry %d after entry %d", ErrOutboxID, id, prev)
		}
		prev = id
	}
	return nil
}

// checkResolved refuses two resolutions of one held entry in a batch.
func checkResolved(rs []OutboxResolve) error {
	if len(rs) < 2 {
		return nil
	}
	seen := make(map[OutboxResolve]bool, len(rs))
	for _, r := range rs {
		r.Requeue = false
		if seen[r] {
			return fmt.Errorf("%w: held entry %d of member %q resolved twice", ErrOutboxID, r.ID, r.Member)
		}
		seen[r] = true
	}
	return nil
}

// HeldEntry is an outbox entry its downstream refused, kept for an
// operator.
type HeldEntry struct {
	OutboxEntry
	Member string `json:"member,omitempty"`
	Reason string `json:"reason"`
}

// OutcomeForwardHeld is the audit outcome of an outbox entry its
// downstream refused for good, held for an operator.
const OutcomeForwardHeld = "forward_held"

// HoldForward records that entry of member's outbox was refused by its
// downstream for good: an audit record (outcome forward_held, ref the
// entry, the reason with the downstream's answer) and the entry moved to
// the held entries, in one commit.
func (e *Engine) HoldForward(ctx context.Context, member string, entry OutboxEntry, reason string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.ready(ctx); err != nil {
		return err
	}
	hold := func(now time.Time) {
		r := AuditRecord{Time: now.UTC(), Route: entry.Route, Topic: entry.Topic, Source: entry.Source,
			Epoch: entry.Epoch, Key: entry.Key, Outcome: OutcomeForwardHeld,
			Reason: fmt.Sprintf("%s %s: %s", entry.Output, RedactTarget(entry.Output, entry.Target), reason), Ref: entry.ID}
		if entry.Sequence >= 0 {
			s := entry.Sequence
			r.Sequence = &s
		}
		e.appendAudit(&r)
		e.pending.batch.OutboxHeld = append(e.pending.batch.OutboxHeld, OutboxHold{Member: member, ID: entry.ID, Reason: r.Reason, Output: entry.Output})
	}
	return e.act(ctx, nil, hold)
}

// RedactTarget returns an entry's target as an audit record, a reason or a
// log line shows it: a webhook URL without its user information (a
// webhook's credentials, a password or a token as the user, are in its
// URL), anything else as it is.
func RedactTarget(output, target string) string {
	if output != OutputWebhook {
		return target
	}
	if u, err := url.Parse(target); err == nil && u.User != nil {
		u.User = url.User("xxxxx")
		return u.String()
	}
	return target
}

// sqlEffect is a compiled sql effect.
type sqlEffect struct {
	stmt string
	args []argRef
}

// argRef is one statement argument: a route path, or one of the
// decision's own values.
type argRef struct {
	meta string // "@key", "@route", "@topic", "@sequence", "@epoch"; "" for a path
	src  int    // index into route.paths when meta is ""
}

// sqlMeta are the arguments that name the decision's own values.
var sqlMeta = []string{"@key", "@route", "@topic", "@sequence", "@epoch"}

// forwardEffect is a compiled forward effect.
type forwardEffect struct {
	output string
	url    string     // webhook
	target []tmplPart // topic or subject; src wholeTopic is the message's topic
	tmpl   string     // the template target is compiled from
	index  int        // among the route's forwards
	// skipped is set once an applied message went without this forward
	// (a field its template names absent or null), which is logged once.
	skipped atomic.Bool
}

// ownsDollar reports whether the template itself begins with $: only then
// may a rendered topic or subject begin with it.
func (f *forwardEffect) ownsDollar() bool {
	return len(f.target) > 0 && f.target[0].src < 0 && f.target[0].src != wholeTopic && strings.HasPrefix(f.target[0].lit, "$")
}

// wholeTopic in a forward template's tmplPart is the message's own topic.
const wholeTopic = -2

func (c *route) compileSQL(e EffectSpec) (*sqlEffect, error) {
	if strings.TrimSpace(e.SQL) == "" {
		return nil, fmt.Errorf("sql: empty statement")
	}
	if w := sqltext.TransactionControl(e.SQL); w != "" {
		return nil, fmt.Errorf("sql: the statement begins with %s, which controls the transaction: it runs inside the decision's own, which commits it with the message's key and audit record", w)
	}
	s := &sqlEffect{stmt: e.SQL}
	for i, a := range e.Args {
		if strings.HasPrefix(a, "@") {
			ok := false
			for _, m := range sqlMeta {
				ok = ok || a == m
			}
			if !ok {
				return nil, fmt.Errorf("args[%d]: %q is none of %s", i, a, strings.Join(sqlMeta, ", "))
			}
			if (a == "@sequence" && c.Sequence == "") || (a == "@epoch" && c.Epoch == "") {
				return nil, fmt.Errorf("args[%d]: %s on a route without %s", i, a, a[1:])
			}
			s.args = append(s.args, argRef{meta: a})
			continue
		}
		src, err := c.ref(a)
		if err != nil {
			return nil, fmt.Errorf("args[%d]: %v", i, err)
		}
		s.args = append(s.args, argRef{src: src})
	}
	return s, nil
}

func (c *route) compileForward(f ForwardSpec) (*forwardEffect, error) {
	fe := &forwardEffect{}
	n := 0
	for _, t := range []struct{ out, val string }{{OutputMQTT, f.Topic}, {OutputWebhook, f.Webhook}, {OutputNATS, f.NATS}} {
		if t.val == "" {
			continue
		}
		n++
		fe.output = t.out
		if t.out == OutputWebhook {
			fe.url = t.val
			continue
		}
		parts, err := c.forwardTemplate(t.val)
		if err != nil {
			return nil, fmt.Errorf("forward.%s: %v", map[string]string{OutputMQTT: "topic", OutputNATS: "nats"}[t.out], err)
		}
		fe.target, fe.tmpl = parts, t.val
	}
	if n != 1 {
		return nil, fmt.Errorf("forward: set exactly one of topic, webhook, nats")
	}
	return fe, nil
}

// forwardTemplate compiles a topic or subject template: an entity
// template in which {topic} is the message's own topic.
func (c *route) forwardTemplate(t string) ([]tmplPart, error) {
	parts, err := c.templateWith("template", t, func(name string) (int, bool) { return wholeTopic, name == "topic" })
	if err != nil {
		return nil, err
	}
	return parts, nil
}

// renderTarget renders a forward's topic or subject, or reports false when
// a field it names is absent or null (the forward is skipped, like an
// entity effect).
func renderTarget(f *forwardEffect, vals []value, topic string) (string, bool) {
	if f.output == OutputWebhook {
		return f.url, true
	}
	var b []byte
	for _, p := range f.target {
		switch {
		case p.src == wholeTopic:
			b = append(b, topic...)
		case p.src < 0:
			b = append(b, p.lit...)
		default:
			v := vals[p.src]
			if v.kind == vAbsent || v.kind == vNull {
				return "", false
			}
			b = append(b, v.text...)
		}
	}
	return string(b), true
}

// absentField returns the first path f's template names that is absent or
// null in vals: why renderTarget skipped the forward.
func (c *route) absentField(f *forwardEffect, vals []value) string {
	for _, p := range f.target {
		if p.src >= 0 && (vals[p.src].kind == vAbsent || vals[p.src].kind == vNull) {
			return c.paths[p.src].text
		}
	}
	return ""
}

// maxTopicSeparators is how many '/' an MQTT topic may hold: Mosquitto
// answers a PUBLISH to a topic with more (its TOPIC_HIERARCHY_LIMIT) by
// closing the connection, at every attempt.
const maxTopicSeparators = 200

// checkTarget says why a rendered topic or subject cannot be published to,
// or returns "".
func checkTarget(output, t string) string {
	switch {
	case t == "":
		return "is empty"
	case len(t) > maxIdentityBytes*4:
		return fmt.Sprintf("is %d bytes, over %d", len(t), maxIdentityBytes*4)
	case output == OutputMQTT && strings.ContainsAny(t, "+#\x00"):
		return fmt.Sprintf("%q holds a wildcard or NUL", t)
	case output == OutputMQTT && !mqttText(t):
		return fmt.Sprintf("%q holds a control character, a noncharacter or bytes that are not UTF-8, which a broker answers by closing the connection", t)
	case output == OutputMQTT && strings.Count(t, "/") > maxTopicSeparators:
		return fmt.Sprintf("%.64q... has %d levels, over the %d Mosquitto takes (it answers a publish to more by closing the connection)",
			t, strings.Count(t, "/")+1, maxTopicSeparators+1)
	case output == OutputNATS && (strings.ContainsAny(t, " \t\r\n*>") || strings.Contains(t, "..") ||
		strings.HasPrefix(t, ".") || strings.HasSuffix(t, ".")):
		return fmt.Sprintf("%q is not a valid subject", t)
	}
	return ""
}

// mqttText reports whether t is UTF-8 without the code points a broker may
// refuse in a topic (MQTT 5 section 1.5.4; Mosquitto closes the connection
// on them): the controls U+0001..U+001F and U+007F..U+009F, and the
// noncharacters U+FDD0..U+FDEF and U+nFFFE, U+nFFFF.
func mqttText(t string) bool {
	if !utf8.ValidString(t) {
		return false
	}
	for _, r := range t {
		if r <= 0x1F || refusedRune(r) {
			return false
		}
	}
	return true
}

// sourceText is mqttText for a source part, which goes out inside a JSON
// array: the controls U+0000..U+001F are escaped there, the others not.
func sourceText(s string) bool {
	for _, r := range s {
		if refusedRune(r) {
			return false
		}
	}
	return true // invalid UTF-8 goes out as U+FFFD
}

// refusedRune: the controls U+007F..U+009F and the noncharacters.
func refusedRune(r rune) bool {
	return r >= 0x7F && r <= 0x9F || r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE
}

// checkMeta says why the source or epoch of a message with forward
// effects cannot travel as its copies' metadata, or returns "". They are
// the producer's text and every copy carries them (replayguard-source,
// replayguard-epoch): as MQTT 5 user properties, which a broker answers by
// closing the connection when they hold what mqttText refuses, and as HTTP
// headers, which net/http refuses to send with a control character. Either
// way each attempt fails alike and the lane waits behind the entry for
// good, so the message is malformed at its decision instead, as a topic
// would be. The source goes out as a JSON array, which escapes U+0000..U+001F.
func (d *Delivery) checkMeta() string {
	if !slices.ContainsFunc(d.targets, func(t string) bool { return t != "" }) {
		return "" // every forward skipped: no copy carries them
	}
	if !d.epochNum && d.epoch != "" && !mqttText(d.epoch) {
		return fmt.Sprintf("epoch %q holds a control character, a noncharacter or bytes that are not UTF-8, which its copies' replayguard-epoch cannot carry", d.epoch)
	}
	for _, s := range d.source {
		if !sourceText(s) {
			return fmt.Sprintf("source %q holds a control character or a noncharacter, which its copies' replayguard-source cannot carry", s)
		}
	}
	return ""
}

// sqlArgs renders a statement's arguments for d: for run j (from 0) of a
// statement run once for each of the several values d carries of a path
// it reads (sqlRuns), each such path's value j, and every other
// argument's value.
func sqlArgs(s *sqlEffect, d *Delivery, topic string, run, runs int) []SQLArg {
	out := make([]SQLArg, len(s.args))
	for i, a := range s.args {
		switch a.meta {
		case "":
			v := d.vals[a.src]
			if runs > 1 && d.readings(a.src) == runs {
				v = d.reading(a.src, run)
			}
			switch v.kind {
			case vNumber:
				out[i] = SQLArg{Kind: ArgNumber, Text: strings.Clone(v.text)}
			case vString:
				out[i] = SQLArg{Kind: ArgString, Text: strings.Clone(v.text)}
			case vBool:
				out[i] = SQLArg{Kind: ArgBool, Text: v.text}
			}
		case "@key":
			out[i] = SQLArg{Kind: ArgString, Text: d.key.String()}
		case "@route":
			out[i] = SQLArg{Kind: ArgString, Text: d.route.Name}
		case "@topic":
			out[i] = SQLArg{Kind: ArgString, Text: topic}
		case "@sequence":
			out[i] = SQLArg{Kind: ArgNumber, Text: fmt.Sprint(d.seq)}
		case "@epoch":
			kind := ArgString
			if d.epochNum {
				kind = ArgNumber
			}
			out[i] = SQLArg{Kind: kind, Text: strings.Clone(d.epoch)}
		}
	}
	return out
}

// sqlRuns is how many times sql effect s runs for d: once, or, when d
// carries several values of a path s reads (SetReadings: a Sparkplug
// payload holding a metric more than once, as an edge forwarding what it
// stored sends it), once for each. paths are the arguments' paths that
// carry them. Two such paths that carry different numbers of values
// cannot be run together: err says so (checkRuns makes that delivery
// malformed before it is decided).
func (d *Delivery) sqlRuns(s *sqlEffect) (runs int, paths []int, err error) {
	runs = 1
	if d.more == nil || len(*d.more) == 0 {
		return runs, nil, nil
	}
	for _, a := range s.args {
		if a.meta != "" || slices.Contains(paths, a.src) {
			continue
		}
		n := d.readings(a.src)
		switch {
		case n < 2:
		case len(paths) == 0:
			runs, paths = n, append(paths, a.src)
		case n != runs:
			r := d.route
			return 0, nil, fmt.Errorf("%s carries %d values and %s %d: which of them one run of the statement takes together cannot be told",
				r.paths[paths[0]].text, runs, r.paths[a.src].text, n)
		default:
			paths = append(paths, a.src)
		}
	}
	return runs, paths, nil
}

// checkRuns refuses a delivery whose values no sql effect of its route can
// be run with (sqlRuns).
func (d *Delivery) checkRuns() error {
	if d.route.sqls == 0 || d.more == nil || len(*d.more) == 0 {
		return nil
	}
	for i, ef := range d.route.effects {
		if ef.sql == nil {
			continue
		}
		if _, _, err := d.sqlRuns(ef.sql); err != nil {
			return malformed("sql effects[%d]: %v", i, err)
		}
	}
	return nil
}

// readings is how many values d carries of path i (SetReadings): 0 when
// it carries it at most once, and not flagged historical.
func (d *Delivery) readings(i int) int {
	n := 0
	if d.more != nil {
		for _, r := range *d.more {
			if r.path == i {
				n++
			}
		}
	}
	return n
}

// reading is value j (from 0) of those d carries of path i.
func (d *Delivery) reading(i, j int) value {
	for _, r := range *d.more {
		if r.path == i {
			if j == 0 {
				return r.v
			}
			j--
		}
	}
	return value{} // j within readings(i); unreachable
}

// sqlRunsNote says, for a decision's reason, that sql effect i ran runs
// times, once for each value of paths.
func (d *Delivery) sqlRunsNote(i, runs int, paths []int) string {
	names := make([]string, len(paths))
	for j, p := range paths {
		names[j] = d.route.paths[p].text
	}
	list := names[len(names)-1]
	if len(names) > 1 {
		list = strings.Join(names[:len(names)-1], ", ") + " and " + list
	}
	return fmt.Sprintf("sql effects[%d] ran %d times, once for each value of %s", i, runs, list)
}
