package main

import (
	"strings"
	"testing"
)

// An action of audit or store given an argument too many is a usage
// error naming the arguments it got, not the list of actions, as if the
// action itself were unknown.
func TestAnActionGivenAnArgumentTooManyNamesIt(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "forget-sink", "jsonl", "other", "--reason", "gone"}, `replayguard audit: usage: audit forget-sink takes one sink name, got ["jsonl" "other"]` + "\n"},
		{[]string{"audit", "verify", "extra"}, `replayguard audit: usage: audit verify takes no arguments, got ["extra"]` + "\n"},
		{[]string{"audit", "export", "5"}, `replayguard audit: usage: audit export takes no arguments, got ["5"]` + "\n"},
		{[]string{"store", "loss", "extra"}, `replayguard store: usage: store loss takes no arguments, got ["extra"]` + "\n"},
		{[]string{"audit", "forget-sink", "--reason", "gone"}, "replayguard audit: usage: audit forget-sink takes the sink's name\n"},
	} {
		cfg := testConfig(t, "")
		_, errs, code := cli(t, "", append(c.args, "-c", cfg)...)
		if code != exitUsage || !strings.HasPrefix(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d beginning %q", c.args, code, errs, exitUsage, c.want)
		}
	}
}
