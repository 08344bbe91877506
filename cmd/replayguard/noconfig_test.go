package main

import (
	"strings"
	"testing"
)

// TestACommandThatReadsNoConfigurationNeitherShowsNorTakesConfig: demo,
// bench and version read no configuration, so their usage line offers no
// --config, and a --config given to them is refused (exit 2) rather than
// read by nothing: `bench -c plant.yaml` measures the embedded store
// whatever plant.yaml says.
func TestACommandThatReadsNoConfigurationNeitherShowsNorTakesConfig(t *testing.T) {
	for _, verb := range []string{"demo", "bench", "version"} {
		_, errs, code := cli(t, "", verb, "--bogus")
		if code != exitUsage || strings.Contains(errs, "--config") || !strings.Contains(errs, "usage: replayguard "+verb) {
			t.Errorf("%s --bogus: exit %d; want %d and a usage line without --config:\n%s", verb, code, exitUsage, errs)
		}
		for _, flag := range []string{"--config", "-c"} {
			_, errs, code = cli(t, "", verb, flag, "plant.yaml")
			if code != exitUsage || !strings.Contains(errs, "-"+strings.TrimLeft(flag, "-")) {
				t.Errorf("%s %s plant.yaml: exit %d; want %d naming the flag:\n%s", verb, flag, code, exitUsage, errs)
			}
		}
	}
	out, _, _ := cli(t, "", "help")
	if !strings.Contains(out, "Every command but demo, bench and version takes --config/-c FILE") {
		t.Errorf("help says every command takes --config:\n%s", out)
	}
}
