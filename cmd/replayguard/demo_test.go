package main

import (
	"strings"
	"testing"
)

func TestDemoTellsThePlantStory(t *testing.T) {
	out, errs, code := cli(t, "", "demo", "--story", "plant", "--pace", "10ms", "--listen", "127.0.0.1:0", "--report", "", "--log-level", "error")
	if code != exitOK {
		t.Fatalf("demo --story plant: exit %d\n%s\n%s", code, errs, out)
	}
	for _, want := range []string{"replayguard demo --story plant: ", "seq wraps 255 → 0", "replayguard's is exact.", "Audit chain intact: "} {
		if !strings.Contains(out, want) {
			t.Errorf("demo --story plant: output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoRefusesAnUnknownStory(t *testing.T) {
	out, errs, code := cli(t, "", "demo", "--story", "nope")
	if code != exitUsage {
		t.Errorf("demo --story nope: exit %d, want %d (usage)", code, exitUsage)
	}
	if want := `replayguard demo: usage: --story "nope": the stories are incident, plant and redundant`; !strings.Contains(errs, want) {
		t.Errorf("demo --story nope: stderr %q, want it to contain %q", errs, want)
	}
	if out != "" {
		t.Errorf("demo --story nope printed %q: it must refuse before the story starts", out)
	}
}

// A flag's value the demo cannot take is a command-line mistake, said once
// and plainly: exit status 2, the flag named, before the story starts.
func TestDemoRefusesABadFlagValueAsAUsageError(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pace", "-1s"}, "replayguard demo: usage: --pace -1s is negative"},
		{[]string{"--hold", "-5m"}, "replayguard demo: usage: --hold -5m0s is negative"},
		{[]string{"--listen", "0.0.0.0:9794"}, `replayguard demo: usage: --listen "0.0.0.0:9794": the demo serves loopback only`},
		{[]string{"--listen", "127.0.0.1:99999"}, `replayguard demo: usage: --listen "127.0.0.1:99999": port "99999" is not from 0 to 65535`},
	} {
		out, errs, code := cli(t, "", append([]string{"demo"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("demo %q: exit %d, stderr %q, stdout %q; want exit %d saying %q", tc.args, code, errs, out, exitUsage, tc.want)
		}
	}
}
