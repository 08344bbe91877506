package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// literalValues are values a password, a URL or a name may hold that mean
// something to YAML when they are written into the file unquoted.
var literalValues = []string{
	"*secret", "&anchor", "!tag", "|", ">", "@x", "%x", "`x", "{a: 1}", "[a, b]", "- a", "-", "? a", "?", ": a", ":",
	`"quoted"`, "'quoted'", "it's", `a"b'c\d`, "a: b", "a:", "a #b", "a # b", "#x", " lead", "trail ", "a,b", "a]b", "a}b",
	"null", "~", "NULL", "true", "no", "0x10", "5432", "1e3", ".inf", "2024-01-01", "<<", "=", "tab\there", "ümlaut",
	"line\nbreak", "cr\rlf", "nel\u0085x", "ls\u2028x", "bell\x07", "\ufeffbom", "---", "...", "$", "$$", "${X}",
}

func TestInterpolatedValuesAreLiteral(t *testing.T) {
	// Each way of writing a reference: the value parsed must be the
	// variable's, byte for byte, whatever it holds.
	places := []struct {
		name, file string
		single     bool // a single-quoted or block scalar: cannot hold a line break
		plain      bool // unquoted: takes no CR or LF
	}{
		{"plain", "mqtt:\n  username: ${U}\n", false, true},
		{"plain with a trailing comment", "mqtt:\n  username: ${U}   # the broker's user\n", false, true},
		{"plain inside a flow mapping", "mqtt: {username: ${U}, client_id: c}\n", false, true},
		{"plain with text around it", "mqtt:\n  username: pre-${U}-post\n", false, true},
		{"double-quoted", "mqtt:\n  username: \"${U}\"\n", false, false},
		{"double-quoted with text around it", "mqtt: {username: \"a ${U} b\"}\n", false, false},
		{"single-quoted", "mqtt:\n  username: '${U}'\n", true, false},
	}
	for _, p := range places {
		for _, v := range literalValues {
			t.Run(p.name+" reads "+strings.ReplaceAll(v, "\n", `\n`)+" as written", func(t *testing.T) {
				env := map[string]string{"U": v}
				c, err := Parse([]byte(p.file), "f.yaml", func(k string) (string, bool) { s, ok := env[k]; return s, ok })
				if p.single && strings.ContainsAny(v, "\r\n\u0085\u2028\x07\ufeff") || p.plain && strings.ContainsAny(v, "\r\n") {
					if err == nil || !strings.Contains(err.Error(), "f.yaml:") || !strings.Contains(err.Error(), "U") {
						t.Fatalf("want an error naming the line and U, got %v (username %q)", err, c.MQTT.Username)
					}
					return
				}
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				want := v
				switch p.name {
				case "plain with text around it":
					want = "pre-" + v + "-post"
				case "double-quoted with text around it":
					want = "a " + v + " b"
				}
				if c.MQTT.Username != want {
					t.Fatalf("username %q, want %q", c.MQTT.Username, want)
				}
			})
		}
	}
}

func TestInterpolationLeavesCommentsAlone(t *testing.T) {
	env := map[string]string{"SECRET": "hunter2", "USER": "u"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name, in, want string
	}{
		{"an unset variable in a trailing comment is not an error", "k: v # was ${MISSING}\n", "k: v # was ${MISSING}\n"},
		{"a secret named in a trailing comment is not written into it", "k: ${USER} # password: ${SECRET}\n", "k: u # password: ${SECRET}\n"},
		{"a comment after a flow mapping is left alone", "m: {a: ${USER}} # ${MISSING}\n", "m: {a: u} # ${MISSING}\n"},
		{"a comment between list items is left alone", "l:\n  - ${USER}\n  # ${MISSING}\n  - b\n", "l:\n  - u\n  # ${MISSING}\n  - b\n"},
		{"an unterminated reference in a comment is not an error", "k: v # costs ${\n", "k: v # costs ${\n"},
		{"a hash inside a quoted value is not a comment", "k: \"a # ${USER}\"\n", "k: \"a # u\"\n"},
		{"a hash without a space before it is part of a plain value", "k: a#${USER}\n", "k: a#u\n"},
		{"a hash line inside a block scalar is its text", "k: |\n  # ${USER}\n", "k: |\n  # u\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, probs := interpolate(tt.in, getenv)
			if len(probs) > 0 || got != tt.want {
				t.Fatalf("got %q %v, want %q", got, probs, tt.want)
			}
		})
	}
}

