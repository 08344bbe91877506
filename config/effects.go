package config

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/replayguard/replayguard/internal/sqltext"
)

// SQLArgs are the arguments of a sql effect that name the decision's own
// values rather than a path.
var SQLArgs = []string{"@key", "@route", "@topic", "@sequence", "@epoch"}

func (e Effect) checkSQL(ps *problems, f field, r Route) {
	if strings.TrimSpace(e.SQL) == "" {
		ps.add(f.dot("sql"), "sql is empty: write the statement, like \"INSERT INTO readings (meter, kwh) VALUES ($1, $2)\", and list its args")
	}
	for i, a := range e.Args {
		af := f.dot("args").index(i)
		switch {
		case a == "":
			ps.add(af, "the argument is empty: name a payload path, topic[N] or one of %s", strings.Join(SQLArgs, ", "))
		case strings.HasPrefix(a, "@"):
			if !slices.Contains(SQLArgs, a) {
				ps.add(af, "%q is none of %s", a, strings.Join(SQLArgs, ", "))
			} else if (a == "@sequence" && r.Sequence == "") || (a == "@epoch" && r.Epoch == "") {
				ps.add(af, "%s: route %q has no %s", a, r.Name, a[1:])
			}
		default:
			checkRoutePath(ps, af, a, r)
		}
	}
	if w := sqltext.TransactionControl(e.SQL); w != "" {
		ps.add(f.dot("sql"), "the statement begins with %s, which controls the transaction: a sql effect runs inside the decision's own transaction, which replayguard commits with the message's key and audit record", w)
	}
	switch n := sqltext.HighestParam(e.SQL); {
	case n == len(e.Args) || strings.TrimSpace(e.SQL) == "":
	case n == 0:
		ps.add(f.dot("args"), "the statement uses no parameters ($1, $2, …) but args lists %d", len(e.Args))
	default:
		ps.add(f.dot("args"), "the statement uses %d parameters ($1 to $%d) but args lists %d", n, n, len(e.Args))
	}
}

func (fw Forward) check(ps *problems, f field, r Route) {
	n := 0
	for _, v := range []string{fw.Topic, fw.Webhook, fw.NATS} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		ps.add(f, "forward needs exactly one of topic, webhook, nats, like forward: {topic: \"clean/{topic}\"}")
		return
	}
	switch {
	case fw.Webhook != "":
		u, err := url.Parse(fw.Webhook)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			ps.add(f.dot("webhook"), "webhook %q is not an http:// or https:// URL with a host", shownURL(fw.Webhook))
		case strings.ContainsAny(fw.Webhook, " \t\r\n"):
			ps.add(f.dot("webhook"), "webhook %q holds white space: write a space in a URL as %%20", shownURL(fw.Webhook))
		case u.Port() != "" && !validPort(u.Port(), 1):
			ps.add(f.dot("webhook"), "webhook %q: port %q is not from 1 to 65535", shownURL(fw.Webhook), u.Port())
		case strings.ContainsAny(fw.Webhook, "{}"):
			// Every copy would go to the literal path, braces and all.
			ps.add(f.dot("webhook"), "webhook holds a {…}: a webhook URL is fixed, not a template like a topic; "+
				"each copy carries its route, source and key in its headers (Replayguard-Route, Replayguard-Source, Idempotency-Key)")
		}
	case fw.Topic != "":
		checkForwardTemplate(ps, f.dot("topic"), fw.Topic, r, "+#")
	default:
		if checkForwardTemplate(ps, f.dot("nats"), fw.NATS, r, " \t\r\n*>") && emptyToken(fw.NATS) {
			// NATS refuses every subject rendered from it: each message
			// of the route would be malformed.
			ps.add(f.dot("nats"), "template %q makes an empty subject token (\"..\", or a \".\" at either end), "+
				"which NATS refuses: every message of the route would be malformed", fw.NATS)
		}
	}
}

// emptyToken reports whether the literal text of subject template t makes
// an empty token, whatever its placeholders render to.
func emptyToken(t string) bool {
	var lit strings.Builder
	for t != "" {
		open := strings.IndexByte(t, '{')
		if open < 0 {
			lit.WriteString(t)
			break
		}
		lit.WriteString(t[:open])
		lit.WriteByte('x') // a placeholder renders to text, or the message is malformed
		t = t[open+strings.IndexByte(t[open:], '}')+1:]
	}
	s := lit.String()
	return strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..")
}

// checkForwardTemplate checks a topic or subject template: {topic} is the
// message's topic, other placeholders are paths; its literal text may not
// hold a wildcard. It reports whether the template's braces balance.
func checkForwardTemplate(ps *problems, f field, t string, r Route, wild string) bool {
	rest := t
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		lit := rest
		if open >= 0 {
			lit = rest[:open]
		}
		if strings.ContainsAny(lit, wild+"}") {
			ps.add(f, "template %q holds a wildcard or an unbalanced '}'", t)
			return false
		}
		if open < 0 {
			return true
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			ps.add(f, "template %q opens a placeholder it never closes", t)
			return false
		}
		if name := rest[open+1 : open+end]; name != "topic" {
			checkRoutePath(ps, f, name, r)
		}
		rest = rest[open+end+1:]
	}
	return true
}

// checkSQLStore refuses sql effects on every store but postgres: the
// statement must run in the same transaction as the decision's key.
func (c *Config) checkSQLStore(ps *problems) {
	if c.Store.Kind == StorePostgres {
		return
	}
	for i, r := range c.Routes {
		for j, e := range r.Effects {
			if e.SQL != "" || len(e.Args) > 0 {
				ps.add(field{}.dot("routes").index(i).dot("effects").index(j).dot("sql"),
					"sql runs in the same transaction as the decision's key, which only the postgres store has; store.kind is %s: use kind postgres or a forward effect", c.Store.Kind)
			}
		}
	}
}

// fieldOp is one operation of an entity effect: its name and its fields'
// payload paths.
type fieldOp struct {
	name   string
	fields map[string]string
}

func (e Effect) ops() []fieldOp {
	return []fieldOp{{"add", e.Add}, {"set", e.Set}, {"max", e.Max}, {"min", e.Min}}
}

// checkSharedFields refuses two effects of r writing one field of one entity
// template by different operations, or both by set: the second would lose to
// the first, recorded as older than the field's value. The same add, max or
// min twice is kept: each applies.
func (r Route) checkSharedFields(ps *problems, f field) {
	type writer struct {
		effect int
		op     string
	}
	first := map[[2]string]writer{}
	for j, e := range r.Effects {
		if e.Entity == "" {
			continue
		}
		for _, op := range e.ops() {
			for _, name := range slices.Sorted(maps.Keys(op.fields)) {
				k := [2]string{e.Entity, name}
				w, ok := first[k]
				switch {
				case !ok:
					first[k] = writer{j, op.name}
				case w.effect == j: // refused by Effect.check
				case w.op != op.name || op.name == "set":
					ps.add(f.dot("effects").index(j).dot(op.name).dot(name),
						"field %q of entity %q is also written by effects[%d].%s.%s: both would write one value for each message, "+
							"and one would undo or lose to the other; write the field in one effect, or name another field", name, e.Entity, w.effect, w.op, name)
				}
			}
		}
	}
}
