package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// sqlLintConfig writes a configuration on the postgres store at url whose
// route runs the statements.
func sqlLintConfig(t *testing.T, url string, stmts ...string) string {
	t.Helper()
	var effects strings.Builder
	for _, s := range stmts {
		effects.WriteString(s)
	}
	cfg := fmt.Sprintf(`store: {kind: postgres, url: %q}
routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects:
%smqtt: {brokers: [tcp://127.0.0.1:1883], client_id: rg-lint-1}
`, url, effects.String())
	path := filepath.Join(t.TempDir(), "replayguard.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const goodStatement = `      - sql: "INSERT INTO lint_readings (meter, msg_id, kwh) VALUES ($1, $2, $3)"
        args: ["topic[1]", msgId, kwh]
`

func TestLintChecksSQLAgainstTheDatabase(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	c, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(t.Context(), `CREATE TABLE lint_readings (meter text, msg_id text, kwh numeric)`); err != nil {
		t.Fatal(err)
	}

	t.Run("statements the server refuses are problems", func(t *testing.T) {
		cfg := sqlLintConfig(t, pg.URL(), goodStatement,
			`      - sql: "INSERT INTO no_such_table (a) VALUES ($1)"
        args: [kwh]
`, `      - sql: "INSERT INTO lint_readings (meter, kwhh) VALUES ($1, $2)"
        args: ["topic[1]", kwh]
`)
		_, errs, code := cli(t, "", "lint", "-c", cfg)
		want := []string{
			cfg + `:10: routes[0].effects[1].sql: the server refuses the statement: relation "no_such_table" does not exist (SQLSTATE 42P01)`,
			cfg + `:12: routes[0].effects[2].sql: the server refuses the statement: column "kwhh" of relation "lint_readings" does not exist (SQLSTATE 42703)`,
		}
		if code != 1 || strings.TrimSpace(errs) != "replayguard lint: "+strings.Join(want, "\n") {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, errs, strings.Join(want, "\n"))
		}
	})
	t.Run("a parameter in a comment is not counted, as the server does not count it", func(t *testing.T) {
		cfg := sqlLintConfig(t, pg.URL(), `      - sql: "INSERT INTO lint_readings (meter) VALUES ($1) -- not $2"
        args: ["topic[1]", kwh]
`)
		_, errs, code := cli(t, "", "lint", "-c", cfg)
		want := "replayguard lint: " + cfg + ":9: routes[0] (meters).effects[0].args: the statement uses 1 parameters ($1 to $1) but args lists 2"
		if code != 1 || strings.TrimSpace(errs) != want {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, errs, want)
		}
	})
	t.Run("statements the server takes pass, and nothing is created", func(t *testing.T) {
		out, errs, code := cli(t, "", "lint", "-c", sqlLintConfig(t, pg.URL(), goodStatement))
		if code != 0 || !strings.HasSuffix(out, ": ok (1 route)\n") || strings.Contains(out, "not checked") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
		var n int
		if err := c.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = 'replayguard'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("lint created the store's schema: %d, %v", n, err)
		}
	})
	t.Run("an unreachable database skips the check and says so", func(t *testing.T) {
		down := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
		down.Stop()
		url := "postgres://rg:s3cret@" + down.Addr() + "/postgres?sslmode=disable&connect_timeout=2"
		out, errs, code := cli(t, "", "lint", "-c", sqlLintConfig(t, url, goodStatement))
		wantNote := "sql statements not checked against the database: postgres server not reachable: postgres://rg@" + down.Addr() + "/postgres: "
		if code != 0 || !strings.Contains(out, wantNote) || !strings.HasSuffix(out, ": ok (1 route)\n") || strings.Contains(out, "s3cret") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out, errs, wantNote)
		}
		t.Logf("%s", out)
	})
}

func TestLintListsRunProblemsWithTheFiles(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
	if err := os.WriteFile(cfg, []byte(`store: {kind: memory}
routes:
  - name: meters
    topic: plant/+/energy
    colour: blue
    source: ["topic[1]"]
    id: msgId
    effects:
      - forward: {topic: "out/{topic}"}
mqtt:
  brokers: [tcp://127.0.0.1:1883]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{
		cfg + `:5: routes[0] (meters): unknown key "colour"; known keys: effects, epoch, id, kind, name, qos, sequence, source, topic`,
		cfg + ":10: mqtt.client_id: client_id is empty: a persistent session needs a fixed client id, like replayguard-1 (or set REPLAYGUARD_MQTT_CLIENT_ID)",
	}
	for _, verb := range []string{"lint", "run"} {
		t.Run(verb+" lists both, each with its line", func(t *testing.T) {
			_, errs, code := cli(t, "", verb, "-c", cfg)
			if code != 1 || strings.TrimSpace(errs) != "replayguard "+verb+": "+strings.Join(want, "\n") {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, errs, strings.Join(want, "\n"))
			}
		})
	}
	t.Run("run's problem alone has its line too", func(t *testing.T) {
		b, _ := os.ReadFile(cfg)
		if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), "    colour: blue\n", "", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		want := "replayguard lint: " + cfg + ":9: mqtt.client_id: client_id is empty: a persistent session needs a fixed client id, like replayguard-1 (or set REPLAYGUARD_MQTT_CLIENT_ID)"
		if _, errs, code := cli(t, "", "lint", "-c", cfg); code != 1 || strings.TrimSpace(errs) != want {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, errs, want)
		}
	})
}

