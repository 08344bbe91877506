package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// route returns a config file with one route made of the given lines.
func route(lines ...string) string {
	return "routes:\n  - " + strings.Join(lines, "\n    ") + "\n"
}

// problemsOf parses file and returns its problems as "path: message".
func problemsOf(t *testing.T, file string) []string {
	t.Helper()
	_, err := Parse([]byte(file), "f.yaml", nil)
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error is %T, not *ValidationError: %v", err, err)
	}
	var out []string
	for _, p := range ve.Problems {
		out = append(out, p.String())
	}
	return out
}

func checkProblems(t *testing.T, file string, want ...string) {
	t.Helper()
	got := problemsOf(t, file)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n  got  %q\n  want %q", got, want)
	}
}

const ok = "name: r\n    topic: a/+/c\n    source: [dev]\n    sequence: seq"

func TestRouteRules(t *testing.T) {
	r := "routes[0] (r)"
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"a complete sequenced route is valid", route(ok), nil},
		{"an id route is valid", route("name: r", "topic: a/#", "source: [dev]", "id: msg.id"), nil},
		{"an epoch with a sequence is valid", route(ok, "epoch: boot"), nil},
		{"qos 2 is allowed", route(ok, "qos: 2"), nil},
		{"an empty name is refused", route("topic: a", "source: [d]", "id: i"),
			[]string{"routes[0].name: name is empty: every route needs a unique name"}},
		{"a name with a space is refused", route("name: my route", "topic: a", "source: [d]", "id: i"),
			[]string{`routes[0] (my route).name: name "my route" may hold only letters, digits, '_', '.' and '-' (at most 64)`}},
		{"a name of 65 bytes is refused", route("name: "+strings.Repeat("r", 65), "topic: a", "source: [d]", "id: i"),
			[]string{`routes[0] (` + strings.Repeat("r", 65) + `).name: name "` + strings.Repeat("r", 65) + `" may hold only letters, digits, '_', '.' and '-' (at most 64)`}},
		{"a name of 64 bytes is valid", route("name: "+strings.Repeat("r", 64), "topic: a/#", "source: [dev]", "id: msg.id"), nil},
		{"a name used twice is refused", route(ok) + "  - " + strings.ReplaceAll(ok, "\n    ", "\n    "),
			[]string{`routes[1] (r).name: name "r" is already used by routes[0]`}},
		{"an empty topic is refused", route("name: r", "source: [d]", "id: i"),
			[]string{r + ".topic: topic is empty: set an MQTT topic filter, like plant/+/energy"}},
		{"'#' before the last level is refused", route("name: r", "topic: a/#/c", "source: [d]", "id: i"),
			[]string{r + `.topic: invalid topic filter: "a/#/c": '#' must be alone in the last level, like a/b/#`}},
		{"'+' sharing a level is refused", route("name: r", "topic: a/b+", "source: [d]", "id: i"),
			[]string{r + `.topic: invalid topic filter: "a/b+": '+' must be alone in its level, like a/+/c`}},
		{"a $share prefix is refused", route("name: r", "topic: $share/g/a", "source: [d]", "id: i"),
			[]string{r + `.topic: topic "$share/g/a" starts with $share/: write the plain filter and set mqtt.share_group`}},
		{"a missing source is refused", route("name: r", "topic: a", "id: i"),
			[]string{r + ".source: source is empty: list the payload paths or topic[N] levels that identify the producer, like [agency, source_id]"}},
		{"a source listed twice is refused", route("name: r", "topic: a", "source: [d, d]", "id: i"),
			[]string{r + `.source[1]: "d" is listed twice`}},
		{"a source with an empty segment is refused", route("name: r", "topic: a", "source: [a..b]", "id: i"),
			[]string{r + `.source[0]: invalid path: "a..b" has an empty segment: write dotted names like a.b.c`}},
		{"a topic level beyond the filter is refused", route("name: r", "topic: a/+", "source: ['topic[2]']", "id: i"),
			[]string{r + `.source[0]: topic[2] is out of range: topic "a/+" has 2 levels, numbered from 0 (topic[0] to topic[1])`}},
		{"any topic level is accepted under '#'", route("name: r", "topic: a/#", "source: ['topic[9]']", "id: i"), nil},
		{"a negative topic level is refused", route("name: r", "topic: a", "source: ['topic[-1]']", "id: i"),
			[]string{r + `.source[0]: invalid path: "topic[-1]": the level in topic[N] is a whole number from 0, like topic[1]`}},
		{"neither sequence nor id is refused", route("name: r", "topic: a", "source: [d]"),
			[]string{r + ": neither sequence nor id is set: a route needs one to build an idempotency key"}},
		{"a sequence that is not a string is reported once, not again as missing", route("name: r", "topic: a", "source: [d]", "sequence: [a, b]", "epoch: e"),
			[]string{r + ".sequence: want a string, got a list"}},
		{"an id that is not a string is reported once, not again as missing", route("name: r", "topic: a", "source: [d]", "id: {x: 1}"),
			[]string{r + ".id: want a string, got a mapping"}},
		{"sequence and id together are refused", route(ok, "id: i"),
			[]string{r + ": both sequence and id are set: the idempotency key would be ambiguous; drop id to deduplicate by (source, epoch, sequence), or drop sequence to deduplicate by id"}},
		{"an epoch without a sequence is refused", route("name: r", "topic: a", "source: [d]", "id: i", "epoch: b"),
			[]string{r + ".epoch: epoch is set without sequence: an epoch only orders sequences; drop epoch or set sequence"}},
		{"a bracketed sequence path is refused", route("name: r", "topic: a", "source: [d]", "sequence: 'x[0]'"),
			[]string{r + `.sequence: invalid path: "x[0]": only topic[N] uses brackets; payload paths are dotted names like a.b.c`}},
		{"an id beyond the filter's levels is refused", route("name: r", "topic: a", "source: [d]", "id: 'topic[1]'"),
			[]string{r + `.id: topic[1] is out of range: topic "a" has 1 levels, numbered from 0 (topic[0] to topic[0])`}},
		{"qos 0 is refused", route(ok, "qos: 0"),
			[]string{r + ".qos: qos 0 is refused: exactly-once needs acknowledged delivery; use 1 or 2"}},
		{"qos 3 is refused", route(ok, "qos: 3"), []string{r + ".qos: qos must be 1 or 2, got 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkProblems(t, tt.file, tt.want...) })
	}
}