func TestInterpolationKeepsTypesAndStructure(t *testing.T) {
	env := map[string]string{"N": "100", "TTL": "90m", "B1": "tcp://a:1883", "B2": "tcp://b:1883", "EMPTY": "", "KIND": "memory"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	file := "store: {kind: ${KIND}}\nwindow: {ttl: ${TTL}}\nmqtt:\n  brokers: [${B1}, '${B2}']\n  batch_size: ${N}\n  username: ${EMPTY}\n"
	c, err := Parse([]byte(file), "f.yaml", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Kind != "memory" || time.Duration(c.Window.TTL) != 90*time.Minute || c.MQTT.BatchSize != 100 ||
		!slices.Equal(c.MQTT.Brokers, []string{"tcp://a:1883", "tcp://b:1883"}) || c.MQTT.Username != "" {
		t.Fatalf("kind %q, ttl %v, batch %d, brokers %q, username %q", c.Store.Kind, c.Window.TTL, c.MQTT.BatchSize, c.MQTT.Brokers, c.MQTT.Username)
	}
	t.Run("a value is never YAML structure", func(t *testing.T) {
		env["B1"] = "[tcp://a:1883, tcp://b:1883]"
		_, err := Parse([]byte("mqtt:\n  brokers: ${B1}\n"), "f.yaml", getenv)
		if err == nil || !strings.Contains(err.Error(), "f.yaml:2") {
			t.Fatalf("want a type error on line 2, got %v", err)
		}
	})
	t.Run("a number that is not a plain value is a clear type error", func(t *testing.T) {
		env["N"] = "*100"
		_, err := Parse([]byte("mqtt:\n  batch_size: ${N}\n"), "f.yaml", getenv)
		if err == nil || !strings.Contains(err.Error(), `f.yaml:2`) || !strings.Contains(err.Error(), `"*100"`) {
			t.Fatalf("want a type error naming \"*100\" on line 2, got %v", err)
		}
	})
}

func TestInterpolationErrorsNameTheVariableAndLine(t *testing.T) {
	env := map[string]string{"NL": "a\nb", "SP": " a"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name, in, want string
	}{
		{"a line break in a single-quoted value", "a: 1\nk: '${NL}'\n",
			`2: ${NL}: the value of NL holds a line break or a control character, which a single-quoted value cannot hold: write the reference in double quotes ("${NL}")`},
		{"a line break in a block scalar", "k: |\n  x ${NL}\n",
			`2: ${NL}: the value of NL holds a line break or a control character, which a block scalar cannot hold: write the reference in double quotes ("${NL}")`},
		{"a value that would change a folded scalar's lines", "k: >\n  ${SP}\n  b\n",
			`2: ${SP}: the value of SP cannot be written here as it is: write the reference in double quotes ("${SP}")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, probs := interpolate(tt.in, getenv)
			var errs []string
			for _, p := range probs {
				errs = append(errs, itoa(p.Line)+": "+p.Message)
			}
			if !slices.Equal(errs, []string{tt.want}) {
				t.Fatalf("problems:\n  got  %q\n  want %q", errs, tt.want)
			}
		})
	}
}

// FuzzInterpolatedValue checks that a variable's value reads back as
// itself wherever its reference stands, or is refused naming the variable.
func FuzzInterpolatedValue(f *testing.F) {
	for _, v := range literalValues {
		f.Add(v, uint8(0))
	}
	places := []string{"mqtt: {username: ${U}}\n", "mqtt:\n  username: ${U} # c\n", "mqtt:\n  username: \"${U}\"\n",
		"mqtt:\n  username: '${U}'\n", "mqtt:\n  username: |-\n    ${U}\n", "mqtt:\n  username: x${U}x\n"}
	f.Fuzz(func(t *testing.T, v string, place uint8) {
		file := places[int(place)%len(places)]
		c, err := Parse([]byte(file), "f.yaml", func(k string) (string, bool) { return v, k == "U" })
		if err != nil {
			if !strings.Contains(err.Error(), "${U}") && !strings.Contains(err.Error(), "client_id") {
				t.Fatalf("%q in %q: the error does not name ${U}: %v", v, file, err)
			}
			return
		}
		want := v
		if strings.Contains(file, "x${U}x") {
			want = "x" + v + "x"
		}
		if c.MQTT.Username != want {
			t.Fatalf("%q in %q: username %q", v, file, c.MQTT.Username)
		}
	})
}
