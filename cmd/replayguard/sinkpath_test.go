package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A file sink that cannot write its file (its directory missing, a file
// where the directory should be, a directory where the file should be) is
// refused by lint, and by run before it connects or says ready, naming the
// sink and the path: started, run would report ready while every record
// waited behind the sink's cursor.
func TestRunAndLintRefuseAFileSinkThatCannotWriteItsFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "afile"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ path, why string }{
		"its directory is missing": {filepath.Join(dir, "missing", "audit.jsonl"), "directory " + filepath.Join(dir, "missing") + " does not exist"},
		"its directory is a file":  {filepath.Join(dir, "afile", "audit.jsonl"), filepath.Join(dir, "afile") + " is not a directory"},
		"the file is a directory":  {filepath.Join(dir, "adir"), filepath.Join(dir, "adir") + " is not a regular file"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "replayguard.yaml")
			body := "store: {kind: memory}\nroutes:\n  - {name: m, topic: a/#, source: [\"topic[1]\"], id: msgId, effects: [{entity: \"m/{topic[1]}\", add: {kwh: kwh}}]}\n" +
				"mqtt: {brokers: [tcp://127.0.0.1:1], client_id: rg-sink-path}\nhttp: {listen: 127.0.0.1:0}\n" +
				fmt.Sprintf("audit: {sinks: [{name: jsonl, kind: file, path: %s}]}\n", c.path)
			if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			// Without the refusal run would try the broker until stopped.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var out, errb bytes.Buffer
			code := run(ctx, []string{"run", "-c", cfg}, strings.NewReader(""), &out, &errb)
			if want := "replayguard run: audit.sinks[0] (jsonl).path: " + c.why + "\n"; code != 1 || errb.String() != want {
				t.Fatalf("run: exit %d, stderr %q; want exit 1 and %q", code, errb.String(), want)
			}
			if _, errs, code := cli(t, "", "lint", "-c", cfg); code != 1 || !strings.Contains(errs, cfg+":6: audit.sinks[0] (jsonl).path: "+c.why) {
				t.Fatalf("lint: exit %d, stderr %q; want exit 1 naming the sink's path: %s", code, errs, c.why)
			}
		})
	}
}
