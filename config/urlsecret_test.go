package config

import (
	"strings"
	"testing"
)

// A webhook or OTLP endpoint may carry a token as its user, or a user
// and password, which config print shows as xxxxx; a problem with such a
// URL names it the same way, never with the secret, as a broker's or a
// store's does: lint's and run's output ends up in logs and tickets.
func TestURLProblemsNeverShowTheirCredentials(t *testing.T) {
	meters := route("name: r", "topic: plant/+/energy", "source: [\"topic[1]\"]", "id: msgId")
	fwd := "routes[0] (r).effects[0].forward.webhook: "
	for _, tc := range []struct {
		name, file, want string
	}{
		{"a webhook of another scheme with a password", meters + effects(`forward: {webhook: "ftp://user:s3cret@billing.example/readings"}`),
			fwd + `webhook "ftp://user:xxxxx@billing.example/readings" is not an http:// or https:// URL with a host`},
		{"a webhook without a host, a token as its user", meters + effects(`forward: {webhook: "https://s3cret@/readings"}`),
			fwd + `webhook "https://xxxxx@/readings" is not an http:// or https:// URL with a host`},
		{"a webhook without a scheme, a token as its user", meters + effects(`forward: {webhook: "s3cret@billing.example/readings"}`),
			fwd + `webhook "xxxxx@billing.example/readings" is not an http:// or https:// URL with a host`},
		{"an otlp endpoint without a port, with a password", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://u:s3cret@collector/v1/logs'}]}",
			`audit.sinks[0].endpoint: endpoint "http://u:xxxxx@collector/v1/logs" needs a port from 1 to 65535 (OTLP/HTTP listens on 4318)`},
		{"an otlp endpoint without a path, a token as its user", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://s3cret@collector:4318'}]}",
			`audit.sinks[0].endpoint: endpoint "http://xxxxx@collector:4318" has no path: OTLP/HTTP receivers take logs at /v1/logs`},
		{"an otlp endpoint of another scheme, with a password", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'grpc://u:s3cret@collector:4317/v1/logs'}]}",
			`audit.sinks[0].endpoint: endpoint "grpc://u:xxxxx@collector:4317/v1/logs" is not an http(s)://host:port/v1/logs URL`},
		{"an otlp endpoint that does not parse, with a password", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://u:s3cret@collector:port/v1/logs'}]}",
			`audit.sinks[0].endpoint: endpoint "http://u:xxxxx@collector:port/v1/logs" is not an http(s)://host:port/v1/logs URL`},
		{"an otlp endpoint with a password and a query", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://u:s3cret@collector:4318/v1/logs?a=b'}]}",
			`audit.sinks[0].endpoint: endpoint "http://u:xxxxx@collector:4318/v1/logs?a=b" carries credentials, a query or a fragment: put credentials in headers`},
		{"an otlp endpoint with a token as its user", "audit: {sinks: [{name: o, kind: otlp, endpoint: 'https://s3cret@collector:4318/v1/logs'}]}",
			`audit.sinks[0].endpoint: endpoint "https://xxxxx@collector:4318/v1/logs" carries credentials, a query or a fragment: put credentials in headers`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problemsOf(t, tc.file)
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("problems\n%q\nwant\n%q", got, tc.want)
			}
			if strings.Contains(strings.Join(got, "\n"), "s3cret") {
				t.Errorf("a problem shows the secret: %q", got)
			}
		})
	}
}