// lint reads what run reads from the machine before it connects (tokens,
// passwords, TLS files): a token whose variable is unset, or two entries
// holding one token, fail lint as they fail run.
func TestLintReadsTokensAndSecretsAsRunDoes(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
	write := func(tokens string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(`store: {kind: memory}
routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects:
      - entity: "meter/{topic[1]}"
        add: {kwh: kwh}
mqtt: {brokers: [tcp://127.0.0.1:1883], client_id: rg-lint-1, password_env: RG_LINT_MQTT_PASSWORD}
http:
  listen: 127.0.0.1:0
  tokens:
`+tokens), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("RG_LINT_MQTT_PASSWORD", "s3cret")
	t.Setenv("RG_LINT_TOKEN_A", "token-a")
	t.Setenv("RG_LINT_TOKEN_B", "token-a")
	for name, c := range map[string]struct{ tokens, want string }{
		"a token whose variable is not set": {"    - {name: a, role: operator, token_env: RG_LINT_TOKEN_A}\n    - {name: j.doe, role: viewer, token_env: RG_LINT_TOKEN_UNSET}\n",
			"http.tokens[1] (j.doe): environment variable RG_LINT_TOKEN_UNSET is not set"},
		"two entries with one token": {"    - {name: a, role: operator, token_env: RG_LINT_TOKEN_A}\n    - {name: b, role: viewer, token_env: RG_LINT_TOKEN_B}\n",
			"http.tokens[0] (a) and http.tokens[1] (b) hold the same token"},
	} {
		t.Run(name, func(t *testing.T) {
			write(c.tokens)
			_, errs, code := cli(t, "", "lint", "-c", cfg)
			if code != 1 || !strings.Contains(errs, c.want) {
				t.Fatalf("lint: exit %d, stderr %q; want exit 1 naming %q", code, errs, c.want)
			}
		})
	}
	t.Run("a password whose variable is not set", func(t *testing.T) {
		write("    - {name: a, role: operator, token_env: RG_LINT_TOKEN_A}\n")
		os.Unsetenv("RG_LINT_MQTT_PASSWORD")
		_, errs, code := cli(t, "", "lint", "-c", cfg)
		if want := cfg + ":10: mqtt.password_env: environment variable RG_LINT_MQTT_PASSWORD is not set"; code != 1 || !strings.Contains(errs, want) {
			t.Fatalf("lint: exit %d, stderr %q; want exit 1 naming %q", code, errs, want)
		}
	})
	t.Run("a warning names its line", func(t *testing.T) {
		t.Setenv("RG_LINT_MQTT_PASSWORD", "s3cret")
		write("    - {name: a, role: operator, token_env: RG_LINT_TOKEN_A}\n")
		b, _ := os.ReadFile(cfg)
		if err := os.WriteFile(cfg, append(b, "window: {ttl: 1m}\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, code := cli(t, "", "lint", "-c", cfg)
		if want := cfg + ":15: warning: window.ttl: ttl 1m is not above mqtt.session_expiry 1h"; code != 0 || !strings.Contains(out, want) {
			t.Fatalf("lint: exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out, errs, want)
		}
	})
	t.Run("every secret there", func(t *testing.T) {
		t.Setenv("RG_LINT_MQTT_PASSWORD", "s3cret")
		write("    - {name: a, role: operator, token_env: RG_LINT_TOKEN_A}\n")
		if out, errs, code := cli(t, "", "lint", "-c", cfg); code != 0 || !strings.Contains(out, "ok") {
			t.Fatalf("lint: exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})
}

// A forward publishing to the broker replayguard consumes, on topics its
// own route takes, gets every copy back as a new message: lint says so
// at the forward's line, and passes.
func TestLintWarnsOfAForwardWhoseCopiesComeBack(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
	if err := os.WriteFile(cfg, []byte(`store: {kind: memory}
routes:
  - name: plant
    topic: plant/#
    source: [device]
    id: msgId
    effects:
      - forward: {topic: "plant/clean/{topic}"}
mqtt: {brokers: [tcp://127.0.0.1:1883], client_id: rg-lint-1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := cli(t, "", "lint", "-c", cfg)
	want := cfg + `:8: warning: routes[0] (plant).effects[0].forward.topic: forward topic "plant/clean/{topic}" publishes to tcp://127.0.0.1:1883, ` +
		`a broker replayguard consumes, and routes[0] (plant) "plant/#" can match its topics: each copy comes back as a new message`
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("lint: exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out, errs, want)
	}
}

// forwardingMeters is a route that forwards, so that the configuration
// has an MQTT output.
const forwardingMeters = `routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects:
      - entity: "meter/{topic[1]}"
        add: {kwh: kwh}
      - forward: {topic: "clean/{topic}"}
`

// A password lint cannot read is named by the setting the file writes,
// password_env or password_file, of mqtt, of a feed or of outputs.mqtt:
// there is no setting "password" to look for.
func TestLintNamesThePasswordSettingAsWritten(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-password")
	for name, c := range map[string]struct{ mqtt, want string }{
		"mqtt's variable": {"mqtt: {brokers: [tcp://127.0.0.1:1883], client_id: rg-lint-pw, password_env: RG_LINT_PW_UNSET}\n",
			"mqtt.password_env: environment variable RG_LINT_PW_UNSET is not set"},
		"mqtt's file": {fmt.Sprintf("mqtt: {brokers: [tcp://127.0.0.1:1883], client_id: rg-lint-pw, password_file: %s}\n", missing),
			"mqtt.password_file: open " + missing},
		"a feed's variable": {"mqtt:\n  client_id: rg-lint-pw\n  feeds:\n    - {name: a, brokers: [tcp://127.0.0.1:1883], password_env: RG_LINT_PW_UNSET}\n    - {name: b, brokers: [tcp://127.0.0.1:1884]}\n",
			"mqtt.feeds[0] (a).password_env: environment variable RG_LINT_PW_UNSET is not set"},
		"the output's file": {fmt.Sprintf("mqtt: {brokers: [tcp://127.0.0.1:1883], client_id: rg-lint-pw}\noutputs: {mqtt: {brokers: [tcp://127.0.0.1:1885], password_file: %s}}\n", missing),
			"outputs.mqtt.password_file: open " + missing},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
			if err := os.WriteFile(cfg, []byte("store: {kind: memory}\n"+forwardingMeters+c.mqtt), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errs, code := cli(t, "", "lint", "-c", cfg)
			if code != 1 || !strings.Contains(errs, c.want) {
				t.Fatalf("lint: exit %d, stderr %q; want exit 1 naming %q", code, errs, c.want)
			}
		})
	}
}

// outputs.mqtt without a password of its own takes the consumer's: lint
// reports a missing one once, at the consumer's setting and its line,
// not again under outputs.mqtt with no line; run names the setting too.
func TestAnInheritedOutputPasswordIsReportedOnceAtItsSetting(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-password")
	for name, c := range map[string]struct{ mqtt, lint, run string }{
		"mqtt's file": {fmt.Sprintf("mqtt:\n  brokers: [tcp://127.0.0.1:1]\n  client_id: rg-lint-pw\n  password_file: %s\n", missing),
			fmt.Sprintf("replayguard lint: %%s:14: mqtt.password_file: open %s: no such file or directory\n", missing),
			fmt.Sprintf("replayguard run: outputs.mqtt: mqtt.password_file: open %s: no such file or directory\n", missing)},
		"a feed's variable": {"mqtt:\n  client_id: rg-lint-pw\n  feeds:\n    - {name: a, brokers: [tcp://127.0.0.1:1], password_env: RG_LINT_PW_UNSET}\n",
			"replayguard lint: %s:14: mqtt.feeds[0] (a).password_env: environment variable RG_LINT_PW_UNSET is not set\n",
			"replayguard run: outputs.mqtt: mqtt.feeds[0] (a).password_env: environment variable RG_LINT_PW_UNSET is not set\n"},
		"the output's own": {fmt.Sprintf("mqtt: {brokers: [tcp://127.0.0.1:1], client_id: rg-lint-pw}\noutputs:\n  mqtt: {password_file: %s}\n", missing),
			fmt.Sprintf("replayguard lint: %%s:13: outputs.mqtt.password_file: open %s: no such file or directory\n", missing),
			fmt.Sprintf("replayguard run: outputs.mqtt: password_file: open %s: no such file or directory\n", missing)},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
			if err := os.WriteFile(cfg, []byte("store: {kind: memory}\n"+forwardingMeters+c.mqtt), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, errs, code := cli(t, "", "lint", "-c", cfg); code != 1 || errs != fmt.Sprintf(c.lint, cfg) {
				t.Errorf("lint: exit %d, stderr %q; want exit 1 and %q", code, errs, fmt.Sprintf(c.lint, cfg))
			}
			if _, errs, code := cli(t, "", "run", "-c", cfg); code != 1 || errs != c.run {
				t.Errorf("run: exit %d, stderr %q; want exit 1 and %q", code, errs, c.run)
			}
		})
	}
}

// run refuses a consumer password it cannot read naming the setting,
// password_env or password_file, as lint does.
func TestRunNamesThePasswordSettingItCannotRead(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
	body := "store: {kind: memory}\nroutes:\n  - {name: m, topic: a/#, source: [\"topic[1]\"], id: msgId, effects: [{entity: \"m/{topic[1]}\", add: {kwh: kwh}}]}\n" +
		"mqtt: {brokers: [tcp://127.0.0.1:1], client_id: rg-run-pw, password_env: RG_RUN_PW_UNSET}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "replayguard run: mqtt.password_env: environment variable RG_RUN_PW_UNSET is not set\n"
	if _, errs, code := cli(t, "", "run", "-c", cfg); code != 1 || errs != want {
		t.Fatalf("run: exit %d, stderr %q; want exit 1 and %q", code, errs, want)
	}
}

// TestLintRefusesAStoreRunWouldRefuseAsNotDurable: lint says what run
// refuses, a Redis that keeps nothing on disk, naming the setting; with
// store.allow_not_durable it is ok.
func TestLintRefusesAStoreRunWouldRefuseAsNotDurable(t *testing.T) {
	r := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
	for _, allow := range []bool{false, true} {
		cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
		if err := os.WriteFile(cfg, fmt.Appendf(nil, `store: {kind: redis, url: %q, allow_not_durable: %v}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
mqtt: {brokers: [tcp://127.0.0.1:1883], client_id: rg-lint-1}
`, r.URL(), allow), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, code := cli(t, "", "lint", "-c", cfg)
		switch {
		case !allow && (code != 1 || !strings.Contains(errs, cfg+":1: store: the redis server is not durable (appendonly") || !strings.Contains(errs, "run refuses it")):
			t.Errorf("lint of a Redis that keeps nothing: exit %d\n%s%s", code, out, errs)
		case allow && code != 0:
			t.Errorf("lint with store.allow_not_durable: exit %d\n%s%s", code, out, errs)
		}
	}
}

// lint lists the problems of the machine (an environment variable not
// set, a file that cannot be read) with those of the file, at once: they
// came only once the file's were fixed, one round more for each.
func TestLintListsTheMachinesProblemsWithTheFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replayguard.yaml")
	cfg := `routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
mqtt:
  feeds:
    - {name: a, brokers: [tcp://127.0.0.1:1], client_id: a, password_env: RG_LINT_PW, password_file: /etc/hostname}
    - {name: b, brokers: [tcp://127.0.0.1:2], client_id: b, password_env: RG_LINT_UNSET}
    - {name: c, brokers: [tcp://127.0.0.1:3], client_id: c, tls: {ca_file: /nonexistent/ca.pem}}
window: {ttl: 0s}
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := cli(t, "", "lint", "-c", path)
	want := []string{
		":5: mqtt.feeds[0]: password_env and password_file are both set: keep one",
		":6: mqtt.feeds[1] (b).password_env: environment variable RG_LINT_UNSET is not set",
		":7: mqtt.feeds[2] (c).tls: tls.ca_file: open /nonexistent/ca.pem",
		":8: window.ttl: ttl is 0",
	}
	for _, w := range want {
		if !strings.Contains(errs, w) {
			t.Errorf("lint does not list %q", w)
		}
	}
	if code != 1 || strings.Count(errs, ":5: ") != 1 {
		t.Fatalf("exit %d, want 1 with one problem a line:\n%s", code, errs)
	}
}