func TestEffectRules(t *testing.T) {
	e := "routes[0] (r).effects[0]"
	effect := func(lines ...string) string {
		return route(ok, "effects:\n      - "+strings.Join(lines, "\n        "))
	}
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"an effect with a templated entity is valid", effect("entity: 'x/{topic[1]}/{a.b}'", "add: {n: n}", "set: {s: s}", "max: {hi: v}", "min: {lo: v}"), nil},
		{"an entity without placeholders is valid", effect("entity: total", "add: {n: n}"), nil},
		{"an empty entity is refused", effect("add: {n: n}"),
			[]string{e + `.entity: entity is empty: name the entity, like "meter/{topic[1]}"`}},
		{"an unclosed placeholder is refused", effect("entity: 'x/{id'", "add: {n: n}"),
			[]string{e + `.entity: invalid entity template: "x/{id": '{' without a matching '}'`}},
		{"a stray closing brace is refused", effect("entity: 'x/id}'", "add: {n: n}"),
			[]string{e + `.entity: invalid entity template: "x/id}": '}' without '{'`}},
		{"an empty placeholder is refused", effect("entity: 'x/{}'", "add: {n: n}"),
			[]string{e + `.entity: invalid entity template: "x/{}": empty placeholder {}`}},
		{"a placeholder with a bad path is refused", effect("entity: 'x/{a..b}'", "add: {n: n}"),
			[]string{e + `.entity: invalid entity template: "x/{a..b}": placeholder {a..b}: invalid path: "a..b" has an empty segment: write dotted names like a.b.c`}},
		{"a placeholder beyond the filter's levels is refused", effect("entity: 'x/{topic[5]}'", "add: {n: n}"),
			[]string{e + `.entity: placeholder {topic[5]} is out of range: topic "a/+/c" has 3 levels, numbered from 0 (topic[0] to topic[2])`}},
		{"an effect without operations is refused", effect("entity: x"),
			[]string{e + ": effect has no fields: set at least one of add, set, max, min, like add: {kwh: kwh}"}},
		{"an operation without fields is refused", effect("entity: x", "add: {}"),
			[]string{e + ": effect has no fields: set at least one of add, set, max, min, like add: {kwh: kwh}"}},
		{"an empty field name is refused", effect("entity: x", "add: {'': n}"),
			[]string{e + ".add: a field name is empty"}},
		{"an empty payload path is refused", effect("entity: x", "add: {n: ''}"),
			[]string{e + ".add.n: the payload path is empty"}},
		{"a bad payload path is refused", effect("entity: x", "set: {n: 'a.'}"),
			[]string{e + `.set.n: invalid path: "a." has an empty segment: write dotted names like a.b.c`}},
		{"a field under two operations is refused", effect("entity: x", "add: {n: a}", "max: {n: b}"),
			[]string{e + `.max.n: field "n" is already set by add in this effect: a field takes one operation`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkProblems(t, tt.file, tt.want...) })
	}
}

