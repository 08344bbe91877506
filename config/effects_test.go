package config

import (
	"strings"
	"testing"
)

const pgStore = "store: {kind: postgres, url: \"postgres://u@127.0.0.1:5432/db\"}\n"

func effects(lines ...string) string {
	return "    effects:\n      - " + strings.Join(lines, "\n      - ") + "\n"
}

func TestSQLEffectRules(t *testing.T) {
	r := "routes[0] (r).effects[0]"
	meters := route("name: r", "topic: plant/+/energy", "source: [\"topic[1]\"]", "id: msgId")
	for _, tc := range []struct {
		name string
		file string
		want []string
	}{
		{"a statement with its args is valid on postgres",
			pgStore + meters + effects("{sql: \"INSERT INTO readings (meter, msg_id, kwh) VALUES ($1, $2, $3)\", args: [\"topic[1]\", msgId, kwh]}"), nil},
		{"the decision's own values are arguments",
			pgStore + meters + effects("{sql: \"INSERT INTO t VALUES ($1, $2, $3)\", args: [\"@key\", \"@route\", \"@topic\"]}"), nil},
		{"a quoted $9 is no parameter",
			pgStore + meters + effects("{sql: \"INSERT INTO t VALUES ($1, '$9')\", args: [kwh]}"), nil},
		{"sql on the embedded store is refused, saying why",
			meters + effects("{sql: \"INSERT INTO t VALUES ($1)\", args: [kwh]}"),
			[]string{"routes[0].effects[0].sql: sql runs in the same transaction as the decision's key, which only the postgres store has; store.kind is embedded: use kind postgres or a forward effect"}},
		{"too few args",
			pgStore + meters + effects("{sql: \"INSERT INTO t VALUES ($1, $2)\", args: [kwh]}"),
			[]string{r + ".args: the statement uses 2 parameters ($1 to $2) but args lists 1"}},
		{"an unknown @ argument",
			pgStore + meters + effects("{sql: \"INSERT INTO t VALUES ($1)\", args: [\"@offset\"]}"),
			[]string{r + `.args[0]: "@offset" is none of @key, @route, @topic, @sequence, @epoch`}},
		{"@sequence on an id route",
			pgStore + meters + effects("{sql: \"INSERT INTO t VALUES ($1)\", args: [\"@sequence\"]}"),
			[]string{r + `.args[0]: @sequence: route "r" has no sequence`}},
		{"a statement that ends the decision's transaction",
			pgStore + meters + effects("{sql: \"-- the row is in\\nCOMMIT\", args: []}"),
			[]string{r + ".sql: the statement begins with COMMIT, which controls the transaction: a sql effect runs inside the decision's own transaction, which replayguard commits with the message's key and audit record"}},
		{"an empty statement",
			pgStore + meters + effects("{sql: \" \", args: [kwh]}"),
			[]string{r + `.sql: sql is empty: write the statement, like "INSERT INTO readings (meter, kwh) VALUES ($1, $2)", and list its args`}},
		{"sql beside an entity in one item",
			pgStore + meters + effects("{entity: m, add: {kwh: kwh}, sql: \"SELECT 1\"}"),
			[]string{r + ": an effect is one of entity (with add, set, max, min), sql (with args) or forward: write each as its own list item"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkProblems(t, tc.file, tc.want...) })
	}
}

func TestForwardEffectRules(t *testing.T) {
	r := "routes[0] (r).effects[0].forward"
	meters := route("name: r", "topic: plant/+/energy", "source: [\"topic[1]\"]", "id: msgId")
	for _, tc := range []struct {
		name string
		file string
		want []string
	}{
		{"a topic template", meters + effects("forward: {topic: \"clean/{topic}\"}"), nil},
		{"a topic template with a path", meters + effects("forward: {topic: \"clean/{topic[1]}/{site}\"}"), nil},
		{"a webhook", meters + effects("forward: {webhook: \"https://billing.example/readings\"}"), nil},
		{"a subject", meters + effects("forward: {nats: \"clean.meters\"}"), nil},
		{"two targets", meters + effects("forward: {topic: a, nats: b}"),
			[]string{r + `: forward needs exactly one of topic, webhook, nats, like forward: {topic: "clean/{topic}"}`}},
		{"a wildcard topic", meters + effects("forward: {topic: \"clean/#\"}"),
			[]string{r + `.topic: template "clean/#" holds a wildcard or an unbalanced '}'`}},
		{"a webhook without a scheme", meters + effects("forward: {webhook: \"billing.example/readings\"}"),
			[]string{r + `.webhook: webhook "billing.example/readings" is not an http:// or https:// URL with a host`}},
		{"a webhook with a space", meters + effects("forward: {webhook: \"https://billing.example/meter readings\"}"),
			[]string{r + `.webhook: webhook "https://billing.example/meter readings" holds white space: write a space in a URL as %20`}},
		{"a webhook whose port is out of range", meters + effects("forward: {webhook: \"https://billing.example:0/readings\"}"),
			[]string{r + `.webhook: webhook "https://billing.example:0/readings": port "0" is not from 1 to 65535`}},
		{"a webhook with a placeholder", meters + effects("forward: {webhook: \"https://billing.example/readings/{topic[1]}\"}"),
			[]string{r + `.webhook: webhook holds a {…}: a webhook URL is fixed, not a template like a topic; each copy carries its route, source and key in its headers (Replayguard-Route, Replayguard-Source, Idempotency-Key)`}},
		{"a topic level out of range", meters + effects("forward: {topic: \"clean/{topic[7]}\"}"),
			[]string{r + `.topic: topic[7] is out of range: topic "plant/+/energy" has 3 levels, numbered from 0 (topic[0] to topic[2])`}},
		{"a subject of a path between two dots", meters + effects("forward: {nats: \"clean.{site}.{topic[1]}\"}"), nil},
		{"a subject with an empty token", meters + effects("forward: {nats: \"clean..{topic[1]}\"}"),
			[]string{r + `.nats: template "clean..{topic[1]}" makes an empty subject token ("..", or a "." at either end), which NATS refuses: every message of the route would be malformed`}},
		{"a subject ending in a dot", meters + effects("forward: {nats: \"clean.{topic[1]}.\"}"),
			[]string{r + `.nats: template "clean.{topic[1]}." makes an empty subject token ("..", or a "." at either end), which NATS refuses: every message of the route would be malformed`}},
		{"a subject beginning with a dot", meters + effects("forward: {nats: \".clean\"}"),
			[]string{r + `.nats: template ".clean" makes an empty subject token ("..", or a "." at either end), which NATS refuses: every message of the route would be malformed`}},
		{"a subject with a tab", meters + effects("forward: {nats: \"clean\\t{topic[1]}\"}"),
			[]string{r + `.nats: template "clean\t{topic[1]}" holds a wildcard or an unbalanced '}'`}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkProblems(t, tc.file, tc.want...) })
	}
}
