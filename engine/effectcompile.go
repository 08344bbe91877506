package engine

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/replayguard/replayguard/internal/sqltext"
)

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