func TestComponentRules(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"an unknown store kind is refused", "store: {kind: sqlite}",
			[]string{`store.kind: kind "sqlite" is not one of memory, embedded, redis, postgres`}},
		{"redis without a url is refused", "store: {kind: redis}", []string{"store.url: url is required for kind redis"}},
		{"postgres without a url is refused", "store: {kind: postgres}", []string{"store.url: url is required for kind postgres"}},
		{"a redis url with another scheme is refused", "store: {kind: redis, url: 'http://h:6379'}",
			[]string{`store.url: url scheme "http" does not fit kind redis: want redis:// or rediss:// or unix:// or redis+sentinel://`}},
		{"a redis url listing sentinels is accepted", "store: {kind: redis, url: 'redis+sentinel://u:p@s-1:26379,s-2/mymaster/0'}", nil},
		{"a postgres connection string is accepted", "store: {kind: postgres, url: 'host=h dbname=d'}", nil},
		{"a postgres url is accepted", "store: {kind: postgres, url: 'postgres://u:p@h/d'}", nil},
		{"a group member on postgres is accepted", "store: {kind: postgres, url: 'postgres://h/d', member: rg-1, schema: plant_a}", nil},
		{"a member id with a space is refused", "store: {kind: postgres, url: 'postgres://h/d', member: 'rg 1'}",
			[]string{`store.member: member id "rg 1" holds a space or control character`}},
		{"a quoted schema name is refused", "store: {kind: postgres, url: 'postgres://h/d', schema: Plant-A}",
			[]string{`store.schema: schema "Plant-A" is not a plain PostgreSQL name: lowercase letters, digits and _, not starting with a digit, at most 63`}},
		{"cached rows on the embedded store are accepted", "store: {kind: embedded, cached_rows: 500000}", nil},
		{"cached rows on postgres are refused", "store: {kind: postgres, url: 'postgres://h/d', cached_rows: 10}",
			[]string{"store.cached_rows: cached_rows is for kind embedded, not kind postgres"}},
		{"negative cached rows are refused", "store: {kind: embedded, cached_rows: -1}",
			[]string{"store.cached_rows: cached_rows -1 is negative"}},
		{"a schema on redis is refused", "store: {kind: redis, url: 'redis://h', schema: s}",
			[]string{"store.schema: schema is for kind postgres, not kind redis"}},
		{"a member on the embedded store is refused", "store: {kind: embedded, member: m}",
			[]string{"store.member: member is for a shared store (kind redis or postgres), not kind embedded"}},
		{"a journal, replication and commit bound on a shared store are accepted",
			"store: {kind: redis, url: 'redis://h', wait_replicas: 1, allow_async_replication: true, commit_timeout: 5s, journal: {path: /var/lib/rg, retention: 10m}}", nil},
		{"a journal on the embedded store is refused", "store: {kind: embedded, journal: {path: j}}",
			[]string{"store.journal: journal is for a shared store (kind redis or postgres), not kind embedded"}},
		{"wait_replicas on postgres is refused", "store: {kind: postgres, url: 'postgres://h/d', wait_replicas: 1}",
			[]string{"store.wait_replicas: wait_replicas is for kind redis, not kind postgres"}},
		{"a negative wait_replicas is refused", "store: {kind: redis, url: 'redis://h', wait_replicas: -1}",
			[]string{"store.wait_replicas: wait_replicas -1 is negative"}},
		{"a commit bound below 100ms is refused", "store: {kind: redis, url: 'redis://h', commit_timeout: 10ms}",
			[]string{"store.commit_timeout: commit_timeout 10ms is below 100ms"}},
		{"a journal that outlives the key window is refused", "store: {kind: postgres, url: 'postgres://h/d', journal: {retention: 3h}}",
			[]string{"store.journal.retention: retention 3h is longer than window.ttl 2h: a delivery decided again from the journal after its key left the key window could be applied twice; keep it at most window.ttl"}},
		{"a redis prefix with its hash tag is accepted", "store: {kind: redis, url: 'redis://h', prefix: 'rg:{plant-a}:'}", nil},
		{"a redis prefix without a hash tag is refused", "store: {kind: redis, url: 'redis://h', prefix: 'rg:'}",
			[]string{`store.prefix: prefix "rg:" has no hash tag: put the group's name in braces, e.g. "{plant-a}:", so its keys share one Redis Cluster slot`}},
		{"a redis prefix with two hash tags is refused", "store: {kind: redis, url: 'redis://h', prefix: '{a}{b}'}",
			[]string{`store.prefix: prefix "{a}{b}" holds more than one hash tag`}},
		{"a redis prefix with an empty hash tag is refused", "store: {kind: redis, url: 'redis://h', prefix: 'x{}:'}",
			[]string{`store.prefix: prefix "x{}:" has an empty hash tag {}: Redis would hash the whole key`}},
		{"a sequence span off 64 is refused", "window: {sequence_span: 100}",
			[]string{"window.sequence_span: sequence_span must be a multiple of 64 from 64 to 1048576, got 100"}},
		{"a sequence span above 1<<20 is refused", "window: {sequence_span: 1048640}",
			[]string{"window.sequence_span: sequence_span must be a multiple of 64 from 64 to 1048576, got 1048640"}},
		{"a negative max_entries is refused", "window: {max_entries: -1}",
			[]string{"window.max_entries: max_entries must be at least 1, got -1"}},
		{"a negative keep_epochs is refused", "window: {keep_epochs: -1}",
			[]string{"window.keep_epochs: keep_epochs must be from 1 to 64, got -1"}},
		{"keep_epochs above 64 is refused", "window: {keep_epochs: 1000000}",
			[]string{"window.keep_epochs: keep_epochs must be from 1 to 64, got 1000000"}},
		{"keep_epochs of 64 is accepted", "window: {keep_epochs: 64}", nil},
		{"retention with an archive is accepted", "audit: {retention: {max_age: 720h, max_records: 10000000}, archive: /a}", nil},
		{"an archive without retention is accepted", "audit: {archive: /a}", nil},
		{"retention without an archive is refused", "audit: {retention: {max_age: 720h}}",
			[]string{"audit.archive: archive is required with audit.retention: name the directory that keeps the records the store drops, so the chain stays verifiable"}},
		{"a negative max_records is refused", "audit: {retention: {max_records: -1}, archive: /a}",
			[]string{"audit.retention.max_records: max_records must be at least 1, got -1"}},
		{"a negative max_age is refused", "audit: {retention: {max_age: -1h}, archive: /a}",
			[]string{`audit.retention.max_age: duration "-1h" is negative`}},
		{"a max_records of 0, no limit, is refused", "audit: {retention: {max_records: 0}, archive: /a}",
			[]string{"audit.retention.max_records: retention.max_records is 0: remove it to use the default (none: no count limit), or set a positive value"}},
		{"a max_age of 0, no limit, is refused", "audit: {retention: {max_age: 0s, max_records: 5}, archive: /a}",
			[]string{"audit.retention.max_age: retention.max_age is 0: remove it to use the default (none: no age limit), or set a positive value"}},
		{"retention with no setting is refused", "audit: {retention: {}, archive: /a}",
			[]string{"audit.retention: retention sets no limit, so nothing would leave the store: set max_age or max_records, or remove it"}},
		{"an interval without a limit is refused", "audit: {retention: {interval: 1m}, archive: /a}",
			[]string{"audit.retention.interval: interval needs a positive duration and a retention limit (max_age or max_records), got 1m"}},
		{"the store's own directory as archive is refused", "store: {path: /data}\naudit: {retention: {max_records: 5}, archive: /data/}",
			[]string{"audit.archive: archive /data/ is the store's directory: give the archive a directory of its own"}},
		{"retention on a shared store is accepted", "store: {kind: redis, url: 'redis://h'}\naudit: {retention: {max_records: 5}, archive: /a}", nil},
		{"a member id with a path separator is refused beside an archive", "store: {kind: redis, url: 'redis://h', member: 'site-a/rg-1'}\naudit: {retention: {max_records: 5}, archive: /a}",
			[]string{`store.member: member id "site-a/rg-1" holds a path separator: the archive keeps each member's segments in a directory named after its id; give the member an id without / or \`}},
		{"a member id with a path separator is accepted without an archive", "store: {kind: redis, url: 'redis://h', member: 'site-a/rg-1'}", nil},
		{"retention on a shared store without an archive is refused", "store: {kind: postgres, url: 'postgres://h/d'}\naudit: {retention: {max_age: 24h}}",
			[]string{"audit.archive: archive is required with audit.retention: name the directory that keeps the records the store drops, so the chain stays verifiable"}},
		{"one sink of each kind is accepted", "audit: {sinks: [{name: otel, kind: otlp, endpoint: 'https://c:4318/v1/logs', headers: {X-Api-Key: k}, timeout: 5s}, " +
			"{name: siem, kind: syslog, address: 'logs:6514', app_name: rg, facility: local3}, {name: jsonl, kind: file, path: /var/log/rg.jsonl, max_bytes: 64MiB, keep: 3}]}", nil},
		{"two sinks with one name are refused", "audit: {sinks: [{name: a, kind: file, path: /x}, {name: a, kind: file, path: /y}]}",
			[]string{`audit.sinks[1].name: name "a" is also audit.sinks[0]'s: each sink keeps its own cursor under its name`}},
		{"two file sinks on one file are refused", "audit: {sinks: [{name: a, kind: file, path: /var/log/rg.jsonl}, {name: b, kind: file, path: /var/log/./rg.jsonl}]}",
			[]string{`audit.sinks[1].path: path "/var/log/./rg.jsonl" is also audit.sinks[0]'s: two sinks would write every record twice into one file, and rotate it from under each other`}},
		{"a sink of an unknown kind is refused", "audit: {sinks: [{name: a, kind: kafka}]}",
			[]string{`audit.sinks[0].kind: kind "kafka" is not one of otlp, syslog, file`}},
		{"a sink without a name is refused", "audit: {sinks: [{kind: file, path: /x}]}",
			[]string{`audit.sinks[0].name: name "" must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`}},
		{"an otlp endpoint without a path is refused", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://c:4318'}]}",
			[]string{`audit.sinks[0].endpoint: endpoint "http://c:4318" has no path: OTLP/HTTP receivers take logs at /v1/logs`}},
		{"an otlp endpoint of another scheme is refused", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'grpc://c:4317/v1/logs'}]}",
			[]string{`audit.sinks[0].endpoint: endpoint "grpc://c:4317/v1/logs" is not an http(s)://host:port/v1/logs URL`}},
		{"an otlp header value with a line break is refused", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://c:4318/v1/logs', headers: {Authorization: \"Bearer k\\n\"}}]}",
			[]string{`audit.sinks[0].headers: the value of header "Authorization" holds a control character (a line break?): HTTP cannot send it`}},
		{"an otlp endpoint without a port is refused", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://c/v1/logs'}]}",
			[]string{`audit.sinks[0].endpoint: endpoint "http://c/v1/logs" needs a port from 1 to 65535 (OTLP/HTTP listens on 4318)`}},
		{"a syslog address without a port is refused", "audit: {sinks: [{name: s, kind: syslog, address: logs}]}",
			[]string{`audit.sinks[0].address: address "logs" is not host:port`}},
		{"an unknown syslog facility is refused", "audit: {sinks: [{name: s, kind: syslog, address: 'h:514', facility: local9}]}",
			[]string{`audit.sinks[0].facility: facility "local9" is not a syslog facility name (user, daemon, local0 … local7, …)`}},
		{"the kernel's syslog facility is refused", "audit: {sinks: [{name: s, kind: syslog, address: 'h:514', facility: kern}]}",
			[]string{`audit.sinks[0].facility: facility "kern" is the kernel's own: give the audit records another one (user, daemon, local0 … local7, …)`}},
		{"a syslog max_message the receiver is sized for is accepted", "audit: {sinks: [{name: s, kind: syslog, address: 'h:514', max_message: 64KiB}]}", nil},
		{"a syslog max_message below what every receiver takes is refused", "audit: {sinks: [{name: s, kind: syslog, address: 'h:514', max_message: 1KiB}]}",
			[]string{"audit.sinks[0].max_message: max_message 1KiB is below 2KiB, the size every syslog receiver must take (RFC 5425): set the receiver's limit, 2KiB or more"}},
		{"max_message on a file sink is refused", "audit: {sinks: [{name: f, kind: file, path: /x, max_message: 8KiB}]}",
			[]string{"audit.sinks[0].max_message: max_message is not a setting of a file sink (it takes path, max_bytes, keep)"}},
		{"a file sink without a path is refused", "audit: {sinks: [{name: f, kind: file}]}",
			[]string{"audit.sinks[0].path: path is required for a file sink: name the JSON Lines file"}},
		{"keep without max_bytes is refused", "audit: {sinks: [{name: f, kind: file, path: /x, keep: 2}]}",
			[]string{"audit.sinks[0].keep: keep needs a positive count and max_bytes (rotation), got 2"}},
		{"another kind's setting on a sink is refused", "audit: {sinks: [{name: f, kind: file, path: /x, address: 'h:1'}]}",
			[]string{"audit.sinks[0].address: address is not a setting of a file sink (it takes path, max_bytes, keep)"}},
		{"tls on a file sink is refused", "audit: {sinks: [{name: f, kind: file, path: /x, tls: {ca_file: /ca.pem}}]}",
			[]string{"audit.sinks[0].tls: tls is not a setting of a file sink (it takes path, max_bytes, keep)"}},
		{"tls on an https otlp endpoint and a syslog sink is accepted", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'https://c:4318/v1/logs', tls: {ca_file: /ca.pem}}, {name: s, kind: syslog, address: 'h:6514', tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem}}]}", nil},
		{"tls on a plain http otlp endpoint is refused", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://c:4318/v1/logs', tls: {ca_file: /ca.pem}}]}",
			[]string{`audit.sinks[0].tls: tls is set for the plain http:// endpoint "http://c:4318/v1/logs": write https:// to use it`}},
		{"a sink's client certificate without its key is refused", "audit: {sinks: [{name: s, kind: syslog, address: 'h:6514', tls: {cert_file: /c.pem}}]}",
			[]string{"audit.sinks[0].tls.key_file: cert_file is set without key_file: set both or neither"}},
		{"a webhook's client certificate without its key is refused", "outputs: {webhook: {tls: {cert_file: /c.pem}}}",
			[]string{"outputs.webhook.tls.key_file: cert_file is set without key_file: set both or neither"}},
		{"sinks on a shared store are accepted", "store: {kind: postgres, url: 'postgres://h/d'}\naudit: {sinks: [{name: f, kind: file, path: /x}]}", nil},
		{"a sink on a shared store is checked as on any other", "store: {kind: redis, url: 'redis://h'}\naudit: {sinks: [{name: f, kind: file}]}",
			[]string{"audit.sinks[0].path: path is required for a file sink: name the JSON Lines file"}},
		{"a payload limit above MQTT's is refused", "limits: {max_payload: 1GiB}",
			[]string{"limits.max_payload: max_payload must be from 1 byte to 268435455 bytes (the largest MQTT packet), got 1073741824"}},
		{"every broker scheme is accepted", "mqtt: {brokers: ['tcp://h:1', 'mqtt://h:1', 'ssl://h:1', 'mqtts://h:1', 'ws://h:1/mqtt', 'wss://[::1]:1']}", nil},
		{"a broker with another scheme is refused", "mqtt: {brokers: ['http://h:1']}",
			[]string{`mqtt.brokers[0]: broker "http://h:1": scheme "http" is not one of tcp, mqtt, ssl, mqtts, ws, wss`}},
		{"a broker without a port is refused", "mqtt: {brokers: ['tcp://h']}",
			[]string{`mqtt.brokers[0]: broker "tcp://h" has no port: add one, like :1883 (:8883 for TLS)`}},
		{"a broker without a host is refused", "mqtt: {brokers: ['tcp://:1883']}",
			[]string{`mqtt.brokers[0]: broker "tcp://:1883" has no host`}},
		{"a broker port out of range is refused", "mqtt: {brokers: ['tcp://h:70000']}",
			[]string{`mqtt.brokers[0]: broker "tcp://h:70000": port "70000" is not from 1 to 65535`}},
		{"a broker with a query is refused", "mqtt: {brokers: ['tcp://h:1?a=b']}",
			[]string{`mqtt.brokers[0]: broker "tcp://h:1?a=b" has a query or fragment: brokers take none`}},
		{"a tcp broker with a path is refused", "mqtt: {brokers: ['tcp://h:1/x']}",
			[]string{`mqtt.brokers[0]: broker "tcp://h:1/x" has a path: only ws:// and wss:// brokers take one`}},
		{"a broker that is not a URL is refused", "mqtt: {brokers: ['h:1883']}",
			[]string{`mqtt.brokers[0]: broker "h:1883" is not a URL like tcp://127.0.0.1:1883`}},
		{"a broker with credentials is refused without showing them", "mqtt: {brokers: ['tcp://u:secret@h:1']}",
			[]string{`mqtt.brokers[0]: broker "tcp://u:xxxxx@h:1" carries credentials: set mqtt.username and mqtt.password_env or mqtt.password_file instead`}},
		{"protocol 5 is accepted, written as a number", "mqtt: {protocol: 5}", nil},
		{"protocol 3.1.1 is accepted", "mqtt: {protocol: 3.1.1}", nil},
		{"protocol auto is accepted", "mqtt: {protocol: auto}", nil},
		{"an unknown protocol is refused", "mqtt: {protocol: 3.1}",
			[]string{`mqtt.protocol: protocol "3.1" is not one of 5, 3.1.1 or auto`}},
		{"protocol 4, the wire's number for 3.1.1, is refused with the names", "mqtt: {protocol: 4}",
			[]string{`mqtt.protocol: protocol "4" is not one of 5, 3.1.1 or auto`}},
		{"a share group with a slash is refused", "store: {kind: postgres, url: 'postgres://db/ops'}\nmqtt: {share_group: a/b}",
			[]string{`mqtt.share_group: share_group "a/b" may not contain '/', '+' or '#'`}},
		{"a share group on a store of one member's own is refused", "mqtt: {share_group: ops}",
			[]string{`mqtt.share_group: share_group "ops" shares the feed among the members of a consumer group, which decide on one shared store; on kind embedded each member keeps keys of its own, and a copy the broker delivers again to another member (after a failover, a member's loss) is applied again: set store.kind postgres or redis, or remove share_group`}},
		{"a session expiry above 2^32-1 s is refused", "mqtt: {session_expiry: 1200000h}",
			[]string{"mqtt.session_expiry: session_expiry 1200000h is above the MQTT maximum of 4294967295s"}},
		{"a session expiry in fractions of a second is refused", "mqtt: {session_expiry: 1500ms}",
			[]string{"mqtt.session_expiry: session_expiry 1.5s is not a whole number of seconds"}},
		{"the largest session expiry is accepted", "mqtt: {session_expiry: 4294967295s}", nil},
		{"a keep alive above 65535s is refused", "mqtt: {keep_alive: 20h}",
			[]string{"mqtt.keep_alive: keep_alive must be from 1s to 65535s, got 20h"}},
		{"a password from both env and file is refused", "mqtt: {password_env: P, password_file: /p}",
			[]string{"mqtt: password_env and password_file are both set: keep one"}},
		{"a receive maximum above 65535 is refused", "mqtt: {receive_maximum: 65536}",
			[]string{"mqtt.receive_maximum: receive_maximum must be from 1 to 65535, got 65536"}},
		{"a receive maximum below the batch size is refused", "mqtt: {batch_size: 500, receive_maximum: 100}",
			[]string{"mqtt.receive_maximum: receive_maximum 100 is below batch_size 500: the broker stops sending before a batch can fill"}},
		{"an empty broker list is refused, not taken for the default", "mqtt: {brokers: []}",
			[]string{"mqtt.brokers: brokers is empty: list at least one, like [tcp://127.0.0.1:1883], or remove it to use that default"}},
		{"an empty output broker list is refused, not taken for the consumer's", "outputs: {mqtt: {brokers: []}}",
			[]string{"outputs.mqtt.brokers: brokers is empty: list at least one, like [tcp://cop:1883], or remove it to publish on the consumer's brokers"}},
		{"a negative batch size is refused", "mqtt: {batch_size: -5}",
			[]string{"mqtt.batch_size: batch_size must be at least 1, got -5"}},
		{"a cert without a key is refused", "mqtt: {tls: {cert_file: c}}",
			[]string{"mqtt.tls.key_file: cert_file is set without key_file: set both or neither"}},
		{"a key without a cert is refused", "mqtt: {tls: {key_file: k}}",
			[]string{"mqtt.tls.cert_file: key_file is set without cert_file: set both or neither"}},
		{"a listen address without a port is refused", "http: {listen: localhost}",
			[]string{`http.listen: listen "localhost" is not host:port, like 127.0.0.1:9780 (or off to disable)`}},
		{"a listen address on every interface is accepted", "http: {listen: ':9780', token_env: T}", nil},
		{"an empty listen address disables the server", "http: {listen: ''}", nil},
		{"a token from both env and file is refused", "http: {token_env: T, token_file: /t}",
			[]string{"http: token_env and token_file are both set: keep one"}},
		{"auth_reads without a token is refused", "http: {auth_reads: true}",
			[]string{"http.auth_reads: auth_reads needs a token: set token_env or token_file"}},
		{"a server ca without a certificate is refused", "http: {tls: {ca_file: ca}}",
			[]string{"http.tls.ca_file: ca_file asks clients for certificates, which needs the server's own cert_file and key_file"}},
		{"insecure_skip_verify on the server is refused", "http: {tls: {cert_file: c, key_file: k, insecure_skip_verify: true}}",
			[]string{"http.tls.insecure_skip_verify: insecure_skip_verify is for clients: the HTTP server has no peer to verify"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkProblems(t, tt.file, tt.want...) })
	}
}

