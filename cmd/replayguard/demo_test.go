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
