package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/store/embedded"
)

// TestACommandOnAHeldStoreWithoutAnAPISaysWhatToDo: with http.listen off a
// command cannot go through the API of the process that holds the
// embedded store; it says so, and what to do, rather than only that the
// store is locked.
func TestACommandOnAHeldStoreWithoutAnAPISaysWhatToDo(t *testing.T) {
	cfg := testConfig(t, "")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), "http: {listen: 127.0.0.1:9780}", `http: {listen: "off"}`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	mustIngest(t, cfg, meterFeed(t, 0, 5))
	held, err := embedded.Open(filepath.Join(filepath.Dir(cfg), "data"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, args := range [][]string{{"state"}, {"quarantine", "list"}, {"audit", "verify"}} {
		_, errs, code := cli(t, "", append(args, "-c", cfg)...)
		if code != 1 || !strings.Contains(errs, "with http.listen off there is no API of the process holding it to go through") {
			t.Fatalf("%s on a held store without an API: exit %d\n%s", strings.Join(args, " "), code, errs)
		}
	}
}
