package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/config"
)

// run creates the embedded store's directory, parents and all, and stops
// at start when it cannot: lint says so too, rather than "ok" for a
// store.path that is a file or lies under one.
func TestLintRefusesAnEmbeddedStorePathRunCannotCreate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "capture.jsonl")
	if err := os.WriteFile(file, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string // want: the problem's start, "" for none
	}{
		{"a regular file", file, "store.path: " + file + " is not a directory"},
		{"a directory under a regular file", filepath.Join(file, "data"), "store.path: " + file + " is not a directory"},
		{"a directory to create", filepath.Join(dir, "new", "data"), ""},
		{"an existing directory", dir, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("store: {kind: embedded, path: '"+tc.path+"'}\n"), "rg.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			ps := CheckLocal(cfg) // before run's open creates the directory
			st, runErr := openStore(context.Background(), cfg.Store, cfg.Window, false, nil)
			if runErr == nil {
				st.Close()
			}
			if (runErr != nil) != (tc.want != "") {
				t.Fatalf("run's open of the store: %v, want an error: %t", runErr, tc.want != "")
			}
			switch {
			case tc.want == "" && len(ps) > 0:
				t.Errorf("CheckLocal = %v, want no problem", ps)
			case tc.want != "" && (len(ps) != 1 || !strings.HasPrefix(ps[0].Path+": "+ps[0].Message, tc.want)):
				t.Errorf("CheckLocal = %v, want one problem starting %q (run refuses: %v)", ps, tc.want, runErr)
			}
		})
	}
}