func TestValidateRun(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want string
	}{
		{"a fixed id is accepted", "replayguard-1", ""},
		{"a StatefulSet pod name is accepted", "replayguard-0", ""},
		{"an empty id is refused", "", "client_id is empty: a persistent session needs a fixed client id, like replayguard-1 (or set REPLAYGUARD_MQTT_CLIENT_ID)"},
		{"a blank id is refused", "  ", "client_id is empty"},
		{"a UUID is refused", "rg-6ba7b810-9dad-11d1-80b4-00c04fd430c8", `client_id "rg-6ba7b810-9dad-11d1-80b4-00c04fd430c8" looks generated: a persistent session needs the same id at every start`},
		{"a long hex run is refused", "replayguard-0123456789abcdef01", "looks generated"},
		{"a Deployment pod name is refused", "replayguard-7d9f8c6b5-x2k4p", "looks like a Kubernetes Deployment pod name"},
		{"a shell-style variable is refused", "rg-$HOSTNAME", `holds an unexpanded placeholder: write ${VAR}`},
		{"a printf-style placeholder is refused", "rg-%d", "holds an unexpanded placeholder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(route(ok)), "f.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			c.MQTT.ClientID = tt.id
			err = c.ValidateRun()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidateRun: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), "mqtt.client_id: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ValidateRun: %v; want it to contain %q", err, tt.want)
			}
		})
	}
	t.Run("a client id with a path separator is refused as run's member id beside a shared store's archive", func(t *testing.T) {
		for _, tc := range []struct {
			store, id, want string
		}{
			{"{kind: redis, url: 'redis://h'}", "site-a/rg-1", `mqtt.client_id: client_id "site-a/rg-1", run's member id while store.member is unset, holds a path separator: ` +
				`the archive keeps each member's segments in a directory named after its id; set store.member to an id without / or \`},
			{"{kind: postgres, url: 'postgres://h/d'}", `site-a\\rg-1`, `holds a path separator`},
			{"{kind: redis, url: 'redis://h', member: rg-1}", "site-a/rg-1", ""},
			{"{kind: embedded, path: /data}", "site-a/rg-1", ""},
		} {
			file := "store: " + tc.store + "\naudit: {retention: {max_records: 5}, archive: /a}\n" + route(ok) + "mqtt: {client_id: \"" + tc.id + "\"}\n"
			c, err := Parse([]byte(file), "f.yaml", nil)
			if err != nil {
				t.Fatalf("store %s: %v", tc.store, err)
			}
			err = c.ValidateRun()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("store %s, client id %q: ValidateRun = %v; want %q", tc.store, tc.id, err, tc.want)
			}
		}
	})
	t.Run("a config without routes is refused for run only", func(t *testing.T) {
		c := Default()
		c.MQTT.ClientID = "rg-1"
		if err := c.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		err := c.ValidateRun()
		if err == nil || err.Error() != "routes: no routes: run needs at least one route to subscribe to" {
			t.Fatalf("ValidateRun: %v", err)
		}
	})
}

func TestParseRun(t *testing.T) {
	forward := "store: {kind: memory}\n" + route(ok, "effects: [{forward: {topic: \"out/{topic}\"}}]")
	tests := []struct {
		name string
		file string
		env  map[string]string
		want []string
	}{
		{"run's problems are listed with the file's, each with its line",
			strings.Replace(forward, "    source:", "    colour: blue\n    source:", 1) + "mqtt:\n  brokers: [tcp://127.0.0.1:1883]\n",
			nil, []string{
				`f.yaml:5: routes[0] (r): unknown key "colour"; known keys: effects, epoch, id, kind, name, qos, sequence, source, topic`,
				"f.yaml:9: mqtt.client_id: client_id is empty: a persistent session needs a fixed client id, like replayguard-1 (or set REPLAYGUARD_MQTT_CLIENT_ID)",
			}},
		{"a setting the file lacks, in a section it lacks, names the file alone", "store: {kind: memory}\n", nil, []string{
			"f.yaml: routes: no routes: run needs at least one route to subscribe to",
			"f.yaml: mqtt.client_id: client_id is empty: a persistent session needs a fixed client id, like replayguard-1 (or set REPLAYGUARD_MQTT_CLIENT_ID)",
		}},
		{"a client id written in the file is refused on its own line", forward + "mqtt:\n  brokers: [tcp://127.0.0.1:1883]\n  client_id: rg-%d\n", nil, []string{
			`f.yaml:10: mqtt.client_id: client_id "rg-%d" holds an unexpanded placeholder: write ${VAR} to take it from the environment`,
		}},
		{"a client id from the environment names its variable", forward, map[string]string{"REPLAYGUARD_MQTT_CLIENT_ID": "rg-$HOSTNAME"}, []string{
			`f.yaml: mqtt.client_id: client_id "rg-$HOSTNAME" holds an unexpanded placeholder: write ${VAR} to take it from the environment (set by REPLAYGUARD_MQTT_CLIENT_ID)`,
		}},
		{"a client id that could not be read is not reported again as empty", forward + "mqtt: {client_id: [a]}\n", nil, []string{
			"f.yaml:8: mqtt.client_id: want a string, got a list",
		}},
		{"a feed without a client id is refused on its feed's line", forward + "mqtt:\n  feeds:\n    - {name: a, brokers: [tcp://h:1883]}\n", nil, []string{
			"f.yaml:10: mqtt.feeds[0].client_id: client_id is empty: a persistent session needs a fixed client id, like replayguard-1 (or set REPLAYGUARD_MQTT_CLIENT_ID)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			_, err := ParseRun([]byte(tt.file), "f.yaml", getenv)
			if got, want := fmt.Sprint(err), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("ParseRun:\n%s\nwant:\n%s", got, want)
			}
		})
	}
	t.Run("Parse leaves run's checks to ParseRun", func(t *testing.T) {
		if _, err := Parse([]byte("store: {kind: memory}\n"), "f.yaml", nil); err != nil {
			t.Fatalf("Parse: %v", err)
		}
	})
}

func TestValidateInCode(t *testing.T) {
	t.Run("the zero config is invalid until defaults are set", func(t *testing.T) {
		var c Config
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Validate: %v", err)
		}
		if !strings.HasPrefix(err.Error(), `store.kind: kind "" is not one of`) {
			t.Fatalf("first problem: %v", err)
		}
		c.SetDefaults()
		if err := c.Validate(); err != nil {
			t.Fatalf("after SetDefaults: %v", err)
		}
	})
	t.Run("problems in code carry no file or line", func(t *testing.T) {
		c := Default()
		c.Routes = []Route{{Name: "r", Topic: "a", Source: []string{"d"}}}
		want := "routes[0] (r): neither sequence nor id is set: a route needs one to build an idempotency key"
		if err := c.Validate(); err == nil || err.Error() != want {
			t.Fatalf("Validate: %v\nwant %s", err, want)
		}
	})
	tests := []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"a negative linger is refused", func(c *Config) { c.MQTT.BatchLinger = -1 },
			"mqtt.batch_linger: batch_linger must not be negative"},
		{"an embedded store without a path is refused", func(c *Config) { c.Store.Path = "" },
			"store.path: path is required for kind embedded: name the directory holding the data"},
		{"a zero ttl is refused", func(c *Config) { c.Window.TTL = 0 }, "window.ttl: ttl must be positive"},
		{"an empty broker list is refused", func(c *Config) { c.MQTT.Brokers = nil },
			"mqtt.brokers: brokers is empty: list at least one, like tcp://127.0.0.1:1883"},
		{"a keep alive in fractions of a second is refused", func(c *Config) { c.MQTT.KeepAlive = Duration(1500 * time.Millisecond) },
			"mqtt.keep_alive: keep_alive 1.5s is not a whole number of seconds"},
		{"an unparsable store url is refused without echoing it", func(c *Config) { c.Store = StoreConfig{Kind: "redis", URL: "redis://:pw@h:bad"} },
			"store.url: url for kind redis cannot be parsed"},
		{"an unparsable broker with credentials is refused without echoing them", func(c *Config) { c.MQTT.Brokers = []string{"tcp://u:pw@h:bad"} },
			`mqtt.brokers[0]: broker "tcp://xxxxx@h:bad" is not a URL like tcp://127.0.0.1:1883`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.change(c)
			if err := c.Validate(); err == nil || err.Error() != tt.want {
				t.Fatalf("Validate: %v\nwant %s", err, tt.want)
			}
		})
	}
	t.Run("a client id with NUL is refused", func(t *testing.T) {
		c := Default()
		c.Routes = []Route{{Name: "r", Topic: "a", Source: []string{"d"}, ID: "i"}}
		c.MQTT.ClientID = "a\x00b"
		want := "mqtt.client_id: client_id must be valid UTF-8 without NUL, at most 65535 bytes"
		if err := c.ValidateRun(); err == nil || err.Error() != want {
			t.Fatalf("ValidateRun: %v", err)
		}
	})
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"the defaults warn of nothing", route(ok), nil},
		{"a ttl below the session expiry warns for id routes",
			"window: {ttl: 30m}\n" + route("name: r", "topic: a", "source: [d]", "id: i"),
			[]string{"window.ttl: ttl 30m is not above mqtt.session_expiry 1h: a replay after a long outage may arrive after its key is evicted and be applied again"}},
		{"a ttl below the session expiry is fine for sequenced routes", "window: {ttl: 30m}\n" + route(ok), nil},
		{"clean_start warns", "mqtt: {clean_start: true}",
			[]string{"mqtt.clean_start: clean_start discards the broker session at every connect: messages queued while replayguard was away are lost"}},
		{"skipping broker verification warns", "mqtt: {tls: {insecure_skip_verify: true}}",
			[]string{"mqtt.tls.insecure_skip_verify: the broker's certificate is not verified"}},
		{"a public listener without a token warns that its writes are refused", "http: {listen: '0.0.0.0:9780'}",
			[]string{"http.listen: listening on 0.0.0.0:9780 without a token: anyone who can reach it reads the API, and release, discard, retry and drop are refused; give it http.tokens"}},
		{"localhost without a token is fine", "http: {listen: 'localhost:9780'}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.file), "f.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range c.Warnings() {
				got = append(got, w.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("warnings:\n  got  %q\n  want %q", got, tt.want)
			}
		})
	}
}
