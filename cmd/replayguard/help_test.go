package main

import (
	"flag"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// A flag as a help line writes it: "--batch", "-o", after a space, "[",
// "(" or "|".
var helpFlag = regexp.MustCompile(`(?:^|[\s\[(|])--?([a-z][a-z0-9-]*)`)

// Each command's line in `replayguard help` names every flag the command
// defines, and no flag it does not: the help cannot fall behind a flag
// added to a command, nor promise one the command refuses.
func TestTheHelpLineOfEachCommandNamesItsFlags(t *testing.T) {
	out, errs, code := cli(t, "", "help")
	if code != exitOK {
		t.Fatalf("help: exit %d\n%s", code, errs)
	}
	lines := helpLines(out)
	var verbs []string
	for verb := range commands {
		verbs = append(verbs, verb)
	}
	sort.Strings(verbs)
	for _, verb := range verbs {
		t.Run("the help line of "+verb+" names its flags", func(t *testing.T) {
			fs := flag.NewFlagSet(verb, flag.ContinueOnError)
			if f := commands[verb].flags; f != nil {
				f(fs)
			}
			named := map[string]bool{}
			for _, m := range helpFlag.FindAllStringSubmatch(lines[verb], -1) {
				named[m[1]] = true
			}
			fs.VisitAll(func(f *flag.Flag) {
				if !named[f.Name] {
					t.Errorf("%s defines --%s, which its help line lacks: %q", verb, f.Name, lines[verb])
				}
			})
			for name := range named {
				if fs.Lookup(name) == nil && !slices.Contains([]string{"config", "c", "log-level"}, name) {
					t.Errorf("%s's help line names --%s, which %s does not take: %q", verb, name, verb, lines[verb])
				}
			}
		})
	}
}

// --token-name chooses the token sent to a running daemon's API by every
// action of quarantine, outbox and store, their lists and loss included:
// the help sets it after the actions, not beside the writes alone.
func TestTheHelpPutsTokenNameAfterEveryActionThatTakesIt(t *testing.T) {
	out, _, _ := cli(t, "", "help")
	lines := helpLines(out)
	for _, verb := range []string{"quarantine", "outbox", "store"} {
		line := lines[verb]
		actions, ok := strings.CutSuffix(line, ") [--token-name NAME]")
		if !strings.HasPrefix(line, "(") || !ok || strings.Contains(actions, "token-name") {
			t.Errorf("help for %s: %q, want (ACTIONS) [--token-name NAME]", verb, line)
		}
	}
}

// helpLines maps each command to the arguments its help line shows after
// "replayguard VERB".
func helpLines(help string) map[string]string {
	lines := map[string]string{}
	for _, l := range strings.Split(help, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "replayguard ")
		if !ok {
			continue
		}
		verb, args, _ := strings.Cut(rest, " ")
		lines[verb] = args
	}
	return lines
}

// The argument a command's --help shows for a flag, taken from a quoted
// word of its usage, is the one its line in `replayguard help` (and
// docs/commands.md) shows: `report --help` reads "-entity E", never
// another word of the usage.
func TestTheArgumentEachFlagsHelpShowsIsTheHelpLines(t *testing.T) {
	out, errs, code := cli(t, "", "help")
	if code != exitOK {
		t.Fatalf("help: exit %d\n%s", code, errs)
	}
	lines := helpLines(out)
	for verb, c := range commands {
		if c.flags == nil {
			continue
		}
		fs := flag.NewFlagSet(verb, flag.ContinueOnError)
		c.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			arg, _ := flag.UnquoteUsage(f)
			if slices.Contains([]string{"", "string", "int", "float", "duration", "value", "uint"}, arg) {
				return
			}
			if !strings.Contains(lines[verb], "--"+f.Name+" "+arg) && !strings.Contains(lines[verb], "-"+f.Name+" "+arg) {
				t.Errorf("%s --help shows -%s %s, which its help line does not: %q", verb, f.Name, arg, lines[verb])
			}
		})
	}
}

// run consumes a JetStream stream as well as MQTT: its help line says so,
// as docs/commands.md does.
func TestRunsHelpLineNamesJetStream(t *testing.T) {
	out, errs, code := cli(t, "", "help")
	if code != exitOK {
		t.Fatalf("help: exit %d\n%s", code, errs)
	}
	want := "  run         consume from MQTT (or a JetStream stream, input: jetstream) until SIGINT/SIGTERM, then drain and stop\n"
	if !strings.Contains(out, want) {
		t.Fatalf("help:\n%s\nwant the line %q", out, want)
	}
}

// The usage line a command-line mistake prints ends with its last word,
// not a space, whether or not the command takes arguments.
func TestAUsageLineEndsWithoutATrailingSpace(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lint", "--bogus"}, "\nusage: replayguard lint [--config FILE]\n"},
		{[]string{"version", "extra"}, "\nusage: replayguard version\n"},
		{[]string{"sources", "--bogus"}, "\nusage: replayguard sources [--config FILE] [--json] [--token-name NAME]\n"},
	} {
		_, errs, code := cli(t, "", c.args...)
		if code != exitUsage || !strings.HasSuffix(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d ending %q", c.args, code, errs, exitUsage, c.want)
		}
	}
}
